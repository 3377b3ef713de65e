"""The one guard every entry point passes before it writes: committed datasets are never written, with or without git.

GPU-side module (stdlib). A *dataset* is a folder of committed measurements (e.g. `results/h200/`: the raw data
under `gpu/`, the measured calibration, the committed `summary.csv`, notes). It is marked by `DATASET.json` in
it, written with the dataset (`fingrav dataset seal <folder>`): the files it protects, each with its sha256, so
the dataset is known in a git clone, a tarball or a zip alike (no `git ls-files`), and a changed file is found by
its content (`verify_dataset`).

`check_write(path, what)` refuses (ConfigError naming `what` and the dataset) any path at or below a dataset
folder. It is called by every entry point that writes: the Snakefile's preflight (`fingrav.preflight.check_sweep`:
the sweep's results folder, replays included), each stage job (`fingrav.stages.job`: its `root`), the stages that
measure (`fingrav.preflight.claim_results`), the CLI (`calibrate`, `collect`, `gpu-sweep`: the results folder;
`export`: the output file) and the API (`fingrav.profile(results=...)`). A replay of a dataset writes a folder of
its own (`results/<name>-replay/`, `config/<name>-replay.yaml`) and reads the dataset only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Any, Final

from fingrav.errors import ConfigError

logger = logging.getLogger(__name__)

DATASET_JSON: Final = "DATASET.json"
DATASET_FORMAT: Final = 1
# generated from a dataset by its replay (never part of it): not sealed even where an older checkout has them
GENERATED_DIRS: Final = ("report", "raw", "binned", "profiles", "logs", "truth", "archive", "export")


def _absolute(path: Path | str) -> Path:
    """`path` made absolute with its symbolic links resolved (a link into a dataset is the dataset)."""
    return Path(os.path.realpath(os.path.abspath(path)))


def dataset_of(path: Path | str) -> Path | None:
    """The dataset folder (one holding DATASET.json) that `path` is, or lies below; None when there is none."""
    here = _absolute(path)
    for folder in (here, *here.parents):
        if (folder / DATASET_JSON).is_file():
            return folder
    return None


def check_write(path: Path | str, what: str) -> None:
    """ConfigError when `path` (a folder or file something is about to write) is, or lies in, a committed dataset.
    `what` names the field or option that chose the path (e.g. "sweep = 'h200'", "--out")."""
    folder = dataset_of(path)
    if folder is None:
        return
    name = folder.name
    raise ConfigError(
        f"{what}: {path} is in the committed dataset {name!r} ({folder / DATASET_JSON}), which nothing may write; "
        f"write elsewhere (a replay of it: config/{name}-replay.yaml writes results/{name}-replay/)"
    )


# --------------------------------------------------------------------------- DATASET.json
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dataset_files(folder: Path | str) -> list[str]:
    """The files a seal of `folder` protects (relative, POSIX, sorted): every file but DATASET.json itself and the
    folders a replay generates (`GENERATED_DIRS`)."""
    folder = Path(folder)
    out = []
    for path in folder.rglob("*"):
        rel = path.relative_to(folder)
        if path.is_file() and rel.parts[0] not in GENERATED_DIRS and rel.as_posix() != DATASET_JSON:
            out.append(rel.as_posix())
    return sorted(out)


def seal_dataset(folder: Path | str, description: str | None = None) -> Path:
    """Write `folder`/DATASET.json: the dataset's name and every protected file with its sha256."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder")
    files = {rel: _sha256(folder / rel) for rel in dataset_files(folder)}
    record: dict[str, Any] = {"format_version": DATASET_FORMAT, "dataset": folder.name, "files": files}
    if description:
        record["description"] = description
    path = folder / DATASET_JSON
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")
    logger.info("%s: %d files sealed", path, len(files))
    return path


def read_dataset(folder: Path | str) -> dict[str, str]:
    """The protected files of a dataset (relative path -> sha256); ConfigError naming the file when DATASET.json
    is unreadable."""
    path = Path(folder) / DATASET_JSON
    try:
        record = json.loads(path.read_text())
        files = record["files"]
        if not isinstance(files, dict):
            raise TypeError("files is not a mapping")
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ConfigError(f"{path}: not a dataset manifest ({err})") from None
    return {str(k): str(v) for k, v in files.items()}


def verify_dataset(folder: Path | str, under: Path | str | None = None) -> list[str]:
    """The problems of a dataset against its DATASET.json (a file missing or with another sha256), one line each;
    [] when it is intact. `under`: check only the files below that folder (e.g. the raw data a replay reads)."""
    folder = _absolute(folder)
    sub = _absolute(under) if under is not None else None
    problems = []
    for rel, digest in read_dataset(folder).items():
        path = folder / rel
        if sub is not None and sub != path and sub not in path.parents:
            continue
        if not path.is_file():
            problems.append(f"{path}: missing (listed in {folder / DATASET_JSON})")
        elif _sha256(path) != digest:
            problems.append(f"{path}: changed (its sha256 differs from {folder / DATASET_JSON})")
    return problems
