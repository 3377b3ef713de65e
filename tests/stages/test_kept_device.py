"""`fingrav.stages.collect.KeptDevice`: one device kept open across the scenarios gpu-sweep collects in turn, opened
on first use, reset (its kernels released) after each scenario, opened anew for another device config or seed or
after a reset that failed, and closed when a scenario fails (the error goes on)."""

from __future__ import annotations

from typing import Any

import pytest

import fingrav.device
from fingrav.config import DeviceConfig, GemmKernel
from fingrav.device.sim import SimulatedGPU
from fingrav.errors import DeviceError
from fingrav.stages.collect import KeptDevice


class _Logged(SimulatedGPU):
    """A simulated GPU that logs its resets and closing in `log` ("reset <i>", "close <i>"; i: the i-th opened)."""

    log: list[str] = []
    fail_reset = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.n = sum(e.startswith("open") for e in self.log)
        self.log.append(f"open {self.n}")

    def reset_for_next_scenario(self) -> None:
        self.log.append(f"reset {self.n}")
        if self.fail_reset:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        super().reset_for_next_scenario()

    def close(self) -> None:
        self.log.append(f"close {self.n}")


@pytest.fixture
def log(monkeypatch) -> list[str]:
    events: list[str] = []
    monkeypatch.setattr(_Logged, "log", events)
    monkeypatch.setattr(fingrav.device, "open_device", lambda c, seed=0: _Logged(c.sim, c.index, seed))
    return events


def test_one_device_for_every_scenario_reset_after_each(log: list[str]) -> None:
    cfg = DeviceConfig()
    with KeptDevice() as keep:
        devices = []
        for name in ("a", "b", "c"):
            with keep.scenario(cfg, 3, name) as dev:
                dev.prepare(GemmKernel(m=64, n=64, k=64))
                devices.append(dev)
        assert keep.opened == 1 and devices[0] is devices[1] is devices[2]
        assert devices[0].describe()["kernels"] == {}  # released after the last scenario too
    assert log == ["open 0", "reset 0", "reset 0", "reset 0", "close 0"]


def test_another_config_or_seed_opens_a_new_device(log: list[str]) -> None:
    with KeptDevice() as keep:
        for cfg, seed in (
            (DeviceConfig(), 3),
            (DeviceConfig(), 4),
            (DeviceConfig(index=1), 4),
            (DeviceConfig(index=1), 4),
        ):
            with keep.scenario(cfg, seed, "s") as dev:
                assert (dev.index, dev.seed) == (cfg.index, seed)
    assert keep.opened == 3
    assert log == ["open 0", "reset 0", "close 0", "open 1", "reset 1", "close 1", "open 2", "reset 2", "reset 2",
                   "close 2"]  # fmt: skip


def test_a_failed_scenario_closes_the_device_and_a_failed_reset_opens_a_new_one(log: list[str], caplog) -> None:
    cfg = DeviceConfig()
    keep = KeptDevice()
    with pytest.raises(DeviceError, match="fell off"), keep.scenario(cfg, 3, "a"):
        raise DeviceError("the GPU fell off the bus")
    assert log == ["open 0", "close 0"]  # no reset of a device that failed: closed, never reused
    with keep.scenario(cfg, 3, "b"):
        pass
    _Logged.fail_reset = True
    try:
        with keep.scenario(cfg, 3, "c"):  # measured: a failing clean-up closes the device, the scenario stands
            pass
    finally:
        _Logged.fail_reset = False
    assert "failed to release its kernels and reset" in caplog.text
    with keep.scenario(cfg, 3, "d"):
        pass
    keep.close()
    keep.close()
    assert log == ["open 0", "close 0", "open 1", "reset 1", "reset 1", "close 1", "open 2", "reset 2", "close 2"]
    assert keep.opened == 3
