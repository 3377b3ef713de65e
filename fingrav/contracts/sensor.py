"""The calibrated sensor model of one power channel, in ns throughout (ms only when displayed).

Written by the calibrate stage (`fingrav.sensorfit.characterize_sensor` fits in ms internally and converts
once, here), read by collect (planning) and the analysis (delay correction, flags). Model (sensorfit's
module docstring): a sample read at t reports the chip's power through a dead time `delay_ns`, a boxcar of
`window_ns` and a first-order lag of time constant `lag_ns`; `settle_ns` is the step response's time to
within 1 % of the new level; samples arrive every `period_ns`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from fingrav.contracts.units import NS_PER_MS


class StepResponse(BaseModel):
    """The measured step response of a channel (`fingrav.sensorfit`): the pooled, normalized response (0 -> 1) in
    equal-count bins at `t_ns` after a load step (ns), its `mean` and sample count `n` per bin and the fitted
    model's response there (`model`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    t_ns: list[float | None] = []
    mean: list[float | None] = []
    n: list[int] = []
    model: list[float | None] = []


class SensorTiming(BaseModel):
    """A fitted sensor model's timing (ns) and how well it fits the steps (`fit_rms_mw`, mW); None where the fit
    could not identify a field. One home for the fields both the stamped model (`SensorModel`) and the model fitted
    on the grid times (`GridTiming`) have."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delay_ns: float | None = None
    window_ns: float | None = None
    lag_ns: float | None = None
    settle_ns: float | None = None
    group_delay_ns: float | None = None
    delay_se_ns: float | None = None
    window_se_ns: float | None = None
    lag_se_ns: float | None = None
    group_delay_se_ns: float | None = None
    fit_rms_mw: float | None = None


#: the timing fields of a sensor model that a fit on the samples' grid times replaces (`GridTiming`)
GRID_TIMING_FIELDS = tuple(SensorTiming.model_fields)


class GridTiming(SensorTiming):
    """The sensor's own sampling grid (`fingrav.sample_grid`) and the sensor model fitted on the samples' grid
    times, where the stamps put some samples late and the grid times fit the steps better than the stamps
    (`fit_rms_mw` below `stamped_fit_rms_mw`). ns, mW. The kernel-power estimators read the samples at their grid
    times with this timing (`SensorModel.on_grid`); everything else keeps the stamps and the stamped model."""

    period_ns: float
    on_time_share: float
    late_share: float
    unplaced_share: float
    late_p50_ns: float | None = None
    stamped_fit_rms_mw: float | None = None


class SensorModel(SensorTiming):
    """One channel's sensor (ns, mW). Timing fields are None when the fit could not identify them. `grid`: the
    timing on the sensor's sampling grid, where its stamps are late (`GridTiming`), else None."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    channel: str = "total"
    period_ns: float | None = None
    period_p10_ns: float | None = None
    period_p90_ns: float | None = None
    idle_mw: float | None = None
    load_mw: float | None = None
    step_mw: float | None = None
    noise_mw: float | None = None
    quantization_mw: float | None = None
    trend_mw_per_s: float | None = None
    n_samples: int | None = None
    n_edges: int | None = None
    responds: bool = True
    flags: list[str] = []
    #: how much later than this model says a sample's content can lie (ns; `fingrav.sensorfit.content_lead`); None in
    #: older calibrations
    content_lead_ns: float | None = Field(None, exclude_if=lambda v: v is None)
    boxcar_only: dict[str, float | None] | None = None  # the best pure-boxcar fit (ns, mW)
    response: StepResponse | None = None  # binned step response
    error: str | None = None  # why the channel could not be characterized
    grid: GridTiming | None = Field(None, exclude_if=lambda v: v is None)  # absent from older calibrations

    def on_grid(self) -> SensorModel:
        """This sensor with the timing fitted on the grid times (`grid`); itself without a grid."""
        if self.grid is None:
            return self
        return self.model_copy(update={f: getattr(self.grid, f) for f in GRID_TIMING_FIELDS})

    @classmethod
    def from_ms_record(cls, rec: dict[str, Any]) -> SensorModel:
        """From a record with `*_ms` keys (the sensor fit works in ms): every `*_ms` key becomes `*_ns`."""
        return cls.model_validate(_ms_to_ns(rec))

    @property
    def response_ns(self) -> float:
        """delay + window + lag (0 for unknown parts): how long after a change the sensor still shows the past."""
        return float(self.delay_ns or 0.0) + float(self.window_ns or 0.0) + float(self.lag_ns or 0.0)


class SensorSummary(SensorModel):
    """summary.json's `sensor`: the total channel's calibrated sensor (its step response left out), the delay
    correction the analysis applied (ns; per channel in `delay_correction_by_channel_ns`) and every channel's
    sensor (`channels`, step responses left out)."""

    response: StepResponse | None = Field(None, exclude=True)
    delay_correction_ns: int | float = 0
    delay_correction_by_channel_ns: dict[str, int | float] = {}
    channels: dict[str, SensorModel] = {}

    @field_serializer("channels")
    def _without_responses(self, channels: dict[str, SensorModel]) -> dict[str, dict[str, Any]]:
        return {ch: s.model_dump(mode="json", exclude={"response"}) for ch, s in channels.items()}


def _ms_to_ns(obj: Any) -> Any:
    """`*_ms` keys -> `*_ns` (values × 1e6), recursively; lists of ms under a `t_ms` key too."""
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(k, str) and k.endswith("_ms"):
                key = k[:-3] + "_ns"
                if isinstance(v, list):
                    out[key] = [None if x is None else x * NS_PER_MS for x in v]
                else:
                    out[key] = None if v is None else v * NS_PER_MS
            else:
                out[k] = _ms_to_ns(v)
        return out
    return obj


class PlanSensor(BaseModel):
    """The total channel's sensor numbers the collection was planned with (int ns, as in plan.json)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    period_ns: int
    delay_ns: int
    window_ns: int
    lag_ns: int
    settle_ns: int
    #: the sensor's content lead (`SensorModel.content_lead_ns`): the SSP runs' trailing executions cover it; 0 in
    #: plans made before it was measured
    content_lead_ns: int = Field(0, exclude_if=lambda v: v == 0)

    @classmethod
    def of(cls, s: SensorModel) -> PlanSensor:
        """Rounded from a calibrated sensor (unknown lag: 0)."""

        def need(name: str) -> int:
            v = getattr(s, name)
            if v is None:
                from fingrav.errors import DataError

                raise DataError(f"calibration: the {s.channel} sensor's {name} is unknown; cannot plan runs")
            return int(round(v))

        return cls(
            period_ns=need("period_ns"),
            delay_ns=need("delay_ns"),
            window_ns=need("window_ns"),
            lag_ns=int(round(s.lag_ns or 0.0)),
            settle_ns=need("settle_ns"),
            content_lead_ns=int(round(s.content_lead_ns or 0.0)),
        )
