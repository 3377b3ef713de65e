"""Provenance recorded in every artifact: versions, git commit, config hash, host, time, the GPU (its UUID) and
the scheduler's job (SLURM: job id, node, the GPUs it gave the job).

GPU-side: standard library only (plus whatever is already imported)."""

from __future__ import annotations

import datetime as _dt
import functools
import importlib.metadata
import logging
import os
import platform
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import fingrav
from fingrav.backends import visible_devices_vars
from fingrav.contracts.provenance import DeviceInfo, Provenance, SchedulerJob

logger = logging.getLogger(__name__)

# what a scheduler tells a job about itself (SLURM sets these in every job and job step)
SLURM_ENV = {
    "job_id": "SLURM_JOB_ID",
    "array_job_id": "SLURM_ARRAY_JOB_ID",
    "array_task_id": "SLURM_ARRAY_TASK_ID",
    "step_id": "SLURM_STEP_ID",
    "node": "SLURMD_NODENAME",
    "partition": "SLURM_JOB_PARTITION",
    "account": "SLURM_JOB_ACCOUNT",
    "job_gpus": "SLURM_JOB_GPUS",
    "step_gpus": "SLURM_STEP_GPUS",
    "gpus": "SLURM_GPUS",
}
_PACKAGES = ("numpy", "pyarrow", "pydantic", "polars", "altair", "snakemake", "torch", "nvidia-ml-py", "amdsmi")


GIT_COMMIT_ENV = "FINGRAV_GIT_COMMIT"  # the commit to record, when the caller knows it (a tarball, the workflow)


def git_commit(repo: Path | None = None) -> str:
    """The checkout's commit (with '-dirty' when modified), or FINGRAV_GIT_COMMIT, or 'unknown'."""
    env = os.environ.get(GIT_COMMIT_ENV)
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


def export_git_commit() -> str:
    """Find the checkout's commit once and put it in this process's environment (FINGRAV_GIT_COMMIT, unless already
    set), so that the processes it starts record it without asking git again: the workflow calls this as it starts
    (rules/common.smk) instead of two git processes in each of its jobs. Returns the commit."""
    os.environ[GIT_COMMIT_ENV] = commit = git_commit()
    return commit


def package_versions() -> dict[str, str]:
    """The versions of the packages fingrav's results depend on, as installed when this process first asked (once
    per process, `_installed_versions`: the modules it has imported are those; a stage worker asks before it forks
    its jobs)."""
    return dict(_installed_versions())


@functools.cache
def _installed_versions() -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for name in _PACKAGES:
        try:
            out.append((name, importlib.metadata.version(name)))
        except importlib.metadata.PackageNotFoundError:
            continue
    return tuple(out)


def scheduler_job(env: Mapping[str, str] | None = None) -> SchedulerJob | None:
    """The scheduler's job this process runs in: {"scheduler": "slurm", "job_id", "node", "job_gpus", ...} (the
    variables SLURM set, `SLURM_ENV`) and the GPUs visible to the process; None outside a scheduler's job."""
    env = os.environ if env is None else env
    if not env.get("SLURM_JOB_ID"):
        return None
    rec: dict[str, Any] = {"scheduler": "slurm"}
    rec.update({key: env[var] for key, var in SLURM_ENV.items() if env.get(var)})
    rec.update({var.lower(): env[var] for var in visible_devices_vars() if env.get(var)})
    return SchedulerJob.model_validate(rec)


def gpu_uuid(device: Mapping[str, Any] | None) -> str | None:
    """The UUID in a GPUDevice.describe() record (NVML's "GPU-...", the simulator's "SIM-..."; `DeviceInfo.gpu_uuid`),
    else None."""
    if not isinstance(device, Mapping):
        return None
    return DeviceInfo.model_validate(dict(device)).gpu_uuid


def provenance(
    device: Mapping[str, Any] | DeviceInfo | None = None, config_hash: str | None = None, **extra: Any
) -> Provenance:
    """The provenance record (`fingrav.contracts.provenance.Provenance`). `device` is GPUDevice.describe(); its
    UUID is also recorded on its own ("gpu_uuid"), with the host and the scheduler's job ("scheduler_job", None
    outside one); `extra`: the stage's own fields (stage, rank, raw, scenario, ...)."""
    rec: dict[str, Any] = {
        "fingrav_version": fingrav.__version__,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "host": socket.gethostname(),
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    rec["scheduler_job"] = scheduler_job()
    if device is not None:
        dev = device if isinstance(device, DeviceInfo) else DeviceInfo.model_validate(dict(device))
        rec["device"] = dev
        rec["gpu_uuid"] = dev.gpu_uuid
    if config_hash is not None:
        rec["config_hash"] = config_hash
    rec.update(extra)
    return Provenance.model_validate(rec)
