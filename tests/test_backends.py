"""The backend registry (`fingrav.backends`): every `device.backend` literal has one complete entry, each entry's
hooks exist (its package's factory, its pip extra, its device's provenance fields), and what used to be a table
keyed by a backend name elsewhere now reads the registry: a name without an entry fails loudly, never silently.

The "new backend" drill of docs/ARCHITECTURE.md is what these tests enforce."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import sys
import tomllib
from pathlib import Path
from typing import get_args

import pytest

from fingrav.backends import BACKENDS, Backend, get_backend, visible_devices_vars
from fingrav.config import DeviceConfig
from fingrav.errors import BackendUnavailableError
from fingrav.testing.drills import drill_files

ROOT = Path(__file__).resolve().parents[1]
LITERALS = get_args(DeviceConfig.model_fields["backend"].annotation)


def test_every_backend_literal_has_an_entry_and_every_entry_a_literal() -> None:
    assert set(LITERALS) == set(BACKENDS)
    assert all(name == b.name for name, b in BACKENDS.items())


@pytest.mark.parametrize("name", LITERALS)
def test_each_entry_is_complete(name: str) -> None:
    b = get_backend(name)
    hints = {f.name: f.type for f in dataclasses.fields(Backend)}
    assert set(hints) == {f.name for f in dataclasses.fields(b)}
    assert b.summary.strip(), "a one-line summary"
    assert b.lock_scope in ("gpu", "none")
    assert (b.library is None) == (b.extra is None), "a vendor library comes with the pip extra that installs it"
    if b.extra is not None:
        extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
        assert b.extra in extras, f"pyproject.toml has no extra {b.extra!r}"
    if b.real_gpu:  # a physical GPU: its library, the variables that renumber it, NCCL for a lockstep group
        assert b.library and b.visible_devices_env and b.dist_backend == "nccl"
    else:
        assert b.visible_devices_env == ()
    if b.collects:  # a device factory in its package, the framework exports name, what describe() records
        mod = importlib.import_module(b.module)
        assert callable(getattr(mod, "open_device", None)), f"{b.module} defines no open_device(device_cfg, seed)"
        assert b.framework and b.provenance_fields and b.dist_backend
        counter = b.energy_counter  # the reference run's counter power needs its resolution and update period
        assert counter is not None and counter.resolution_mj > 0 and counter.update_ns > 0 and counter.source
    else:
        assert b.framework is None and b.provenance_fields == () and not b.truth and not b.real_gpu
        assert b.energy_counter is None, "a replay keeps the recorded device's backend"


def test_a_name_without_an_entry_fails_loudly() -> None:
    with pytest.raises(BackendUnavailableError, match=r"'rocm' has no entry in fingrav.backends.BACKENDS"):
        get_backend("rocm")


def test_library_check_names_the_module_and_the_extra(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "pynvml" else real(n, *a))
    msg = get_backend("nvml").library_problem()
    assert msg == "device.backend = 'nvml' needs the pynvml module, which is missing: pip install 'fingrav[nvidia]'"
    with pytest.raises(BackendUnavailableError, match="fingrav\\[nvidia\\]"):
        get_backend("nvml").check_library()
    assert get_backend("sim").library_problem() is None  # needs no vendor library
    from fingrav.device import open_device

    with pytest.raises(BackendUnavailableError, match="pynvml module, which is missing"):
        open_device(DeviceConfig(backend="nvml"))


def test_replay_cannot_collect() -> None:
    from fingrav.device import open_device

    with pytest.raises(BackendUnavailableError, match="'replay' cannot collect"):
        open_device(DeviceConfig(backend="replay", replay_dir="results/h200/gpu"))


def test_visible_devices_come_from_the_registry() -> None:
    from fingrav.gpulock import node_gpu
    from fingrav.provenance import scheduler_job

    assert visible_devices_vars() == ("CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
    assert node_gpu("amdsmi", 1, {"HIP_VISIBLE_DEVICES": "4,6"}) == "6"
    assert node_gpu("sim", 1, {"CUDA_VISIBLE_DEVICES": "4,6"}) == "1"  # nothing renumbers a simulated GPU
    with pytest.raises(BackendUnavailableError):
        node_gpu("cuda", 0, {})  # no silent "the index itself" for a backend without an entry
    job = scheduler_job({"SLURM_JOB_ID": "7", "ROCR_VISIBLE_DEVICES": "2"})
    assert job is not None and job.to_json()["rocr_visible_devices"] == "2"


def test_gpu_jobs_never_run_in_the_stage_worker() -> None:
    import json

    from fingrav.stages.__main__ import _needs_gpu
    from fingrav.stages.job import parser

    def needs(backend: str, stage: str = "collect") -> bool:
        params = json.dumps({"device": {"backend": backend, "world_size": 1}})
        return _needs_gpu(parser().parse_args([stage, "--log", "x.log", "--params", params]))

    assert needs("nvml") and needs("amdsmi") and not needs("sim") and not needs("replay")
    assert not needs("nvml", "bin")
    with pytest.raises(BackendUnavailableError):
        needs("cuda")  # a backend without an entry: loud, not "not a GPU"


def test_dist_backend_defaults_from_the_registry() -> None:
    from fingrav.collect.distributed import dist_backend_of

    assert dist_backend_of(DeviceConfig(backend="sim")) == "gloo"
    assert dist_backend_of(DeviceConfig(backend="nvml")) == "nccl"
    with pytest.raises(BackendUnavailableError, match="runs no torch.distributed group"):
        dist_backend_of(DeviceConfig(backend="replay", replay_dir="results/h200/gpu"))


# --------------------------------------------------------------------------- provenance fields: what describe() records
def _describe_sim(monkeypatch) -> dict:
    from fingrav.device import open_device

    with open_device(DeviceConfig(), seed=1) as dev:
        return dev.describe()


def _describe_nvml(monkeypatch) -> dict:
    from fingrav.device.nvidia import NVMLPower
    from fingrav.testing.fakes import fake_pynvml

    monkeypatch.delenv("FAKE_PYNVML_CONFIG", raising=False)
    fake_pynvml.configure()
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    power = NVMLPower(index=0, sampler_mode="thread")
    try:
        return power.describe()
    finally:
        power.close()
        fake_pynvml.configure()


def _describe_amdsmi(monkeypatch) -> dict:
    from fingrav.device.amd import AMDSMIPower
    from fingrav.testing.fakes import fake_amdsmi

    fake_amdsmi.configure()
    with fake_amdsmi.installed():
        power = AMDSMIPower()
        try:
            return power.describe()
        finally:
            power.close()


# every backend that collects: its device's describe() (the power side, against the vendor fake: no GPU, no torch)
DESCRIBE = {"sim": _describe_sim, "nvml": _describe_nvml, "amdsmi": _describe_amdsmi}


def test_every_collecting_backend_has_a_describe_probe() -> None:
    assert set(DESCRIBE) == {name for name, b in BACKENDS.items() if b.collects}


@pytest.mark.parametrize("name", sorted(DESCRIBE))
def test_describe_records_the_provenance_fields(name: str, monkeypatch) -> None:
    d = DESCRIBE[name](monkeypatch)
    missing = set(get_backend(name).provenance_fields) - set(d)
    assert not missing, f"{name}: describe() lacks {sorted(missing)}"
    json.dumps(d, default=str)
    # the provenance model takes the record as the backend wrote it (typed where fingrav reads it) and keeps it
    from fingrav.contracts.provenance import DeviceInfo
    from fingrav.rawio import dumps

    info = DeviceInfo.model_validate(d)
    assert json.loads(dumps(info)) == json.loads(dumps(d)) and info.backend in (
        name,
        None,
    )  # nvml: the torch device adds it


# --------------------------------------------------------------------------- the drill in docs/ARCHITECTURE.md
BACKEND_DRILL = (
    "fingrav/config.py",  # the literal (test_every_backend_literal_has_an_entry_and_every_entry_a_literal)
    "fingrav/backends.py",  # the entry (test_each_entry_is_complete)
    "fingrav/device/<vendor>/__init__.py",  # open_device (test_each_entry_is_complete)
    "pyproject.toml",  # the extra (test_each_entry_is_complete)
    "tests/test_backends.py",  # DESCRIBE (test_every_collecting_backend_has_a_describe_probe)
    "config/schema.json",  # tests/test_config.py::test_schema_file_in_sync_with_models
)


def test_the_documented_drill_is_what_these_tests_check() -> None:
    assert drill_files("Adding a backend") == list(BACKEND_DRILL)
