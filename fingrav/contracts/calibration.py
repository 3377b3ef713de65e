"""calibration/gpu<k>.json: what the calibrate stage measured on one GPU (clock sync + sensor models)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.sensor import SensorModel


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
