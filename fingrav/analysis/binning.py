"""Execution-time binning (METHOD.md step 6): keep the golden runs.

Per measure run, `ssp_exec_time_ns` is the GPU-clock duration of main-segment execution `ssp_index`.
The golden bin is the most populated window [x, x * (1 + margin)] over those times (x one of the
times; ties go to the smallest x), found with a sliding window over the sorted times (O(n log n)).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis._common import MAIN, PRED, PlanView, measure_runs
from fingrav.errors import DataError

logger = logging.getLogger(__name__)

BINNED_SCHEMA = {"run": pl.Int32, "ssp_exec_time_ns": pl.Int64, "golden": pl.Boolean, "reason": pl.String}

# reasons a run is not golden
OUTSIDE_BIN = "outside_bin"
INCOMPLETE = "incomplete"  # the run lacks executions (main or predecessor segment)
BAD_TIME = "bad_time"  # the SSP execution's duration is not positive (broken stamps)


def golden_window(times_ns: np.ndarray, margin: float) -> tuple[int, int, int]:
    """The most populated window [x, x*(1+margin)] over `times_ns` (any order, positive).

    Returns (low_ns, high_ns, count): low_ns = x, high_ns = floor(x*(1+margin)), so a time t is in
    the window iff low_ns <= t <= high_ns. Ties go to the smallest x. Empty input -> (0, -1, 0)."""
    if margin < 0:
        raise ValueError(f"margin must be >= 0, got {margin}")
    t = np.sort(np.asarray(times_ns, dtype=np.int64))
    if t.size == 0:
        return 0, -1, 0
    high = np.floor(t.astype(np.float64) * (1.0 + margin)).astype(np.int64)
    high = np.maximum(high, t)  # float rounding can never shrink the window below x itself
    counts = np.searchsorted(t, high, side="right") - np.arange(t.size)
    best = int(np.argmax(counts))
    return int(t[best]), int(high[best]), int(counts[best])


def ssp_exec_times(executions: pl.DataFrame, runs: pl.DataFrame, plan: Mapping[str, Any]) -> pl.DataFrame:
    """Per measure run: run:int32, ssp_exec_time_ns:int64 (null when missing), complete:bool.

    A run is complete when it has main executions 0..executions_per_run-1 and predecessor
    executions 0..predecessor_count-1 (each exactly once)."""
    view = PlanView.from_plan(plan)
    mruns = measure_runs(runs)
    ex = executions.select(
        pl.col("run").cast(pl.Int32),
        pl.col("segment").cast(pl.String),
        pl.col("exec_index").cast(pl.Int32),
        (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("dur_ns"),
    ).join(mruns, on="run", how="semi")
    per_run = ex.group_by("run").agg(
        n_main=((pl.col("segment") == MAIN) & pl.col("exec_index").is_between(0, view.executions_per_run - 1)).sum(),
        n_main_unique=pl.col("exec_index").filter(pl.col("segment") == MAIN).n_unique(),
        n_pred=((pl.col("segment") == PRED) & pl.col("exec_index").is_between(0, view.predecessor_count - 1)).sum(),
        n_pred_unique=pl.col("exec_index").filter(pl.col("segment") == PRED).n_unique(),
        n_all=pl.len(),
        ssp_exec_time_ns=pl.col("dur_ns")
        .filter((pl.col("segment") == MAIN) & (pl.col("exec_index") == view.ssp_index))
        .first(),
    )
    expected = view.executions_per_run + view.predecessor_count
    out = mruns.join(per_run, on="run", how="left").select(
        "run",
        pl.col("ssp_exec_time_ns").cast(pl.Int64),
        complete=(
            (pl.col("n_main") == view.executions_per_run)
            & (pl.col("n_main_unique") == view.executions_per_run)
            & (pl.col("n_pred") == view.predecessor_count)
            & (pl.col("n_pred_unique").fill_null(0) == view.predecessor_count)
            & (pl.col("n_all") == expected)
        ).fill_null(False),
    )
    return out


def bin_runs(
    executions: pl.DataFrame, runs: pl.DataFrame, plan: Mapping[str, Any], margin: float | None = None
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """Execution-time binning of the measure runs.

    executions / runs: raw frames (rawio schemas); plan: plan.json; margin: fraction (0.02 = 2 %),
    None -> plan["margin"].
    Returns (binned, meta): binned has one row per measure run, sorted by run: run:int32,
    ssp_exec_time_ns:int64 (null when the run lacks that execution), golden:bool, reason:str (null
    when golden, else "outside_bin" | "incomplete" | "bad_time"); meta = {margin, bin_low_ns,
    bin_high_ns (inclusive bounds, ns), runs_total, runs_golden, reasons: {reason: count}}.
    """
    view = PlanView.from_plan(plan)
    if margin is None:
        margin = view.margin
    if margin is None:
        raise DataError("no binning margin: neither given nor in plan.json")
    margin = float(margin)
    if not 0 <= margin <= 1:
        raise DataError(f"binning margin {margin} outside [0, 1]")

    times = ssp_exec_times(executions, runs, plan)
    usable = times.filter(pl.col("complete") & (pl.col("ssp_exec_time_ns") > 0))
    low, high, count = golden_window(usable["ssp_exec_time_ns"].to_numpy(), margin)
    t = pl.col("ssp_exec_time_ns")
    binned = (
        times.select(
            "run",
            "ssp_exec_time_ns",
            reason=pl.when(~pl.col("complete"))
            .then(pl.lit(INCOMPLETE))
            .when(t <= 0)
            .then(pl.lit(BAD_TIME))
            .when((t < low) | (t > high))
            .then(pl.lit(OUTSIDE_BIN))
            .otherwise(pl.lit(None, dtype=pl.String)),
        )
        .with_columns(golden=pl.col("reason").is_null())
        .select(list(BINNED_SCHEMA))
        .cast(BINNED_SCHEMA)
        .sort("run")
    )

    reasons = binned.filter(~pl.col("golden")).group_by("reason").len().sort("reason")
    meta: dict[str, Any] = {
        "margin": margin,
        "bin_low_ns": low if count else None,
        "bin_high_ns": high if count else None,
        "runs_total": binned.height,
        "runs_golden": int(binned["golden"].sum()),
        "reasons": dict(zip(reasons["reason"].to_list(), reasons["len"].to_list(), strict=True)),
    }
    if meta["runs_golden"] != count:  # pragma: no cover - internal consistency
        raise AssertionError(f"golden count {meta['runs_golden']} != window count {count}")
    logger.info(
        "binning: %d/%d runs golden in [%s, %s] ns (margin %.3g); dropped %s",
        meta["runs_golden"],
        meta["runs_total"],
        meta["bin_low_ns"],
        meta["bin_high_ns"],
        margin,
        meta["reasons"],
    )
    return binned, meta
