"""summary.csv: one row per scenario, built from each summary.json's "row".

The column order follows docs/ARCHITECTURE.md ("summary.csv"): the fixed columns, then one
`ssp_<channel>_power_w` per non-total channel (in the order the channels first appear), then the
run/LOI counts (SSP runs), validity and flags, then the simulator's truth columns when any row has them,
then any further columns the analysis added (in the order they first appear: cycle time, SSE runs, reference
run, reference_error_pct).

When the analysis provides `fingrav.analysis.summarize.summary_table`, that function is used and this
module's `build_summary_table` is only the fallback.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

logger = logging.getLogger(__name__)

HEAD_COLUMNS: tuple[str, ...] = (
    "scenario", "kernel", "backend", "predecessor",
    "exec_time_us", "exec_time_ci_low_us", "exec_time_ci_high_us",
    "ssp_power_w", "ssp_power_ci_low_w", "ssp_power_ci_high_w",
    "sse_power_w", "sse_power_ci_low_w", "sse_power_ci_high_w",
    "sse_vs_ssp_error_pct",
    "energy_per_exec_mj", "energy_per_exec_ci_low_mj", "energy_per_exec_ci_high_mj",
    "interleaved_power_w", "interleaved_power_ci_low_w", "interleaved_power_ci_high_w",
    "interleaved_vs_ssp_pct",
)
TAIL_COLUMNS: tuple[str, ...] = ("runs_total", "runs_golden", "lois", "lois_sse", "valid", "flags")
TRUTH_COLUMNS: tuple[str, ...] = (
    "truth_ssp_power_w", "ssp_error_pct", "truth_sse_power_w",
    "truth_energy_per_exec_mj", "energy_error_pct", "truth_interleaved_power_w",
)
_STRING_COLUMNS = frozenset({"scenario", "kernel", "backend", "predecessor", "flags"})
_INT_COLUMNS = frozenset({"runs_total", "runs_golden", "lois", "lois_sse", "sse_runs_total", "sse_runs_golden"})
_CHANNEL_RE = re.compile(r"^ssp_(?!power_)(?P<channel>[A-Za-z0-9]+(?:_[A-Za-z0-9]+)*)_power_w$")


def channel_column(channel: str) -> str:
    """The summary.csv column of a component channel's SSP power."""
    return f"ssp_{channel}_power_w"


def channel_of_column(column: str) -> str | None:
    """The channel named by an `ssp_<channel>_power_w` column, else None."""
    m = _CHANNEL_RE.match(column)
    return m.group("channel") if m else None


def flags_text(flags: Any) -> str:
    """Flags as summary.csv writes them: ';'-joined (accepts a list or an already joined string)."""
    if flags is None:
        return ""
    if isinstance(flags, str):
        return flags
    return ";".join(str(f) for f in flags)


def flag_list(flags: Any) -> list[str]:
    """Flags as a list, from a list or a ';'-joined string."""
    if flags is None:
        return []
    if isinstance(flags, str):
        return [f for f in flags.split(";") if f]
    return [str(f) for f in flags]


def column_order(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The stable summary.csv column order for these rows (see the module docstring)."""
    seen: list[str] = []
    for row in rows:
        for key in row:
            if key not in seen:
                seen.append(key)
    channel_cols = [c for c in seen if channel_of_column(c) is not None and c not in HEAD_COLUMNS]
    truth = [c for c in TRUTH_COLUMNS if c in seen]
    known = set(HEAD_COLUMNS) | set(TAIL_COLUMNS) | set(TRUTH_COLUMNS) | set(channel_cols)
    extra = [c for c in seen if c not in known]
    return [*HEAD_COLUMNS, *channel_cols, *TAIL_COLUMNS, *truth, *extra]


def _cell(column: str, value: Any) -> Any:
    """A summary-row value normalized for its column (flags joined, counts as int, ...)."""
    if column == "flags":
        return flags_text(value)
    if column == "valid":
        return None if value is None else bool(value)
    if column in _STRING_COLUMNS:
        return None if value is None else str(value)
    if column in _INT_COLUMNS:
        return None if value is None else int(value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return float(value)
    return str(value)


def _dtype(column: str, values: list[Any]) -> pl.DataType:
    """The polars type of a column."""
    if column == "valid":
        return pl.Boolean()
    if column in _STRING_COLUMNS:
        return pl.String()
    if column in _INT_COLUMNS:
        return pl.Int64()
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pl.Boolean()
    if present and any(isinstance(v, str) for v in present):
        return pl.String()
    return pl.Float64()


def build_summary_table(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """A polars frame of the summary rows in the stable column order; missing cells are null."""
    columns = column_order(rows)
    data: dict[str, list[Any]] = {c: [_cell(c, row.get(c)) for row in rows] for c in columns}
    schema = {}
    for c in columns:
        dtype = _dtype(c, data[c])
        if dtype == pl.String():
            data[c] = [None if v is None else str(v) for v in data[c]]
        schema[c] = dtype
    return pl.DataFrame(data, schema=schema)


def _analysis_summary_table() -> Callable[..., Any] | None:
    """fingrav.analysis.summarize.summary_table when the analysis provides it."""
    try:
        from fingrav.analysis.summarize import summary_table  # type: ignore[import-not-found]
    except ImportError:
        return None
    return summary_table


def summary_table(
    rows: Sequence[Mapping[str, Any]], sweep_dir: Path | None = None, scenarios: Sequence[str] | None = None
) -> pl.DataFrame:
    """The summary table: `fingrav.analysis.summarize.summary_table` when the analysis provides it
    (called with the rows, or else with (sweep_dir, scenarios)), else `build_summary_table`."""
    func = _analysis_summary_table()
    if func is not None:
        attempts: list[tuple[Any, ...]] = [(list(rows),)]
        if sweep_dir is not None and scenarios is not None:
            attempts.append((sweep_dir, list(scenarios)))
        for args in attempts:
            try:
                table = func(*args)
            except Exception as err:  # an adapter over another stage's API: any failure means fall back
                logger.debug("analysis summary_table%r failed: %s", tuple(type(a).__name__ for a in args), err)
                continue
            if isinstance(table, pl.DataFrame) and "scenario" in table.columns and table.height == len(rows):
                logger.debug("summary table from fingrav.analysis.summarize.summary_table")
                return table
        logger.warning("fingrav.analysis.summarize.summary_table did not accept the rows; building the table here")
    return build_summary_table(rows)


def write_summary_csv(table: pl.DataFrame, path: Path) -> Path:
    """Write the summary table as CSV (nulls as empty cells)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    table.write_csv(tmp)
    tmp.replace(path)
    logger.info("wrote %s (%d scenarios, %d columns)", path, table.height, table.width)
    return path
