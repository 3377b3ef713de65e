"""summary.csv: one row per scenario (each summary.json's "row"), built only through
`fingrav.contracts.summary` (column list, order and types are defined there)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import polars as pl

from fingrav.contracts import summary as S

logger = logging.getLogger(__name__)

POLARS_TYPES: Final[dict[S.ColumnType, type[pl.DataType]]] = {
    "str": pl.String,
    "int": pl.Int64,
    "bool": pl.Boolean,
    "float": pl.Float64,
}


def summary_frame(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The summary.csv frame of these rows: `contracts.summary.columns(rows)` in that order, each column typed
    by `contracts.summary.column_type`; a missing cell is null."""
    cols = S.columns(rows)
    schema = {c: POLARS_TYPES[S.column_type(c)] for c in cols}
    return pl.DataFrame({c: [r.get(c) for r in rows] for c in cols}, schema=schema)


def write_summary_csv(table: pl.DataFrame, path: Path) -> Path:
    """Write the summary table as CSV (nulls as empty cells), atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    table.write_csv(tmp)
    tmp.replace(path)
    logger.info("wrote %s (%d scenarios, %d columns)", path, table.height, table.width)
    return path
