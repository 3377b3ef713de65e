"""Shared helpers of the analysis stages: plan fields, roles, and the GPU-to-host clock mapping.

Units: every time is int64 ns (`*_ns`), power mW (`*_mw`), energy mJ (`*_mj`); drift is a fraction
(1e-6 = 1 ppm) unless the name says `_ppm`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from fingrav.errors import DataError

logger = logging.getLogger(__name__)

# runs.parquet phases (ARCHITECTURE.md "Runs and roles"): measure runs are "sse" (warm-ups + 1
# executions, METHOD.md step 3) and "ssp" (up to the SSP tail, step 4); "measure" is the legacy name of
# "ssp" (before SSE runs existed) and is read as "ssp"
SSE_PHASE = "sse"
SSP_PHASE = "ssp"
LEGACY_MEASURE_PHASE = "measure"
MEASURE_PHASES = (SSE_PHASE, SSP_PHASE)
REFERENCE_PHASE = "reference"
PHASE_DTYPE = pl.Enum(list(MEASURE_PHASES))
MAIN = "main"
PRED = "pred"
TOTAL = "total"
# Role labels of executions (ARCHITECTURE.md "Runs and roles").
ROLES = ("ssp", "sse", "first", "warmup", "pred", "trail")
ROLE_DTYPE = pl.Enum(list(ROLES))
SEGMENT_DTYPE = pl.Enum([PRED, MAIN])


@dataclass(frozen=True)
class PlanView:
    """The plan.json fields the analysis needs (indices are main-segment execution indices).

    SSP runs: main executions 0 .. executions_per_run - 1; the SSP tail is ssp_index .. trail_index - 1;
    executions from trail_index on are trailing executions (role "trail", never profiled).
    SSE runs: main executions 0 .. sse_executions_per_run - 1, the SSE execution is sse_index (the
    last one). Both kinds start with predecessor_count predecessor executions ("pred" segment).
    The reference run: reference_executions back-to-back main executions (0 = no reference run)."""

    ssp_index: int
    sse_index: int
    executions_per_run: int
    predecessor_count: int
    exec_time_ns: float | None
    margin: float | None
    tail: int = 0
    trailing: int = 0
    sse_executions_per_run: int = 0
    sse_runs: int = 0
    runs: int | None = None
    reference_executions: int = 0

    @property
    def trail_index(self) -> int:
        """First main-segment index after the SSP tail (SSP runs)."""
        return self.ssp_index + self.tail

    def executions_of(self, phase: str) -> int:
        """Main-segment executions per run of a measure-run kind ("sse" | "ssp")."""
        return self.sse_executions_per_run if phase == SSE_PHASE else self.executions_per_run

    def bin_index(self, phase: str) -> int:
        """Main-segment index of the execution whose duration bins runs of this kind: sse_index for SSE
        runs, ssp_index for SSP runs."""
        return self.sse_index if phase == SSE_PHASE else self.ssp_index

    @classmethod
    def from_plan(cls, plan: Mapping[str, Any]) -> PlanView:
        """Read the fields from a plan.json mapping; DataError names a missing or bad field.

        Plans from before SSE runs existed lack sse_runs / sse_executions_per_run: they read as
        0 SSE runs of sse_index + 1 executions."""

        def need_int(key: str) -> int:
            if key not in plan or plan[key] is None:
                raise DataError(f"plan.json lacks {key!r}")
            try:
                return int(plan[key])
            except (TypeError, ValueError):
                raise DataError(f"plan.json {key}={plan[key]!r} is not an integer") from None

        def opt_int(key: str, default: int) -> int:
            return need_int(key) if plan.get(key) is not None else default

        ssp = need_int("ssp_index")
        sse = int(plan["sse_index"]) if plan.get("sse_index") is not None else need_int("warmups")
        epr = need_int("executions_per_run")
        pred = int(plan.get("predecessor_count") or 0)
        if not 0 <= ssp < epr:
            raise DataError(f"plan.json ssp_index={ssp} outside [0, executions_per_run={epr})")
        if not 0 <= sse < epr:
            raise DataError(f"plan.json sse_index={sse} outside [0, executions_per_run={epr})")
        # tail / trailing: plan.json has both since trailing executions exist; older plans had
        # executions_per_run = ssp_index + tail (no trailing)
        trailing = int(plan.get("trailing") or 0)
        tail = int(plan["tail"]) if plan.get("tail") is not None else epr - ssp - trailing
        if tail < 1 or ssp + tail > epr:
            raise DataError(f"plan.json tail={tail} does not fit ssp_index={ssp}, executions_per_run={epr}")
        trailing = epr - ssp - tail
        sse_epr = opt_int("sse_executions_per_run", sse + 1)
        if not 0 <= sse < sse_epr:
            raise DataError(f"plan.json sse_index={sse} outside [0, sse_executions_per_run={sse_epr})")
        sse_runs = opt_int("sse_runs", 0)
        runs = opt_int("runs", -1)
        ref = opt_int("reference_executions", 0)
        et = plan.get("exec_time_ns")
        margin = plan.get("margin")
        return cls(
            ssp_index=ssp,
            sse_index=sse,
            executions_per_run=epr,
            predecessor_count=pred,
            exec_time_ns=float(et) if et is not None else None,
            margin=float(margin) if margin is not None else None,
            tail=tail,
            trailing=trailing,
            sse_executions_per_run=sse_epr,
            sse_runs=max(sse_runs, 0),
            runs=runs if runs >= 0 else None,
            reference_executions=max(ref, 0),
        )


def role_expr(
    view: PlanView, segment: str = "segment", exec_index: str = "exec_index", phase: str | None = "phase"
) -> pl.Expr:
    """The role of an execution (ARCHITECTURE.md), as ROLE_DTYPE.

    SSP runs: pred | trail | ssp | sse | first | warmup (that precedence). SSE runs: pred | sse (main
    sse_index) | first (main 0 with a predecessor) | warmup. `phase`: the column holding the run kind
    ("sse" | "ssp"); None: every execution is of an SSP run."""
    seg = pl.col(segment).cast(pl.String)
    i = pl.col(exec_index)
    is_sse_run = pl.col(phase).cast(pl.String) == SSE_PHASE if phase is not None else pl.lit(False)
    return (
        pl.when(seg == PRED)
        .then(pl.lit("pred"))
        .when(~is_sse_run & (i >= view.trail_index))
        .then(pl.lit("trail"))
        .when(~is_sse_run & (i >= view.ssp_index))
        .then(pl.lit("ssp"))
        .when(i == view.sse_index)
        .then(pl.lit("sse"))
        .when((i == 0) & pl.lit(view.predecessor_count > 0))
        .then(pl.lit("first"))
        .otherwise(pl.lit("warmup"))
        .cast(ROLE_DTYPE)
    )


def normalize_phase(col: str = "phase") -> pl.Expr:
    """The runs.parquet phase with the legacy "measure" read as "ssp" (String)."""
    p = pl.col(col).cast(pl.String)
    return pl.when(p == LEGACY_MEASURE_PHASE).then(pl.lit(SSP_PHASE)).otherwise(p).alias(col)


@dataclass(frozen=True)
class ClockParams:
    """host_ns = gpu_ns + offset_ns + drift * (gpu_ns - gpu_ref_ns)  (drift as a fraction)."""

    offset_ns: float
    gpu_ref_ns: int
    drift: float
    residual_ns: float

    @classmethod
    def from_any(cls, fit: Mapping[str, Any] | Any) -> ClockParams:
        """From a ClockFit-like object (attributes) or its dict; `drift` (fraction) or `drift_ppm`."""
        get = fit.get if isinstance(fit, Mapping) else (lambda k, d=None: getattr(fit, k, d))
        if get("offset_ns") is None or get("gpu_ref_ns") is None:
            raise DataError(f"clock fit lacks offset_ns / gpu_ref_ns: {fit!r}")
        drift = get("drift")
        if drift is None:
            ppm = get("drift_ppm")
            drift = float(ppm) * 1e-6 if ppm is not None else 0.0
        residual = get("residual_ns")
        offset = get("offset_ns")
        return cls(
            offset_ns=offset if isinstance(offset, int) else float(offset),
            gpu_ref_ns=int(round(get("gpu_ref_ns"))),
            drift=float(drift),
            residual_ns=float(residual) if residual is not None else math.nan,
        )

    @property
    def drift_ppm(self) -> float:
        return self.drift * 1e6

    def host_expr(self, gpu_col: str) -> pl.Expr:
        """Polars expression mapping an int64 GPU-clock column to int64 host-clock ns (rounded).

        The integer part of the offset is added exactly, so 64-bit epoch times keep ns precision."""
        off_int = int(round(self.offset_ns))
        off_frac = float(self.offset_ns) - off_int
        g = pl.col(gpu_col)
        corr = ((g - self.gpu_ref_ns).cast(pl.Float64) * self.drift + off_frac).round(0).cast(pl.Int64)
        return g + off_int + corr

    def to_summary(self) -> dict[str, float | int]:
        """summary.json "clock": offset_ns, gpu_ref_ns, drift_ppm, residual_ns."""
        return {
            "offset_ns": self.offset_ns,
            "gpu_ref_ns": self.gpu_ref_ns,
            "drift_ppm": self.drift_ppm,
            "residual_ns": None if math.isnan(self.residual_ns) else self.residual_ns,
        }


def measure_runs(runs: pl.DataFrame) -> pl.DataFrame:
    """The measure runs of a runs frame: run:int32, phase:str ("sse" | "ssp"; a legacy "measure" run
    is "ssp"), sorted by run."""
    return (
        runs.lazy()
        .select(pl.col("run").cast(pl.Int32), normalize_phase())
        .filter(pl.col("phase").is_in(list(MEASURE_PHASES)))
        .unique("run", keep="first")
        .sort("run")
        .collect()
    )


def _to_ns(d: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of a sensor mapping with `*_ms` / `*_us` keys also given as `*_ns` (existing `*_ns` win)."""
    out: dict[str, Any] = dict(d)
    for k, v in d.items():
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        for suffix, scale in (("_ms", 1e6), ("_us", 1e3)):
            if k.endswith(suffix):
                out.setdefault(k[: -len(suffix)] + "_ns", v * scale)
    return out


def sensor_channels(sensor: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Normalize a sensor description to {channel: {delay_ns, window_ns, lag_ns, period_ns, ...}}.

    Accepts a flat mapping (one sensor for every channel, keyed "total" here) or a per-channel
    mapping ({"total": {...}, "memory": {...}}, as calibration.json "sensor"); `*_ms` / `*_us` keys
    are converted to `*_ns`."""
    if any(isinstance(v, Mapping) for v in sensor.values()):
        return {str(ch): _to_ns(v) for ch, v in sensor.items() if isinstance(v, Mapping)}
    return {TOTAL: _to_ns(sensor)}


def total_sensor(sensor: Mapping[str, Any]) -> dict[str, Any]:
    """The "total" channel's sensor (ns keys), or the first channel's when there is no "total"."""
    per = sensor_channels(sensor)
    if TOTAL in per:
        return per[TOTAL]
    return next(iter(per.values()), {})


def channel_delays(sensor: Mapping[str, Any]) -> tuple[int, dict[str, int]]:
    """(default delay_ns, {channel: delay_ns}) from a sensor description (rounded to ns).

    The default (for channels without their own entry) is the "total" channel's delay."""
    per = sensor_channels(sensor)
    delays = {ch: int(round(float(d.get("delay_ns") or 0.0))) for ch, d in per.items()}
    default = int(round(float(total_sensor(sensor).get("delay_ns") or 0.0)))
    return default, delays
