"""calibration/gpu<k>.json: what the calibrate stage measured on one GPU (clock sync + sensor models)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.sensor import SensorModel

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


class Calibration(BaseModel):
    """clock: the clock fit record (`fingrav.clocksync.ClockFit.to_dict()` + valid, max_residual_us);
    sensor: one `SensorModel` per channel ("total" first); steps: {count, on_ns, off_ns} of the load steps."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    clock: dict[str, Any]
    sensor: dict[str, SensorModel]
    channels: list[str]
    steps: dict[str, Any]
    flags: list[str] = []
    valid: bool = True
    provenance: dict[str, Any] = {}

    @property
    def total(self) -> SensorModel:
        """The total channel's sensor."""
        return self.sensor[TOTAL]

    @property
    def clock_map(self) -> ClockMap:
        return ClockMap.from_record(self.clock)

    @property
    def max_clock_residual_us(self) -> float | None:
        v = self.clock.get("max_residual_us")
        return None if v is None else float(v)
