"""The host clock is CLOCK_MONOTONIC (never stepped); a wall-clock stamp is only converted, and a step of the wall
clock (NTP, settimeofday) is noticed (fingrav/device/hostclock.py)."""

from __future__ import annotations

import time

from fingrav.device import hostclock


class ManualClock:
    def __init__(self, t_ns: int) -> None:
        self.t = t_ns

    def __call__(self) -> int:
        return self.t


def test_a_wall_clock_step_is_noticed_and_converted_stamps_stay_on_the_host_clock() -> None:
    wall, host = ManualClock(1_790_000_000_000_000_000), ManualClock(5_000_000_000)
    clock = hostclock.WallClock(wall, host)
    assert clock.to_host(wall()) == host()
    wall.t += 10_000_000
    host.t += 10_000_000
    assert clock.update() is None and clock.to_host(wall()) == host()
    wall.t += 150_000  # within the tolerance: read jitter, not a step; the offset is kept as it was
    assert clock.update() is None and clock.to_host(wall()) == host() + 150_000
    wall.t -= 150_000 + 3600 * 10**9  # the wall clock set back an hour
    assert clock.update() == -3600 * 10**9 and clock.to_host(wall()) == host()
    assert [s for _, s in clock.steps] == [-3600 * 10**9]


def test_the_host_clock_does_not_follow_the_wall_clock(monkeypatch) -> None:
    t0 = hostclock.host_ns()
    monkeypatch.setattr(time, "time_ns", lambda: 0)  # the wall clock at the epoch: the host clock goes on
    assert hostclock.host_ns() >= t0 > 0
    assert hostclock.HOST_CLOCK == "CLOCK_MONOTONIC"


def test_gpu_devices_stamp_with_the_host_clock() -> None:
    """The torch device's host clock (run starts, clock-read brackets) and the amdsmi poller's stamps are
    `hostclock.host_ns`, not time.time_ns (where a step would shift samples against executions)."""
    import inspect

    from fingrav.device.amd.poller import MetricsPoller
    from fingrav.device.amd.power import AMDSMIPower
    from fingrav.device.torch_device import TorchGPUDevice

    assert "host_ns()" in inspect.getsource(TorchGPUDevice.host_time_ns)
    for cls in (MetricsPoller, AMDSMIPower):
        assert inspect.signature(cls.__init__).parameters["clock"].default is hostclock.host_ns
