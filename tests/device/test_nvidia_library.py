"""fingrav/device/nvidia/library.py: NVML errors wrapped once through the code map, UUIDs matched across CUDA's
and NVML's spellings, the GPU picked by UUID before index (the fake pynvml)."""

from __future__ import annotations

import importlib
import logging
import sys

import pytest

from fingrav.device.nvidia import library as L
from fingrav.errors import BackendUnavailableError, DeviceError


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.delenv("FAKE_PYNVML_CONFIG", raising=False)
    mod = importlib.import_module("fingrav.testing.fakes.fake_pynvml")
    mod.configure(device_count=2)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    mod.nvmlInit()
    yield mod
    mod.configure()


def test_uuids_match_whatever_the_prefix_and_case() -> None:
    assert L.normalize_uuid(" GPU-CA9E2420-81eb ") == L.normalize_uuid("ca9e2420-81EB") == "ca9e2420-81eb"
    assert L.normalize_uuid("MIG-abc") == "abc" and L.normalize_uuid("gpu-") == ""


@pytest.mark.parametrize(
    ("code", "cls", "words"),
    [
        ("NVML_ERROR_DRIVER_NOT_LOADED", BackendUnavailableError, "nvmlDeviceGetCount"),
        ("NVML_ERROR_NO_PERMISSION", DeviceError, "lacks the permission"),
        ("NVML_ERROR_GPU_IS_LOST", DeviceError, "fell off the bus"),
        ("NVML_ERROR_UNKNOWN", DeviceError, "nvmlDeviceGetCount failed"),
    ],
)
def test_an_nvml_error_becomes_one_fingrav_error_by_its_code(nvml, code: str, cls: type, words: str) -> None:
    nvml.configure(device_count=2, errors={"nvmlDeviceGetCount": [getattr(nvml, code)]})
    nvml.nvmlInit()
    with pytest.raises(cls, match=words) as err:
        L.nvml_call(nvml, "nvmlDeviceGetCount")
    assert isinstance(err.value.__cause__, nvml.NVMLError)  # wrapped once, the original kept as the cause
    assert L.nvml_call(nvml, "nvmlDeviceGetCount") == 2  # the next call goes through


def test_errors_that_are_not_nvmls_pass_through_unchanged(nvml) -> None:
    with pytest.raises(ZeroDivisionError), L.nvml_errors(nvml, "a division"):
        _ = 1 / 0
    with pytest.raises(DeviceError, match="^already wrapped$"), L.nvml_errors(nvml, "outer"):
        raise DeviceError("already wrapped")
    with pytest.raises(DeviceError, match="nvmlDeviceGetSomethingNew.*too old"):
        L.nvml_call(nvml, "nvmlDeviceGetSomethingNew")


def test_a_constant_the_module_lacks_takes_nvidia_ml_pys_value() -> None:
    class Bare:
        NVML_ERROR_NOT_FOUND = "not an int"

    assert L.nvml_code(Bare(), "NVML_ERROR_NOT_FOUND") == L.NVML_DEFAULTS["NVML_ERROR_NOT_FOUND"]
    assert L.nvml_code(Bare(), "NVML_ERROR_NOT_FOUND", default=99) == 99


def test_the_gpu_is_picked_by_uuid_before_its_index(nvml) -> None:
    uuids = [nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    idx, handle = L.open_handle(nvml, index=0, uuid=uuids[1].upper().removeprefix("GPU-"))
    assert idx == 1 and nvml.nvmlDeviceGetUUID(handle) == uuids[1]
    assert L.open_handle(nvml, index=None)[0] == 0 and L.open_handle(nvml, index=1)[0] == 1
    with pytest.raises(BackendUnavailableError, match="no GPU with UUID 'GPU-nope'.*NVML sees"):
        L.open_handle(nvml, uuid="GPU-nope")
    with pytest.raises(BackendUnavailableError, match="GPU index 2 does not exist .*2 GPUs"):
        L.open_handle(nvml, index=2)


def test_shutdown_logs_a_failure_instead_of_raising(nvml, caplog: pytest.LogCaptureFixture) -> None:
    nvml.configure(errors={"nvmlShutdown": [nvml.NVML_ERROR_UNKNOWN]})
    nvml.nvmlInit()
    with caplog.at_level(logging.WARNING, logger=L.__name__):
        L.shutdown_nvml(nvml)
    assert "nvmlShutdown" in caplog.text
