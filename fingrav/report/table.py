"""summary.csv (narrow: what a reader needs) and metrics.parquet / metrics.csv (every number in long form), both
derived from the scenarios' result models (`fingrav.contracts.result`: `summary_columns`, `long_rows`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from fingrav.contracts import result as RM
from fingrav.contracts import summary as S

logger = logging.getLogger(__name__)

POLARS_TYPES: Final[dict[S.ColumnType, type[pl.DataType]]] = {
    "str": pl.String,
    "int": pl.Int64,
    "bool": pl.Boolean,
    "float": pl.Float64,
}
METRICS_SCHEMA: Final = {
    "scenario": pl.String,
    "metric": pl.String,
    "value": pl.Float64,
    "ci_low": pl.Float64,
    "ci_high": pl.Float64,
    "unit": pl.String,
    "source": pl.String,
}


def frame_of(rows: Sequence[Mapping[str, Any]], cols: Sequence[str]) -> pl.DataFrame:
    """A frame of flat rows with these columns in order, each typed by `contracts.summary.column_type`."""
    schema = {c: POLARS_TYPES[S.column_type(c)] for c in cols}
    return pl.DataFrame({c: [r.get(c) for r in rows] for c in cols}, schema=schema)


def summary_frame(results: Sequence[RM.ScenarioResult]) -> pl.DataFrame:
    """The summary.csv frame: `contracts.result.summary_columns` (with the truths where any scenario has them)."""
    truth = any(r.truth is not None for r in results)
    return frame_of([r.flat() for r in results], RM.summary_columns(truth))


def metrics_frame(
    results: Sequence[RM.ScenarioResult], extra: Mapping[str, Mapping[str, Any]] | None = None
) -> pl.DataFrame:
    """Every number in long form (`contracts.result.METRICS_COLUMNS`): each result's (`long_rows`), then the
    columns of `extra` (scenario -> multi-GPU or fleet columns: `extra_long_rows`)."""
    rows = [row for r in results for row in RM.long_rows(r)]
    for name, cols in (extra or {}).items():
        rows += RM.extra_long_rows(name, cols, "combine / fleet stage")
    return pl.DataFrame(rows, schema=METRICS_SCHEMA) if rows else pl.DataFrame(schema=METRICS_SCHEMA)


def _atomic(path: Path, write: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    write(tmp)
    tmp.replace(path)
    return path


def write_summary_csv(table: pl.DataFrame, path: Path) -> Path:
    """Write the summary table as CSV (nulls as empty cells), atomically."""
    _atomic(path, table.write_csv)
    logger.info("wrote %s (%d scenarios, %d columns)", path, table.height, table.width)
    return path


def write_metrics(metrics: pl.DataFrame, parquet: Path, csv: Path) -> list[Path]:
    """Write the long metrics table as parquet and CSV, atomically."""
    out = [_atomic(parquet, metrics.write_parquet), _atomic(csv, metrics.write_csv)]
    logger.info("wrote %s and %s (%d numbers)", parquet, csv, metrics.height)
    return out
