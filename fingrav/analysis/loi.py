"""LOIs and TOIs (METHOD.md step 7): map executions to the host clock and assign power samples.

Pure functions over polars frames. Executions of measure runs (both kinds: SSE runs and SSP runs)
are mapped from the GPU clock to the host clock with a clock fit; sample times are shifted back by
the sensor delay (when delay correction is on); each sample is assigned, with an as-of join, to the
execution whose host-clock *cycle* [exec_start_ns, cycle_end_ns) contains it, where cycle_end_ns is
the start of the next
execution of the same run (the launch gap belongs to the execution before it: SSP power is the
steady-state cycle power, ARCHITECTURE.md) or, for a run's last execution, its end. Samples outside
every measure execution cycle are not LOIs and are dropped (timing, probe and reference runs are
not measure runs). toi_frac = toi_ns / execution duration, so a LOI in the launch gap has
toi_frac >= 1.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import numpy as np
import polars as pl

from fingrav.analysis.roles import PHASE_DTYPE, SEGMENT_DTYPE, measure_runs, role_expr
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.roles import SSP
from fingrav.contracts.tables import LOIS, polars_schema

logger = logging.getLogger(__name__)

LOIS_SCHEMA = polars_schema(LOIS)


def host_executions(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    plan: Plan,
    clock: ClockMap,
    binned: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Executions of measure runs (SSE and SSP runs) on the host clock, sorted by exec_start_ns.

    Columns: run:int32, phase:Enum ("sse" | "ssp"), segment:Enum, exec_index:int32, role:Enum (by
    the run's kind, ARCHITECTURE.md), golden:bool (false for runs not golden in `binned`; all false
    without `binned`), exec_start_ns, exec_end_ns:int64 (host clock),
    dur_ns:int64 (host-clock duration), cycle_end_ns:int64 (next execution's start in the run, or
    exec_end_ns for the run's last one), cycle_ns:int64 (cycle_end_ns - exec_start_ns),
    has_next:bool (a later execution of the run exists, so the cycle is complete)."""
    cp = clock
    if runs is not None:
        ex = executions.lazy().join(measure_runs(runs).lazy(), on="run", how="inner")
    else:  # every execution is of an SSP run
        ex = executions.lazy().with_columns(phase=pl.lit(SSP))
    if binned is not None:
        gold = binned.select(pl.col("run").cast(pl.Int32), pl.col("golden").cast(pl.Boolean))
    else:
        gold = pl.DataFrame(schema={"run": pl.Int32, "golden": pl.Boolean})
    out = (
        ex.select(
            pl.col("run").cast(pl.Int32),
            pl.col("phase").cast(pl.String).cast(PHASE_DTYPE),
            pl.col("segment").cast(pl.String).cast(SEGMENT_DTYPE),
            pl.col("exec_index").cast(pl.Int32),
            cp.host_expr("gpu_start_ns").alias("exec_start_ns"),
            cp.host_expr("gpu_end_ns").alias("exec_end_ns"),
        )
        .with_columns(role=role_expr(plan), dur_ns=pl.col("exec_end_ns") - pl.col("exec_start_ns"))
        .sort("run", "exec_start_ns")
        # sorted by run: the next row's start where it is of the same run (what shift(-1).over("run") gives, without
        # its per-run grouping)
        .with_columns(
            next_start=pl.when(pl.col("run").shift(-1) == pl.col("run")).then(pl.col("exec_start_ns").shift(-1))
        )
        .with_columns(
            has_next=pl.col("next_start").is_not_null(),
            cycle_end_ns=pl.coalesce("next_start", "exec_end_ns"),
        )
        .with_columns(cycle_ns=pl.col("cycle_end_ns") - pl.col("exec_start_ns"))
        .drop("next_start")
        .join(gold.lazy(), on="run", how="left")
        .with_columns(pl.col("golden").fill_null(False))
        .sort("exec_start_ns")
        .collect()
    )
    n_overlap = out.select((pl.col("exec_start_ns").shift(-1) < pl.col("exec_end_ns")).sum()).item()
    if n_overlap:
        logger.warning(
            "%d executions overlap the next one on the host clock; samples in an overlap go to the later execution",
            n_overlap,
        )
    return out


def assign_lois(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    delay_ns: int | Mapping[str, int] = 0,
    default_delay_ns: int | None = None,
) -> pl.DataFrame:
    """Assign samples to the executions containing them; one row per (sample, channel) LOI.

    samples: raw samples (t_ns host clock, channel, power_mw); host_execs: `host_executions`
    output; delay_ns: sensor delay (ns) subtracted from every sample time (0 = no correction), or
    {channel: delay_ns} with `default_delay_ns` (default 0) for channels not in it.
    Returns the lois frame (LOIS_SCHEMA, ARCHITECTURE.md), sorted by t_ns:
    t_ns = sample time - delay_ns; toi_ns = t_ns - exec_start_ns, in [0, cycle_ns);
    toi_frac = toi_ns / (exec_end_ns - exec_start_ns), >= 1 inside the launch gap."""
    if "phase" not in host_execs.columns:  # frames from before SSE runs existed: SSP runs only
        host_execs = host_execs.with_columns(phase=pl.lit(SSP))
    right = (
        host_execs.lazy()
        .select("exec_start_ns", "cycle_end_ns", "dur_ns", "run", "phase", "golden", "role", "segment", "exec_index")
        .filter((pl.col("dur_ns") > 0) & (pl.col("cycle_end_ns") > pl.col("exec_start_ns")))
        .sort("exec_start_ns")
    )
    shifts = [int(v) for v in delay_ns.values()] + [int(default_delay_ns or 0)] if isinstance(delay_ns, Mapping) else []
    n_samples = samples.height
    samples = _near_executions(samples, right, shifts or [int(delay_ns)])  # type: ignore[arg-type]
    shift = _delay_expr(delay_ns, default_delay_ns)
    left = (
        samples.lazy()
        .select(
            (pl.col("t_ns").cast(pl.Int64) - shift).alias("t_ns"),
            pl.col("channel").cast(pl.String),
            pl.col("power_mw").cast(pl.Float64),
        )
        .sort("t_ns")
    )
    lois = (
        left.join_asof(right, left_on="t_ns", right_on="exec_start_ns", strategy="backward", check_sortedness=False)
        .filter(pl.col("t_ns") < pl.col("cycle_end_ns"))
        .with_columns(toi_ns=pl.col("t_ns") - pl.col("exec_start_ns"))
        .select(
            "run",
            pl.col("phase").cast(pl.String),
            "golden",
            pl.col("role").cast(pl.String),
            pl.col("segment").cast(pl.String),
            "exec_index",
            "channel",
            "t_ns",
            "exec_start_ns",
            "toi_ns",
            (pl.col("toi_ns").cast(pl.Float64) / pl.col("dur_ns").cast(pl.Float64)).alias("toi_frac"),
            "power_mw",
        )
        .collect()
    )
    logger.info(
        "LOIs: %d of %d samples fall inside %d measure executions (delay correction %s ns)",
        lois.height,
        n_samples,
        host_execs.height,
        delay_ns,
    )
    return lois.cast(LOIS_SCHEMA)  # type: ignore[arg-type]


def _delay_expr(delay_ns: int | Mapping[str, int], default_delay_ns: int | None) -> pl.Expr:
    """The delay (ns, Int64) to subtract from each sample's time: one for all, or per channel (`default_delay_ns`,
    default 0, for channels not in the mapping)."""
    if isinstance(delay_ns, Mapping):
        return (
            pl.col("channel")
            .cast(pl.String)
            .replace_strict(
                {str(k): int(v) for k, v in delay_ns.items()}, default=int(default_delay_ns or 0), return_dtype=pl.Int64
            )
        )
    return pl.lit(int(delay_ns), dtype=pl.Int64)


def _near_executions(samples: pl.DataFrame, cycles: pl.LazyFrame, shifts: list[int]) -> pl.DataFrame:
    """The samples that can fall inside an execution cycle of `cycles` (exec_start_ns, cycle_end_ns, run) once
    shifted back by any of `shifts` (ns): those in a run's span [first start, last cycle end) widened by the
    smallest and largest shift. Most samples are idle between runs; the as-of join of `assign_lois` then sorts and
    joins only these (its result is the same: it drops every sample outside the cycles)."""
    spans = (
        cycles.group_by("run")
        .agg(lo=pl.col("exec_start_ns").min(), hi=pl.col("cycle_end_ns").max())
        .sort("lo")
        .collect()
    )
    if spans.height == 0 or samples.height == 0:
        return samples.clear()
    lo = spans["lo"].to_numpy().astype(np.int64) + min(shifts)
    hi = np.maximum.accumulate(spans["hi"].to_numpy().astype(np.int64) + max(shifts))  # the union, as lo is sorted
    t = samples["t_ns"].to_numpy().astype(np.int64)
    j = np.searchsorted(lo, t, side="right") - 1
    keep = (j >= 0) & (hi[np.maximum(j, 0)] > t)
    return samples.filter(pl.Series(keep))


def lois_frame(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    samples: pl.DataFrame,
    plan: Plan,
    binned: pl.DataFrame,
    clock: ClockMap,
    delay_ns: int | Mapping[str, int] = 0,
) -> pl.DataFrame:
    """`assign_lois(samples, host_executions(...), delay_ns)`: the lois.parquet content."""
    return assign_lois(samples, host_executions(executions, runs, plan, clock, binned), delay_ns)
