"""summary.csv: one row per scenario (the "row" of each profiles/<scenario>/summary.json).

The columns, their order and their types are defined here once; the differentiate stage fills the row, the
report writes and shows it. Order: `HEAD`, one `ssp_<channel>_power_w` per non-total channel (sorted),
`COUNTS`, `TRUTH` (simulator only), `EXTRA`, `TRUTH_EXTRA` (simulator only), then the per-channel CIs
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
    "sse_power_w",
    "sse_power_ci_low_w",
    "sse_power_ci_high_w",
    "sse_vs_ssp_error_pct",
    "energy_per_exec_mj",
    "energy_per_exec_ci_low_mj",
    "energy_per_exec_ci_high_mj",
    "interleaved_power_w",
    "interleaved_power_ci_low_w",
    "interleaved_power_ci_high_w",
    "interleaved_vs_ssp_pct",
)
COUNTS: Final[tuple[str, ...]] = ("runs_total", "runs_golden", "lois", "lois_sse", "valid", "flags")
TRUTH: Final[tuple[str, ...]] = (
    "truth_ssp_power_w",
    "ssp_error_pct",
    "truth_sse_power_w",
    "truth_energy_per_exec_mj",
    "energy_error_pct",
    "truth_interleaved_power_w",
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
    "sse_vs_ssp_error_ci_low_pct",
    "sse_vs_ssp_error_ci_high_pct",
    "interleaved_vs_ssp_ci_low_pct",
    "interleaved_vs_ssp_ci_high_pct",
)
TRUTH_EXTRA: Final[tuple[str, ...]] = ("reference_error_pct",)
FIXED: Final = frozenset(HEAD + COUNTS + TRUTH + EXTRA + TRUTH_EXTRA)

STRING_COLUMNS: Final = frozenset({"scenario", "kernel", "backend", "predecessor", "flags"})
INT_COLUMNS: Final = frozenset({"runs_total", "runs_golden", "lois", "lois_sse", "sse_runs_total", "sse_runs_golden"})
BOOL_COLUMNS: Final = frozenset({"valid"})
FLAG_SEPARATOR: Final = ";"

# multi-GPU sweeps (combine stage): per-GPU columns of one metric, `<metric>_gpu<k>`, and the combined sum
RANK_SUFFIX: Final = "_gpu"

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
    if column in BOOL_COLUMNS:
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
    if truth:
        cols += TRUTH_EXTRA
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
