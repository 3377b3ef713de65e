"""Raw-data files: parquet tables with provenance metadata, and JSON side files.

GPU-side module (numpy + pyarrow only). The analysis reads the same files with polars
(`polars.read_parquet`); `read_metadata` returns the provenance record of any table.

Files of one scenario, in `results/<sweep>/raw/<scenario>/` (see `SCENARIO_FILES`):

* `executions.parquet` - run:int32, segment:str ("pred" | "main"), exec_index:int32 (within its segment),
  gpu_start_ns:int64, gpu_end_ns:int64 (GPU clock)
* `runs.parquet` - run:int32, phase:str ("timing" | "probe" | "reference" | "sse" | "ssp"), host_start_ns:int64
  (host clock just before the executions were launched), delay_ns:int64 (random delay slept before it),
  idle_ns:int64 (settling idle slept before the delay), energy_start_mj / energy_end_mj: float64 (null when
  the device has no energy counter)
* `clock.parquet` - host_before_ns, gpu_ns, host_after_ns:int64, source:str ("burst" | "run"), run:int32
  (-1 for bursts)
* `samples.parquet` - t_ns:int64 (host clock), channel:str, power_mw:float64; metadata key `gaps`
  lists known sample gaps [[from_ns, to_ns], ...]
* `plan.json` - the collection plan (`fingrav.collect.plan.CollectionPlan`) and the probe's result

Ground truth (simulator only) goes to `results/<sweep>/truth/<scenario>.parquet`: run:int32, segment,
exec_index, channel, power_mw, energy_mj - read only by validation.

Several GPUs (device.world_size > 1): these are rank 0's files; rank k writes the same files under
`raw/<scenario>/rank<k>/` (and `truth/rank<k>/`), see `fingrav.ranks`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

logger = logging.getLogger(__name__)

META_KEY = b"fingrav"
SCENARIO_FILES = ("executions.parquet", "runs.parquet", "clock.parquet", "samples.parquet", "plan.json")
CALIBRATION_RAW_FILES = ("clock.parquet", "steps.parquet", "samples.parquet")

SCHEMAS: dict[str, pa.Schema] = {
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
    # calibration load steps: one row per spin (on) interval, GPU clock
    "steps": pa.schema([("step", pa.int32()), ("gpu_start_ns", pa.int64()), ("gpu_end_ns", pa.int64())]),
    "truth": pa.schema(
        [
            ("run", pa.int32()),
            ("segment", pa.string()),
            ("exec_index", pa.int32()),
            ("channel", pa.string()),
            ("power_mw", pa.float64()),
            ("energy_mj", pa.float64()),
        ]
    ),
}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON-able: {type(obj).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default)


def write_table(path: str | Path, kind: str, columns: Mapping[str, Any], meta: Mapping[str, Any]) -> Path:
    """Write `columns` (name -> array-like) as parquet with schema SCHEMAS[kind] and `meta` (JSON) under
    the metadata key b'fingrav'. Missing nullable float columns are filled with nulls."""
    schema = SCHEMAS[kind]
    n = None
    arrays = []
    for f in schema:
        if f.name in columns:
            col = columns[f.name]
            arr = pa.array(np.asarray(col) if not isinstance(col, pa.Array) else col, type=f.type, from_pandas=True)
        else:
            if n is None:
                n = len(next(iter(columns.values()))) if columns else 0
            arr = pa.nulls(n, type=f.type)
        arrays.append(arr)
    table = pa.Table.from_arrays(arrays, schema=schema.with_metadata({META_KEY: dumps(dict(meta)).encode()}))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # integer columns (sorted timestamps, run and execution indices) shrink 2-3x with delta encoding
    ints = [f.name for f in schema if pa.types.is_integer(f.type)]
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    pq.write_table(
        table,
        path,
        compression="zstd",
        use_dictionary=strings,
        column_encoding=dict.fromkeys(ints, "DELTA_BINARY_PACKED"),
    )
    logger.debug("wrote %s (%d rows)", path, table.num_rows)
    return path


def read_table(path: str | Path) -> pa.Table:
    return pq.read_table(path)


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The provenance/metadata record stored with a parquet table."""
    md = pq.read_schema(path).metadata or {}
    raw = md.get(META_KEY)
    return json.loads(raw) if raw else {}


def write_json(path: str | Path, obj: Any) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(obj) + "\n")
    return path


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text())
