"""Execution roles and run kinds as polars expressions (the rules are `fingrav.contracts.roles` /
`fingrav.contracts.plan.Plan.role_of`; this is the same rule over a frame)."""

from __future__ import annotations

import polars as pl

from fingrav.contracts import roles as R
from fingrav.contracts.plan import Plan

PHASE_DTYPE = pl.Enum(list(R.MEASURE_PHASES))
ROLE_DTYPE = pl.Enum(list(R.ROLES))
SEGMENT_DTYPE = pl.Enum(list(R.SEGMENTS))


def role_expr(
    plan: Plan, segment: str = "segment", exec_index: str = "exec_index", phase: str | None = "phase"
) -> pl.Expr:
    """The role of an execution, as ROLE_DTYPE.

    SSP runs: pred | trail | ssp | sse | first | warmup (that precedence). SSE runs: pred | sse (main
    sse_index) | first (main 0 with a predecessor) | warmup. `phase`: the column holding the run kind
    ("sse" | "ssp"); None: every execution is of an SSP run."""
    seg = pl.col(segment)  # String or Enum: compared with a literal directly (no per-row cast)
    i = pl.col(exec_index)
    is_sse_run = pl.col(phase) == R.SSE if phase is not None else pl.lit(False)
    return (
        pl.when(seg == R.PRED)
        .then(pl.lit(R.PRED))
        .when(~is_sse_run & (i >= plan.trail_index))
        .then(pl.lit(R.TRAIL))
        .when(~is_sse_run & (i >= plan.ssp_index))
        .then(pl.lit(R.SSP))
        .when(i == plan.sse_index)
        .then(pl.lit(R.SSE))
        .when((i == 0) & pl.lit(plan.predecessor_count > 0))
        .then(pl.lit(R.FIRST))
        .otherwise(pl.lit(R.WARMUP))
        .cast(ROLE_DTYPE)
    )


def measure_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The measure runs of a runs frame: run:int32, phase:str ("sse" | "ssp"), sorted by run."""
    return (
        runs.lazy()
        .select(pl.col("run").cast(pl.Int32), pl.col("phase").cast(pl.String))
        .filter(pl.col("phase").is_in(list(R.MEASURE_PHASES)))
        .unique("run", keep="first")
        .sort("run")
        .collect()
    )
