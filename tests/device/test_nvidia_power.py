"""fingrav/device/nvidia/power.py: NVMLPower's energy counter (mJ; a failed read or one going backwards is a
missing value, never a failed collection; no counter: None) and what it records about the GPU (the fake
pynvml, on a clock the test drives)."""

from __future__ import annotations

import importlib
import sys

import pytest

from fingrav.backends import get_backend
from fingrav.device.nvidia import NVMLPower


class Clock:
    def __init__(self) -> None:
        self.t = 1_790_000_000_000_000_000

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def nvml(monkeypatch):
    monkeypatch.delenv("FAKE_PYNVML_CONFIG", raising=False)
    mod = importlib.import_module("fingrav.testing.fakes.fake_pynvml")
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    yield mod
    mod.configure()


def test_the_counter_reads_the_energy_in_mj(nvml) -> None:
    clock = Clock()
    nvml.configure(clock_ns=clock)
    with NVMLPower(sampler_mode="thread") as p:
        e0 = p.energy_mj()
        clock.t += 2_000_000_000
        e1 = p.energy_mj()
    assert e1 - e0 == pytest.approx(121.0 * 2_000, abs=1.0)  # the fake's 121 W for 2 s, in mJ


def test_a_failed_or_backwards_read_is_a_missing_value(nvml) -> None:
    clock = Clock()
    nvml.configure(clock_ns=clock, energy_jumps=[(1_000_000_000, -500_000)])
    with NVMLPower(sampler_mode="thread") as p:
        assert p.energy_mj() is not None
        nvml.configure(clock_ns=clock, energy_jumps=[(1_000_000_000, -500_000)],
                       errors={"nvmlDeviceGetTotalEnergyConsumption": [nvml.NVML_ERROR_UNKNOWN]})  # fmt: skip
        nvml.nvmlInit()
        assert p.energy_mj() is None  # the failed read
        clock.t += 2_000_000_000
        assert p.energy_mj() is None  # went 500 J backwards: never a negative energy


def test_a_gpu_without_a_counter_says_so(nvml) -> None:
    nvml.configure(energy_supported=False)
    with NVMLPower(sampler_mode="thread") as p:
        assert p.energy_mj() is None and p.describe()["energy_counter"] is None
    nvml.configure()
    with NVMLPower(sampler_mode="thread") as p:
        d = p.describe()
    assert d["energy_counter"] == "nvmlDeviceGetTotalEnergyConsumption (mJ)"
    assert set(get_backend("nvml").provenance_fields) <= set(d)  # what the registry says every nvml record has
