"""Provenance: the host, the GPU's UUID and the scheduler's job of every artifact (fingrav.provenance)."""

from __future__ import annotations

import pytest

from fingrav.provenance import gpu_uuid, provenance, scheduler_job


def test_scheduler_job_records_slurm_and_the_gpus_it_gave() -> None:
    env = {
        "SLURM_JOB_ID": "4711",
        "SLURMD_NODENAME": "gpu-node-3",
        "SLURM_JOB_GPUS": "2",
        "SLURM_STEP_GPUS": "2",
        "SLURM_JOB_PARTITION": "gpu",
        "CUDA_VISIBLE_DEVICES": "0",
        "HOME": "/root",
    }
    assert scheduler_job(env).to_json() == {
        "scheduler": "slurm",
        "job_id": "4711",
        "node": "gpu-node-3",
        "job_gpus": "2",
        "step_gpus": "2",
        "partition": "gpu",
        "cuda_visible_devices": "0",
    }
    assert scheduler_job({"CUDA_VISIBLE_DEVICES": "0"}) is None  # not a scheduler's job


def test_provenance_has_host_gpu_uuid_and_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "12")
    rec = provenance({"uuid": "GPU-5e1f", "name": "H200"}, config_hash="abc", stage="collect")
    assert rec.gpu_uuid == "GPU-5e1f" and rec.scheduler_job.job_id == "12" and rec.host
    monkeypatch.delenv("SLURM_JOB_ID")
    rec = provenance(stage="report")
    assert rec.scheduler_job is None and "gpu_uuid" not in rec.to_json()
    assert gpu_uuid({"gpu_uuid_torch": "GPU-77"}) == "GPU-77" and gpu_uuid({"name": "x"}) is None


def test_package_versions_are_read_once_per_process_and_each_caller_gets_its_own_copy(monkeypatch) -> None:
    """A stage worker reads the installed versions once before it forks its jobs (the modules it imported are those);
    a caller that changes the dict it got changes no one else's."""
    import importlib.metadata

    from fingrav import provenance as P

    P._installed_versions.cache_clear()
    calls: list[str] = []
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: calls.append(name) or real(name))
    first = P.package_versions()
    n = len(calls)
    assert n == len(P._PACKAGES) and "numpy" in first
    first["numpy"] = "changed"
    assert P.package_versions()["numpy"] != "changed"
    assert len(calls) == n  # not read again
    P._installed_versions.cache_clear()


def test_export_git_commit_hands_the_checkout_commit_to_child_processes_and_keeps_a_given_one(monkeypatch) -> None:
    """The workflow finds the commit once (rules/common.smk); what it starts records the same value without git."""
    import os
    import subprocess
    import sys

    from fingrav import provenance as P

    monkeypatch.delenv(P.GIT_COMMIT_ENV, raising=False)
    commit = P.git_commit()
    assert P.export_git_commit() == commit and os.environ[P.GIT_COMMIT_ENV] == commit
    child = "from fingrav.provenance import provenance; print(provenance(stage='t').git_commit)"
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, check=True).stdout.strip()
    assert out == commit
    monkeypatch.setenv(P.GIT_COMMIT_ENV, "given")
    assert P.export_git_commit() == "given" and os.environ[P.GIT_COMMIT_ENV] == "given"
