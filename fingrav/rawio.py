"""Raw-data files: parquet tables with provenance metadata, and JSON side files (atomic writes).

GPU-side module (numpy + pyarrow only). Schemas: `fingrav.contracts.tables`; paths: `fingrav.layout`.
Every table carries a JSON record under metadata key `fingrav` (`read_metadata`) with the
`fingrav.contracts.FORMAT_VERSION` it was written in.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from fingrav.contracts import FORMAT_VERSION, tables

if TYPE_CHECKING:
    from pydantic import BaseModel

    from fingrav.contracts.provenance import Provenance

logger = logging.getLogger(__name__)

META_KEY = b"fingrav"
SCHEMAS: dict[str, pa.Schema] = tables.RAW


def _json_default(obj: Any) -> Any:
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return float(obj)
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "model_dump"):  # pydantic models (the contracts)
        return obj.model_dump(mode="json")
    raise TypeError(f"not JSON-able: {type(obj).__name__}")


def jsonable(obj: Any) -> Any:
    """`obj` as plain JSON values (benchmark reports): numpy scalars and arrays as Python ones, non-finite floats as
    null (JSON has no NaN), dict keys as strings, anything else unknown as its str()."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, str | int | bool) or obj is None:
        return obj
    return str(obj)


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=_json_default)


def write_table(path: str | Path, kind: str, columns: Mapping[str, Any], meta: Mapping[str, Any]) -> Path:
    """Write `columns` (name -> array-like) as parquet with schema SCHEMAS[kind] and `meta` (JSON) under
    the metadata key b'fingrav'. Missing nullable float columns are filled with nulls."""
    schema = SCHEMAS[kind]
    n = None
    arrays = []
    coded: list[str] = []  # string columns given as dictionary arrays: written as they are (`_write_coded`)
    for f in schema:
        if f.name in columns:
            col = columns[f.name]
            if (
                isinstance(col, pa.DictionaryArray)
                and pa.types.is_string(f.type)
                and pa.types.is_string(col.type.value_type)
            ):
                arr = col
                coded.append(f.name)
            elif isinstance(col, pa.Array):
                arr = col.cast(f.type) if col.type != f.type else col
            else:
                arr = pa.array(np.asarray(col), type=f.type, from_pandas=True)
        else:
            if n is None:
                n = len(next(iter(columns.values()))) if columns else 0
            arr = pa.nulls(n, type=f.type)
        arrays.append(arr)
    # integer columns (sorted timestamps, run and execution indices) shrink 2-3x with delta encoding
    ints = [f.name for f in schema if pa.types.is_integer(f.type)]
    strings = [f.name for f in schema if pa.types.is_string(f.type)]
    encoding = dict.fromkeys(ints, "DELTA_BINARY_PACKED")
    if coded:
        return _write_coded(path, schema, arrays, meta, strings, encoding)
    table = pa.Table.from_arrays(arrays, schema=schema)
    return write_arrow(path, table, meta, dictionary_columns=strings, column_encoding=encoding)


def _write_coded(
    path: str | Path,
    schema: pa.Schema,
    arrays: list[pa.Array],
    meta: Mapping[str, Any],
    dictionary_columns: Sequence[str],
    column_encoding: Mapping[str, str],
) -> Path:
    """`write_arrow` for a table whose string columns come as dictionary arrays (channel codes of millions of
    samples): parquet's dictionary pages are written from the codes, never from millions of strings. The file is
    the same to every reader (a dictionary-encoded UTF-8 column, read as a string; the `fingrav` record in the
    key-value metadata): parquet's own types say it all for these tables, so the Arrow schema (which would say
    "dictionary") is not stored."""
    fields = [pa.field(f.name, a.type, f.nullable) for f, a in zip(schema, arrays, strict=True)]
    table = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    record = {"format_version": FORMAT_VERSION, **dict(meta)}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    use_dict = [c for c in dictionary_columns if c in table.column_names]
    with pq.ParquetWriter(
        tmp,
        table.schema,
        compression="zstd",
        use_dictionary=use_dict,
        column_encoding=dict(column_encoding) or None,
        store_schema=False,
    ) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({META_KEY.decode(): dumps(record)})
    tmp.replace(path)
    logger.debug("wrote %s (%d rows)", path, table.num_rows)
    return path


def write_arrow(
    path: str | Path,
    table: pa.Table,
    meta: Mapping[str, Any],
    dictionary_columns: Sequence[str] | None = None,
    column_encoding: Mapping[str, str] | None = None,
) -> Path:
    """Write a table as zstd parquet with `meta` (+ format_version) as JSON under metadata key b"fingrav",
    atomically (a temporary file renamed into place). dictionary_columns: columns to dictionary-encode
    (None: all)."""
    record = {"format_version": FORMAT_VERSION, **dict(meta)}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), META_KEY: dumps(record).encode()})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    use_dict: bool | list[str] = (
        True if dictionary_columns is None else [c for c in dictionary_columns if c in table.column_names]
    )
    pq.write_table(
        table, tmp, compression="zstd", use_dictionary=use_dict, column_encoding=dict(column_encoding or {}) or None
    )
    tmp.replace(path)
    logger.debug("wrote %s (%d rows)", path, table.num_rows)
    return path


def _unreadable(path: str | Path, err: Exception) -> Exception:
    """A DataError naming a file that cannot be read, what went wrong and what to do (`fingrav.layout.rerun_hint`)."""
    from fingrav.errors import DataError
    from fingrav.layout import rerun_hint

    if isinstance(err, FileNotFoundError):
        return DataError(f"{path}: missing{rerun_hint(path)}")
    first = str(err).splitlines()[0] if str(err) else type(err).__name__
    return DataError(f"{path}: cannot be read as parquet ({first}): damaged or truncated{rerun_hint(path)}")


def read_table(path: str | Path) -> pa.Table:
    """A parquet table; DataError naming the file when it is missing, damaged or truncated."""
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as err:
        raise _unreadable(path, err) from None


def read_metadata(path: str | Path) -> dict[str, Any]:
    """The provenance/metadata record stored with a parquet table (DataError naming a damaged file)."""
    try:
        md = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as err:
        raise _unreadable(path, err) from None
    raw = md.get(META_KEY)
    return json.loads(raw) if raw else {}


def read_provenance(path: str | Path) -> Provenance:
    """The provenance record stored with a parquet table (at the top of its metadata record, or under
    "provenance") as `fingrav.contracts.provenance.Provenance`: the one way a stage reads it."""
    from fingrav.contracts.provenance import parse_provenance

    return parse_provenance(read_metadata(path))


def write_json(path: str | Path, obj: Any) -> Path:
    """Write JSON (pydantic models dumped) atomically: a temporary file renamed into place."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(dumps(obj) + "\n")
    tmp.replace(path)
    return path


def read_json(path: str | Path) -> Any:
    """A JSON file; DataError naming the file when it is missing or not JSON."""
    from fingrav.errors import DataError
    from fingrav.layout import rerun_hint

    path = Path(path)
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise DataError(f"{path}: missing{rerun_hint(path)}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DataError(f"{path}: not valid JSON ({err}): damaged or truncated{rerun_hint(path)}") from None


M = TypeVar("M", bound="BaseModel")


def read_model(path: str | Path, model: type[M]) -> M:
    """A JSON artifact as its contract model (`fingrav.contracts`); DataError naming the file and the fields."""
    from pydantic import ValidationError

    from fingrav.errors import DataError

    try:
        return model.model_validate(read_json(path))
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in err.errors()[:5])
        more = f" (and {err.error_count() - 5} more)" if err.error_count() > 5 else ""
        from fingrav.layout import rerun_hint

        raise DataError(f"{path}: not a valid {model.__name__}: {problems}{more}{rerun_hint(path)}") from None


MANIFEST = "MANIFEST.json"


def _sha256(path: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_manifest(folder: str | Path, names: Sequence[str]) -> Path:
    """MANIFEST.json in `folder`: the sha256 and size of each named file that exists (raw data, once written)."""
    folder = Path(folder)
    files = {
        n: {"sha256": _sha256(folder / n), "bytes": (folder / n).stat().st_size} for n in names if (folder / n).exists()
    }
    return write_json(folder / MANIFEST, {"format_version": FORMAT_VERSION, "files": files})


def verify_manifest(folder: str | Path) -> bool:
    """Check every file MANIFEST.json lists against its sha256 (DataError naming the file on a mismatch or a
    missing file). False when the folder has no manifest (data from before manifests existed)."""
    from fingrav.errors import DataError

    folder = Path(folder)
    if not (folder / MANIFEST).exists():
        return False
    listed = read_json(folder / MANIFEST).get("files") or {}
    for name, rec in listed.items():
        path = folder / name
        if not path.exists():
            raise DataError(f"{path}: listed in {folder / MANIFEST} but missing")
        if path.stat().st_size != rec.get("bytes") or _sha256(path) != rec.get("sha256"):
            raise DataError(f"{path}: its content differs from what was written (sha256 mismatch): damaged or altered")
    return True


def require_manifest(folder: str | Path) -> None:
    """`verify_manifest`, and a DataError naming the folder when it has no MANIFEST.json: raw data whose files
    cannot be checked is never analyzed in silence."""
    from fingrav.errors import DataError

    if not verify_manifest(folder):
        raise DataError(
            f"{Path(folder)}: no {MANIFEST}, so its files cannot be checked (a collection that stopped before it "
            "finished, or a copy without it): collect it again, or restore its MANIFEST.json"
        )


# --------------------------------------------------------------------------- earlier measurements: moved, never deleted
def archive(folder: str | Path, archive_root: str | Path, why: str, name: str | None = None) -> Path:
    """Move `folder` (an earlier measurement: raw files, plan.json with its provenance, MANIFEST.json) aside, never
    deleting it: to `archive_root`/<name>-<UTC time>/ (name: the folder's own by default; a `-<n>` suffix when that
    exists already). Logs a warning with `why`; returns where it went."""
    import datetime as dt
    import shutil

    folder, archive_root = Path(folder), Path(archive_root)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S.%f")
    base = f"{name or folder.name}-{stamp}"
    dest, n = archive_root / base, 1
    while dest.exists():  # never move into (or over) an earlier archive
        dest, n = archive_root / f"{base}-{n}", n + 1
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(folder), str(dest))
    logger.warning("%s: %s; moved to %s", folder, why, dest)
    return dest


def collection_state(folder: str | Path, config_hash: str) -> str | None:
    """Why the raw folder of a collection cannot stand for the collection of `config_hash` (incomplete, damaged,
    or of another configuration), or None when it can: its MANIFEST.json verifies and its plan.json's provenance
    records that config hash."""
    from fingrav.errors import DataError

    folder = Path(folder)
    try:
        if not verify_manifest(folder):
            return "an incomplete collection (no MANIFEST.json)"
        from fingrav.contracts.provenance import parse_provenance

        got = parse_provenance(read_json(folder / "plan.json").get("provenance")).config_hash
    except DataError as err:
        return f"an incomplete or damaged collection ({err})"
    if got != config_hash:
        return f"collected with another configuration (config hash {got}, now {config_hash})"
    return None


def set_aside(folder: str | Path, archive_root: str | Path, name: str, why: str) -> Path | None:
    """Before `folder` is measured again: move whatever it holds to the archive (`archive`); None when it is absent
    or empty (an empty folder is removed)."""
    folder = Path(folder)
    if not folder.exists():
        return None
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
        return None
    return archive(folder, archive_root, why, name)
