"""Provenance recorded in every artifact: versions, git commit, config hash, host, time.

GPU-side: standard library only (plus whatever is already imported)."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import logging
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import fingrav

logger = logging.getLogger(__name__)

_PACKAGES = ("numpy", "pyarrow", "pydantic", "polars", "altair", "snakemake", "torch", "nvidia-ml-py", "amdsmi")


def git_commit(repo: Path | None = None) -> str:
    """The checkout's commit (with '-dirty' when modified), or FINGRAV_GIT_COMMIT, or 'unknown'."""
    import os

    env = os.environ.get("FINGRAV_GIT_COMMIT")
    if env:
        return env
    cwd = repo or Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
        return commit + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def package_versions() -> dict[str, str]:
    out: dict[str, str] = {}
    for name in _PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


def provenance(device: dict[str, Any] | None = None, config_hash: str | None = None, **extra: Any) -> dict[str, Any]:
    """A JSON-able provenance record. `device` is GPUDevice.describe()."""
    rec: dict[str, Any] = {
        "fingrav_version": fingrav.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": socket.gethostname(),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    if device is not None:
        rec["device"] = device
    if config_hash is not None:
        rec["config_hash"] = config_hash
    rec.update(extra)
    return rec
