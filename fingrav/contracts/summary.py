"""summary.csv: one row per scenario (the "row" of each profiles/<scenario>/summary.json).

The columns, their order and their types are defined here once; the differentiate stage fills the row, the
report writes and shows it. Order: `HEAD`, one `ssp_<channel>_power_w` per non-total channel (sorted),
`COUNTS`, `TRUTH` (simulator only), `EXTRA`, `THROUGHPUT`, `TRUTH_EXTRA` (simulator only), then the per-channel CIs
`ssp_<channel>_power_ci_{low,high}_w` (sorted). docs/ARCHITECTURE.md gives every column's meaning.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, Literal

HEAD: Final[tuple[str, ...]] = (
    "scenario",
    "kernel",
    "backend",
    "predecessor",
    "exec_time_us",
    "exec_time_ci_low_us",
    "exec_time_ci_high_us",
    "ssp_power_w",
    "ssp_power_ci_low_w",
    "ssp_power_ci_high_w",
    "energy_per_exec_mj",
    "energy_per_exec_ci_low_mj",
    "energy_per_exec_ci_high_mj",
    # what the sensor reads during the SSE / the interleaved execution (naive profiling, the paper's numbers) ...
    # (every *_vs_ssp_pct compares with the SSP of the same stamped runs: burst_power_w where the headline is sustained)
    "sse_reading_w",
    "sse_reading_ci_low_w",
    "sse_reading_ci_high_w",
    "sse_reading_vs_ssp_pct",
    # ... and what that execution draws, through the sensor model (null: not measurable; fingrav.analysis.kernel_power)
    "sse_kernel_power_w",
    "sse_kernel_power_ci_low_w",
    "sse_kernel_power_ci_high_w",
    "sse_kernel_vs_ssp_pct",
    "interleaved_reading_w",
    "interleaved_reading_ci_low_w",
    "interleaved_reading_ci_high_w",
    "interleaved_reading_vs_ssp_pct",
    "interleaved_kernel_power_w",
    "interleaved_kernel_power_ci_low_w",
    "interleaved_kernel_power_ci_high_w",
    "interleaved_kernel_vs_ssp_pct",
)
COUNTS: Final[tuple[str, ...]] = ("runs_total", "runs_golden", "lois", "lois_sse", "valid", "flags")
TRUTH: Final[tuple[str, ...]] = (
    "truth_ssp_power_w",
    "ssp_error_pct",
    "truth_energy_per_exec_mj",
    "energy_error_pct",
    "truth_sse_reading_w",
    "truth_sse_kernel_power_w",
    "truth_interleaved_reading_w",
    "truth_interleaved_kernel_power_w",
)
EXTRA: Final[tuple[str, ...]] = (
    "cycle_time_us",
    "cycle_time_ci_low_us",
    "cycle_time_ci_high_us",
    "sse_runs_total",
    "sse_runs_golden",
    "reference_power_w",
    "reference_power_ci_low_w",
    "reference_power_ci_high_w",
    "ssp_vs_reference_pct",
    "reference_energy_power_w",
    "reference_counter_vs_samples_pct",
    "sse_reading_vs_ssp_ci_low_pct",
    "sse_reading_vs_ssp_ci_high_pct",
    "interleaved_reading_vs_ssp_ci_low_pct",
    "interleaved_reading_vs_ssp_ci_high_pct",
    "sse_kernel_vs_ssp_ci_low_pct",
    "sse_kernel_vs_ssp_ci_high_pct",
    "interleaved_kernel_vs_ssp_ci_low_pct",
    "interleaved_kernel_vs_ssp_ci_high_pct",
    "collect_gpu_s",
)
TRUTH_EXTRA: Final[tuple[str, ...]] = (
    "reference_error_pct",
    "sse_reading_error_pct",
    "sse_kernel_power_error_pct",
    "interleaved_reading_error_pct",
    "interleaved_kernel_power_error_pct",
)
# where the kernel's work is known (`fingrav.contracts.work`: GEMM, GEMV, attention, a callable that declares it):
# the work per execution, then rates over the SSP cycle time and efficiencies from the energy per execution, each
# with its CI (`fingrav.contracts.profile.Throughput`); null otherwise. TFLOP/s = 1e12 flop/s, GB/s = 1e9 bytes/s.
THROUGHPUT: Final[tuple[str, ...]] = (
    "work_flop",
    "work_bytes",
    "throughput_tflop_s",
    "throughput_ci_low_tflop_s",
    "throughput_ci_high_tflop_s",
    "bandwidth_gb_s",
    "bandwidth_ci_low_gb_s",
    "bandwidth_ci_high_gb_s",
    "energy_efficiency_tflop_s_per_w",
    "energy_efficiency_ci_low_tflop_s_per_w",
    "energy_efficiency_ci_high_tflop_s_per_w",
    "energy_per_flop_pj",
    "energy_per_flop_ci_low_pj",
    "energy_per_flop_ci_high_pj",
    "energy_per_byte_pj",
    "energy_per_byte_ci_low_pj",
    "energy_per_byte_ci_high_pj",
)
# sustained operation (fingrav.analysis.sustained): where the sweep has a reference run, the headline ssp_power_w /
# energy_per_exec_mj are its sustained power (uninstrumented when the device can launch without stamps, over whole
# limit cycles when the limiter cycles) and its uninstrumented cycle; the FinGraV SSP of the short stamped runs
# after idle is the "burst" level. ssp_source names which the headline is.
SUSTAINED: Final[tuple[str, ...]] = (
    "ssp_source",
    "burst_power_w",
    "burst_power_ci_low_w",
    "burst_power_ci_high_w",
    "burst_vs_sustained_pct",
    "burst_vs_sustained_ci_low_pct",
    "burst_vs_sustained_ci_high_pct",
    "sustained_cycle_time_us",
    "sustained_run_s",
    "sustained_run_s_for_max_ci",
    "instrumentation_cycle_pct",
    "instrumentation_cycle_ci_low_pct",
    "instrumentation_cycle_ci_high_pct",
    "unstamped_burst_power_w",
    "unstamped_burst_power_ci_low_w",
    "unstamped_burst_power_ci_high_w",
    "instrumentation_power_pct",
    "instrumentation_power_ci_low_pct",
    "instrumentation_power_ci_high_pct",
    "sustained_stop",
    "sustained_drift_pct",
    "limit_cycles",
    "limit_cycle_period_ms",
    "limit_cycle_period_ci_low_ms",
    "limit_cycle_period_ci_high_ms",
    "limit_cycle_duty_pct",
    "limit_cycle_duty_ci_low_pct",
    "limit_cycle_duty_ci_high_pct",
    "limit_cycle_high_w",
    "limit_cycle_high_ci_low_w",
    "limit_cycle_high_ci_high_w",
    "limit_cycle_low_w",
    "limit_cycle_low_ci_low_w",
    "limit_cycle_low_ci_high_w",
)
TRUTH_SUSTAINED: Final[tuple[str, ...]] = ("truth_burst_power_w", "burst_error_pct")
SSP_SOURCES: Final = ("burst", "sustained", "sustained_stamped")  # see `fingrav.analysis.sustained.headline`
FIXED: Final = frozenset(HEAD + COUNTS + TRUTH + EXTRA + THROUGHPUT + TRUTH_EXTRA + SUSTAINED + TRUTH_SUSTAINED)

STRING_COLUMNS: Final = frozenset(
    {"scenario", "kernel", "backend", "predecessor", "flags", "ssp_source", "sustained_stop"}
)
INT_COLUMNS: Final = frozenset(
    {
        "runs_total",
        "runs_golden",
        "lois",
        "lois_sse",
        "sse_runs_total",
        "sse_runs_golden",
        "gpu",
        "fleet_gpus",
        "limit_cycles",
    }
)
BOOL_COLUMNS: Final = frozenset({"valid"})
FLAG_SEPARATOR: Final = ";"

# multi-GPU sweeps (combine stage): per-GPU columns of one metric, `<metric>_gpu<k>`, and the combined sum
RANK_SUFFIX: Final = "_gpu"

# sweeps over listed GPUs (device.gpus): `GPU` = the device index that measured the row; with device.fleet, per
# metric of `FLEET_METRICS` (name -> unit, and its value, CI low and CI high columns) the card-to-card spread over
# every listed GPU (fingrav.analysis.fleet): `fleet_gpus`; `fleet_<name>_<unit>` (the mean over the cards) with its
# CI `fleet_<name>_ci_{low,high}_<unit>`; `fleet_<name>_spread_pct` ((max - min) / mean) with its CI
# `fleet_<name>_spread_ci_{low,high}_pct`; `fleet_<name>_noise_spread_pct` (what measurement noise alone spreads
# identical cards by) and `fleet_<name>_distinct` (whether the cards differ beyond their measurement noise)
GPU: Final = "gpu"
FLEET_METRICS: Final[dict[str, tuple[str, str, str, str]]] = {
    "ssp_power": ("w", "ssp_power_w", "ssp_power_ci_low_w", "ssp_power_ci_high_w"),
    "energy_per_exec": ("mj", "energy_per_exec_mj", "energy_per_exec_ci_low_mj", "energy_per_exec_ci_high_mj"),
    "exec_time": ("us", "exec_time_us", "exec_time_ci_low_us", "exec_time_ci_high_us"),
}


def fleet_metric_columns(name: str) -> dict[str, str]:
    """The fleet columns of one metric of `FLEET_METRICS`, by role: mean, ci_low, ci_high, spread, spread_ci_low,
    spread_ci_high, noise_spread, distinct."""
    unit = FLEET_METRICS[name][0]
    return {
        "mean": f"fleet_{name}_{unit}",
        "ci_low": f"fleet_{name}_ci_low_{unit}",
        "ci_high": f"fleet_{name}_ci_high_{unit}",
        "spread": f"fleet_{name}_spread_pct",
        "spread_ci_low": f"fleet_{name}_spread_ci_low_pct",
        "spread_ci_high": f"fleet_{name}_spread_ci_high_pct",
        "noise_spread": f"fleet_{name}_noise_spread_pct",
        "distinct": f"fleet_{name}_distinct",
    }


def fleet_columns() -> tuple[str, ...]:
    """The fleet columns of summary.csv in their order (after every other column)."""
    return ("fleet_gpus", *(c for name in FLEET_METRICS for c in fleet_metric_columns(name).values()))


_CHANNEL_COL = re.compile(r"^ssp_(?!power_)(?P<channel>.+)_power_w$")
_CHANNEL_CI_COL = re.compile(r"^ssp_(?P<channel>.+)_power_ci_(low|high)_w$")

ColumnType = Literal["str", "int", "bool", "float"]


def channel_column(channel: str) -> str:
    """The column of a non-total channel's SSP power (W)."""
    return f"ssp_{channel}_power_w"


def channel_ci_columns(channel: str) -> tuple[str, str]:
    """The CI columns (low, high) of a non-total channel's SSP power (W)."""
    return f"ssp_{channel}_power_ci_low_w", f"ssp_{channel}_power_ci_high_w"


def channel_of_column(column: str) -> str | None:
    """The channel named by an `ssp_<channel>_power_w` column, else None."""
    if column in FIXED:
        return None
    m = _CHANNEL_COL.match(column)
    return m.group("channel") if m else None


def column_type(column: str) -> ColumnType:
    """The type of a summary.csv column."""
    if column in STRING_COLUMNS:
        return "str"
    if column in INT_COLUMNS:
        return "int"
    if column in BOOL_COLUMNS or (column.startswith("fleet_") and column.endswith("_distinct")):
        return "bool"
    return "float"


def columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary.csv column order for these rows (module docstring)."""
    keys: list[str] = [k for r in rows for k in r]
    chans = sorted({k for k in keys if k not in FIXED and _CHANNEL_COL.match(k)})
    cols = [*HEAD, *chans, *COUNTS]
    truth = any(k in TRUTH for k in keys)
    if truth:
        cols += TRUTH
    cols += EXTRA
    cols += THROUGHPUT
    cols += SUSTAINED
    if truth:
        cols += TRUTH_EXTRA
        cols += TRUTH_SUSTAINED
    return cols + sorted({k for k in keys if k not in FIXED and _CHANNEL_CI_COL.match(k)})


def join_flags(flags: Iterable[str]) -> str:
    """Flags as summary.csv writes them."""
    return FLAG_SEPARATOR.join(flags)


def split_flags(flags: str | Iterable[str] | None) -> list[str]:
    """Flags as a list, from the summary.csv text or a list."""
    if flags is None:
        return []
    if isinstance(flags, str):
        return [f for f in flags.split(FLAG_SEPARATOR) if f]
    return [str(f) for f in flags]
