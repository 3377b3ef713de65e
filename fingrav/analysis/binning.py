"""Execution-time binning (METHOD.md step 6): keep the golden runs, per kind of measure run.

SSP runs are binned on `bin_exec_time_ns` = the GPU-clock duration of main-segment execution
`ssp_index` (also given as `ssp_exec_time_ns`); SSE runs separately on the duration of main execution
`sse_index`, with the same margin. The golden bin of each kind is the most populated window
[x, x * (1 + margin)] over its times (x one of the times; ties go to the smallest x), found with a
sliding window over the sorted times (O(n log n)). Completeness is checked per kind against its own
executions per run (plan executions_per_run / sse_executions_per_run, plus predecessor_count).
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from fingrav.analysis.roles import measure_runs
from fingrav.contracts.binning import BinningSummary, KindBin
from fingrav.contracts.plan import Plan
from fingrav.contracts.roles import MAIN, MEASURE_PHASES, PRED, SSE, SSP
from fingrav.contracts.tables import BAD_TIME, BINNED, INCOMPLETE, OUTSIDE_BIN, polars_schema

logger = logging.getLogger(__name__)

BINNED_SCHEMA = polars_schema(BINNED)


def golden_window(times_ns: np.ndarray, margin: float) -> tuple[int, int, int]:
    """The most populated window [x, x*(1+margin)] over `times_ns` (any order, positive).

    Returns (low_ns, high_ns, count): low_ns = x, high_ns = floor(x*(1+margin)), so a time t is in
    the window iff low_ns <= t <= high_ns. Ties go to the smallest x. Empty input -> (0, -1, 0)."""
    t = np.sort(np.asarray(times_ns, dtype=np.int64))
    if t.size == 0:
        return 0, -1, 0
    high = np.floor(t.astype(np.float64) * (1.0 + margin)).astype(np.int64)
    high = np.maximum(high, t)  # float rounding can never shrink the window below x itself
    counts = np.searchsorted(t, high, side="right") - np.arange(t.size)
    best = int(np.argmax(counts))
    return int(t[best]), int(high[best]), int(counts[best])


def bin_exec_times(executions: pl.DataFrame, runs: pl.DataFrame, plan: Plan) -> pl.DataFrame:
    """Per measure run: run:int32, phase:str ("sse" | "ssp"), bin_exec_time_ns:int64 (duration of main
    execution sse_index of an SSE run / ssp_index of an SSP run; null when missing), complete:bool.

    A run is complete when it has main executions 0 .. n-1, n the executions per run of its kind, and
    predecessor executions 0..predecessor_count-1 (each exactly once)."""
    mruns = measure_runs(runs)
    is_sse = pl.col("phase") == SSE
    n_main = pl.when(is_sse).then(plan.sse_executions_per_run).otherwise(plan.executions_per_run)
    bin_index = pl.when(is_sse).then(plan.sse_index).otherwise(plan.ssp_index)
    ex = (
        executions.lazy()
        .select(
            pl.col("run").cast(pl.Int32),
            pl.col("segment").cast(pl.String),
            pl.col("exec_index").cast(pl.Int32),
            (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("dur_ns"),
        )
        .join(mruns.lazy(), on="run", how="inner")
        .with_columns(n_main=n_main, bin_index=bin_index)
    )
    main = pl.col("segment") == MAIN
    per_run = ex.group_by("run").agg(
        n_main=(main & pl.col("exec_index").is_between(0, pl.col("n_main") - 1)).sum(),
        n_main_unique=pl.col("exec_index").filter(main).n_unique(),
        n_pred=((pl.col("segment") == PRED) & pl.col("exec_index").is_between(0, plan.predecessor_count - 1)).sum(),
        n_pred_unique=pl.col("exec_index").filter(pl.col("segment") == PRED).n_unique(),
        n_all=pl.len(),
        bin_exec_time_ns=pl.col("dur_ns").filter(main & (pl.col("exec_index") == pl.col("bin_index"))).first(),
    )
    want = n_main.cast(pl.Int64)
    return (
        mruns.lazy()
        .join(per_run, on="run", how="left")
        .select(
            "run",
            "phase",
            pl.col("bin_exec_time_ns").cast(pl.Int64),
            complete=(
                (pl.col("n_main") == want)
                & (pl.col("n_main_unique") == want)
                & (pl.col("n_pred") == plan.predecessor_count)
                & (pl.col("n_pred_unique").fill_null(0) == plan.predecessor_count)
                & (pl.col("n_all") == want + plan.predecessor_count)
            ).fill_null(False),
        )
        .sort("run")
        .collect()
    )


def _phase_meta(binned: pl.DataFrame, low: int, high: int, count: int) -> KindBin:
    """Bin bounds and counts of one kind of run."""
    reasons = binned.filter(~pl.col("golden")).group_by("reason").len().sort("reason")
    return KindBin(
        bin_low_ns=low if count else None,
        bin_high_ns=high if count else None,
        runs_total=binned.height,
        runs_golden=int(binned["golden"].sum()),
        reasons=dict(zip(reasons["reason"].to_list(), reasons["len"].to_list(), strict=True)),
    )


def bin_runs(
    executions: pl.DataFrame, runs: pl.DataFrame, plan: Plan, margin: float
) -> tuple[pl.DataFrame, BinningSummary]:
    """Execution-time binning of the measure runs, each kind (SSE, SSP) on its own.

    executions / runs: raw frames (`fingrav.contracts.tables.RAW`); plan: plan.json; margin: fraction
    (0.02 = 2 %; `Plan.margin_for_binning` decides it).
    Returns (binned, meta): binned (BINNED_SCHEMA) has one row per measure run, sorted by run: run,
    phase ("sse" | "ssp"), bin_exec_time_ns (ns, the binned duration; null when the run lacks that
    execution), ssp_exec_time_ns (= bin_exec_time_ns for SSP runs, null for SSE runs), golden,
    reason (null when golden, else "outside_bin" | "incomplete" | "bad_time");
    meta: `fingrav.contracts.binning.BinningSummary` (margin, each kind's bin, the SSP kind's at the top level).
    """
    margin = float(margin)

    times = bin_exec_times(executions, runs, plan)
    parts: list[pl.DataFrame] = []
    bins: dict[str, KindBin] = {}
    for phase in (SSP, SSE):
        sub = times.filter(pl.col("phase") == phase)
        usable = sub.filter(pl.col("complete") & (pl.col("bin_exec_time_ns") > 0))
        low, high, count = golden_window(usable["bin_exec_time_ns"].to_numpy(), margin)
        t = pl.col("bin_exec_time_ns")
        b = sub.select(
            "run",
            "phase",
            "bin_exec_time_ns",
            ssp_exec_time_ns=t if phase == SSP else pl.lit(None, dtype=pl.Int64),
            reason=pl.when(~pl.col("complete"))
            .then(pl.lit(INCOMPLETE))
            .when(t <= 0)
            .then(pl.lit(BAD_TIME))
            .when((t < low) | (t > high))
            .then(pl.lit(OUTSIDE_BIN))
            .otherwise(pl.lit(None, dtype=pl.String)),
        ).with_columns(golden=pl.col("reason").is_null())
        bins[phase] = _phase_meta(b, low, high, count)
        if bins[phase].runs_golden != count:  # pragma: no cover - internal consistency
            raise AssertionError(f"{phase}: golden count {bins[phase].runs_golden} != window count {count}")
        parts.append(b.select(list(BINNED_SCHEMA)).cast(BINNED_SCHEMA))
    binned = pl.concat(parts).sort("run")

    meta = BinningSummary(margin=margin, **bins[SSP].model_dump(), bins=bins)
    for phase in MEASURE_PHASES:
        m = bins[phase]
        if m.runs_total:
            logger.info(
                "binning %s runs: %d/%d golden in [%s, %s] ns (margin %.3g); dropped %s",
                phase,
                m.runs_golden,
                m.runs_total,
                m.bin_low_ns,
                m.bin_high_ns,
                margin,
                m.reasons,
            )
    return binned, meta
