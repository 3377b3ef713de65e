"""calibration/gpu<k>.json: what the calibrate stage measured on one GPU (clock sync + sensor models)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import NS_PER_MS

# Every flag a calibration can carry (calibration/gpu<k>.json `flags`; a channel's own flag appears there as
# "<channel>:<flag>" and in its SensorModel's `flags`), with what it means and what to do. None invalidates the
# calibration by itself (`valid` follows the clock fit); the report lists them and docs/ARCHITECTURE.md has this
# table (a test keeps both equal to this registry).
CALIBRATION_FLAGS: dict[str, str] = {
    "clock_residual": "the GPU-host clock fit's residual exceeds calibration.max_clock_residual_us: the calibration "
    "is invalid (timestamps cannot be mapped); calibrate again on an idle machine",
    "sample_gaps": "the power backend reported lost samples during the load steps; the fit used the rest",
    "no_response": "the channel's readings did not change with the load steps (e.g. a memory rail that a compute "
    "load barely moves): no sensor model for it, its profile is not reported",
    "fit_failed": "the channel's sensor model could not be fitted (its error is in the SensorModel); the channel is "
    "left out",
    "fit_at_bound": "a fitted sensor parameter (delay, window or lag) sits at its search bound: the true value may "
    "lie beyond it; longer load steps (calibration.step_on_ms, step_off_ms) widen the bound",
    "steps_shorter_than_settle": "the channel takes longer to settle after a load change than the shortest load "
    "step lasts, so its step response is seen only in part and the settle time is extrapolated; raise "
    "calibration.step_on_ms and step_off_ms above the channel's settle time (shown in the calibration table)",
    "sparse_edges": "fewer than 30 samples fell inside the channel's transitions after the load steps: the delay, "
    "window and lag rest on few points; raise calibration.steps",
}


def calibration_flag_meaning(flag: str) -> str:
    """What a calibration flag means ("<channel>:<flag>" or a sweep-wide flag); KeyError for an unknown one."""
    return CALIBRATION_FLAGS[flag.rsplit(":", 1)[-1]]


class ClockRecord(BaseModel):
    """The GPU-to-host clock fit of a calibration (`fingrav.clocksync.ClockFit.to_dict()`: offset and residuals
    in ns, drift as a fraction and in ppm, clock-read pairs taken and kept, round trips in ns) with whether it is
    valid and the residual limit it was held to (µs)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    offset_ns: float
    gpu_ref_ns: int
    drift: float | None = None
    drift_ppm: float | None = None
    residual_ns: float | None = None
    n_pairs: int | None = None
    n_kept: int | None = None
    round_trip_min_ns: float | None = None
    round_trip_median_ns: float | None = None
    valid: bool = True
    max_residual_us: float | None = None


class LoadSteps(BaseModel):
    """The calibration's square-wave load: `count` steps, their median on and off lengths (ns; None when not
    measured: a calibration built from a simulator's known sensor has no steps)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    count: int = 0
    on_ns: float | None = None
    off_ns: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_ms(cls, data: Any) -> Any:
        """A format 1 record (`on_ms`, `off_ms`) in ns."""
        if isinstance(data, dict) and "on_ms" in data:
            d = dict(data)
            for unit in ("on", "off"):
                v = d.pop(f"{unit}_ms", None)
                d.setdefault(f"{unit}_ns", None if v is None else v * NS_PER_MS)
            return d
        return data


class Calibration(BaseModel):
    """clock: the clock fit; sensor: one `SensorModel` per channel ("total" first); steps: the load steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    clock: ClockRecord
    sensor: dict[str, SensorModel]
    channels: list[str]
    steps: LoadSteps
    flags: list[str] = []
    valid: bool = True
    provenance: Provenance = Provenance()

    @property
    def total(self) -> SensorModel:
        """The total channel's sensor."""
        return self.sensor[TOTAL]

    @property
    def clock_map(self) -> ClockMap:
        return ClockMap.from_record(self.clock)

    @property
    def max_clock_residual_us(self) -> float | None:
        v = self.clock.max_residual_us
        return None if v is None else float(v)
