"""Column schemas of every table fingrav writes, raw and derived (docs/ARCHITECTURE.md "Raw files").

Raw tables (collect, calibrate; GPU side, pyarrow):

* `executions` - run:int32, segment:str ("pred" | "main"), exec_index:int32 (within its segment),
  gpu_start_ns:int64, gpu_end_ns:int64 (GPU clock)
* `runs` - run:int32, phase:str (`fingrav.contracts.roles.PHASES`), host_start_ns:int64 (host clock just before
  the executions were launched), delay_ns:int64 (random delay slept before it), idle_ns:int64 (settling idle
  slept before the delay), energy_start_mj / energy_end_mj: float64 (null without an energy counter)
* `clock` - host_before_ns, gpu_ns, host_after_ns:int64, source:str ("burst" | "run"), run:int32 (-1: bursts)
* `samples` - t_ns:int64 (host clock), channel:str, power_mw:float64; metadata key `gaps` lists known sample
  gaps [[from_ns, to_ns], ...]
* `steps` - calibration load steps: step:int32, gpu_start_ns, gpu_end_ns:int64 (GPU clock)
* `truth` - simulator only: run:int32, segment, exec_index, channel, power_mw (true cycle mean: start to the next
  start), energy_mj (the execution's own), cycle_ns (true cycle length), cycle_energy_mj (true energy over the cycle)
* `telemetry` - where the GPU offers it (`GPUDevice.read_telemetry`; optional file): per run, before and after its
  executions: clocks (MHz), clock-event reasons (bitmask and names), cumulative limiter / violation counters and
  field values (JSON), read outside the timed region (a measure run's "before" in the second half of its idle,
  `GPUDevice.idle_reading_telemetry`; the reference run's after its idle)
* `reading_truth` - simulator only: t_ns, channel, power_mw of every sample in samples.parquet, as the noise-free,
  unquantized sensor reads it on average over its acquisition jitter (the truth of a sensor *reading*,
  `fingrav.device.sim.sensor.SensorStream.expected_response`; `truth` is the truth of kernel power)

Derived tables (analysis, polars): `binned` (bin stage) and `lois` (differentiate stage).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pyarrow as pa
from pydantic import BaseModel, ConfigDict

#: idle between a run's pre-run reads (telemetry, energy counter, GPU clock) and its random delay + executions: the
#: energy counter's first reading precedes `host_start_ns` by this + `delay_ns` + the clock read
READ_GUARD_NS: Final = 5_000_000

if TYPE_CHECKING:
    import polars as pl

RAW: Final[dict[str, pa.Schema]] = {
    "executions": pa.schema(
        [
            ("run", pa.int32()),
            ("segment", pa.string()),
            ("exec_index", pa.int32()),
            ("gpu_start_ns", pa.int64()),
            ("gpu_end_ns", pa.int64()),
        ]
    ),
    "runs": pa.schema(
        [
            ("run", pa.int32()),
            ("phase", pa.string()),
            ("host_start_ns", pa.int64()),
            ("delay_ns", pa.int64()),
            ("idle_ns", pa.int64()),
            ("energy_start_mj", pa.float64()),
            ("energy_end_mj", pa.float64()),
        ]
    ),
    "clock": pa.schema(
        [
            ("host_before_ns", pa.int64()),
            ("gpu_ns", pa.int64()),
            ("host_after_ns", pa.int64()),
            ("source", pa.string()),
            ("run", pa.int32()),
        ]
    ),
    "samples": pa.schema([("t_ns", pa.int64()), ("channel", pa.string()), ("power_mw", pa.float64())]),
    "steps": pa.schema([("step", pa.int32()), ("gpu_start_ns", pa.int64()), ("gpu_end_ns", pa.int64())]),
    "truth": pa.schema(
        [
            ("run", pa.int32()),
            ("segment", pa.string()),
            ("exec_index", pa.int32()),
            ("channel", pa.string()),
            ("power_mw", pa.float64()),
            ("energy_mj", pa.float64()),
            ("cycle_ns", pa.float64()),
            ("cycle_energy_mj", pa.float64()),
        ]
    ),
    "reading_truth": pa.schema([("t_ns", pa.int64()), ("channel", pa.string()), ("power_mw", pa.float64())]),
    "telemetry": pa.schema(
        [
            ("run", pa.int32()),
            ("phase", pa.string()),
            ("when", pa.string()),  # "before" | "after" the run's executions
            ("host_ns", pa.int64()),
            ("read_ns", pa.int64()),
            ("sm_mhz", pa.float64()),
            ("mem_mhz", pa.float64()),
            ("reasons", pa.int64()),
            ("reason_names", pa.string()),  # ";"-joined
            ("violation_json", pa.string()),  # {counter: cumulative value} in violation_unit
            ("violation_unit", pa.string()),
            ("fields_json", pa.string()),
        ]
    ),
}

# binned/<scenario>.parquet: one row per measure run. bin_exec_time_ns: the binned duration (main exec
# ssp_index of SSP runs, sse_index of SSE runs); ssp_exec_time_ns: the same for SSP runs, null for SSE runs;
# reason: null when golden, else one of `NOT_GOLDEN_REASONS`.
BINNED: Final = pa.schema(
    [
        ("run", pa.int32()),
        ("phase", pa.string()),
        ("bin_exec_time_ns", pa.int64()),
        ("ssp_exec_time_ns", pa.int64()),
        ("golden", pa.bool_()),
        ("reason", pa.string()),
    ]
)
OUTSIDE_BIN: Final = "outside_bin"
INCOMPLETE: Final = "incomplete"  # the run lacks executions (main or predecessor segment)
BAD_TIME: Final = "bad_time"  # the binned execution's duration is not positive (broken stamps)
NOT_GOLDEN_REASONS: Final = (OUTSIDE_BIN, INCOMPLETE, BAD_TIME)

# profiles/<scenario>/lois.parquet: one row per (sample, channel) inside an execution cycle of a measure run
LOIS: Final = pa.schema(
    [
        ("run", pa.int32()),
        ("phase", pa.string()),
        ("golden", pa.bool_()),
        ("role", pa.string()),
        ("segment", pa.string()),
        ("exec_index", pa.int32()),
        ("channel", pa.string()),
        ("t_ns", pa.int64()),  # host clock, delay-corrected
        ("exec_start_ns", pa.int64()),  # host clock
        ("toi_ns", pa.int64()),
        ("toi_frac", pa.float64()),  # toi / execution duration
        ("power_mw", pa.float64()),
    ]
)
# lois.parquet columns with few distinct values: dictionary-encoded (the others are nearly unique)
LOIS_DICTIONARY_COLUMNS: Final = ("run", "golden", "role", "segment", "exec_index", "channel", "power_mw")


def polars_schema(schema: pa.Schema) -> pl.Schema:
    """The polars schema of one of these tables."""
    import polars as pl

    return pl.from_arrow(schema.empty_table()).schema  # type: ignore[union-attr]


class SamplesRecord(BaseModel):
    """samples.parquet's own metadata next to its provenance: the sample gaps the power backend reported
    ([from_ns, to_ns] on the raw sample clock) and, written by calibrate, the channels in their order."""

    model_config = ConfigDict(frozen=True, extra="ignore")  # the rest of the record is its provenance

    gaps: list[tuple[int, int]] = []
    channels: list[str] | None = None
