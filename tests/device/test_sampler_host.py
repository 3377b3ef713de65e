"""`fingrav.device.sampler_host`: the poll schedule, and the host's pipe protocol run in a thread against a counting
poller (ready, start, drain, stop, stats, close; a poller that fails to open or gives up while polling; warnings
logged once). The process mode (spawn) is exercised against the vendor fakes in test_nvml.py / test_amd.py."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from fingrav.device.sampler_host import PollSchedule, SamplerHost
from fingrav.errors import BackendUnavailableError, DeviceError

MS = 1_000_000


def test_poll_schedule() -> None:
    s = PollSchedule(period_ns=10)
    assert s.next_after(100, 105) == 110  # on time
    assert s.next_after(100, 125) == 135  # late: restart from now, no burst
    c = PollSchedule(period_ns=10, catch_up=True)
    assert c.next_after(100, 115) == 110  # late by less than a period: poll again at once
    assert c.next_after(100, 125) == 125
    with pytest.raises(ValueError, match="period_ns must be > 0"):
        PollSchedule(period_ns=0)


class CountingPoller:
    """Counts polls into its batch; fails after `fail_after` polls when set; warns once on its 3rd poll."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        if cfg.get("unavailable"):
            raise BackendUnavailableError("no such GPU here")
        if cfg.get("broken"):
            raise RuntimeError("driver exploded")
        self.schedule = PollSchedule(period_ns=int(cfg.get("period_ns", 2 * MS)))
        self.fail_after = cfg.get("fail_after")
        self.batch: list[int] = []
        self.n = 0
        self._stats: dict[str, Any] = {"polls": 0, "warnings": []}
        self.closed = cfg.setdefault("closed", [])

    def describe(self) -> dict[str, Any]:
        return {"poller": "counting"}

    def start(self) -> None:
        self.batch = []

    def stop(self) -> None:
        pass

    def poll(self) -> None:
        self.n += 1
        self._stats["polls"] = self.n
        if self.n == 3:
            self._stats["warnings"].append("third poll")
        if self.fail_after is not None and self.n > self.fail_after:
            raise DeviceError("the poller gave up")
        self.batch.append(self.n)

    def take(self) -> list[int]:
        out, self.batch = self.batch, []
        return out

    @property
    def stats(self) -> dict[str, Any]:
        return {**self._stats, "warnings": list(self._stats["warnings"])}

    def close(self) -> None:
        self.closed.append(True)


def _host(cfg: dict[str, Any] | None = None, **kw: Any) -> SamplerHost:
    return SamplerHost(CountingPoller, {**kw} if cfg is None else cfg, name="test sampler", mode="thread", empty=list)


def test_protocol_in_a_thread(caplog) -> None:
    cfg: dict[str, Any] = {}
    host = _host(cfg)
    assert host.drain() == [] and host.stop() == []  # not open yet: empty batches
    with caplog.at_level(logging.WARNING), host:
        assert host.info == {"poller": "counting"} and host.alive
        host.start()
        assert host.sampling
        got: list[int] = []
        while len(got) < 3:  # each drain polls once more itself: no wait on a loaded machine
            time.sleep(0.01)
            got += host.drain()
        got += host.stop()
        assert not host.sampling
        assert len(got) >= 4 and got == list(range(1, len(got) + 1))  # every poll once, in order
        polls = host.stats["polls"]
        time.sleep(0.02)
        host._request("stats")
        assert host.stats["polls"] == polls  # no polling outside a sampling period
    assert [r.message for r in caplog.records].count("test sampler: third poll") == 1
    assert not host.alive and cfg["closed"] == [True]
    host.close()  # idempotent


def test_a_poller_that_cannot_open() -> None:
    with pytest.raises(BackendUnavailableError, match="no such GPU here"):
        _host(unavailable=True).open()
    with pytest.raises(DeviceError, match="test sampler failed to start: RuntimeError: driver exploded"):
        _host(broken=True).open()


def test_a_poller_that_gives_up_is_reported_at_the_next_drain() -> None:
    host = _host(fail_after=0)  # the first poll fails (the drain's own poll at the latest)
    with host:
        host.start()
        with pytest.raises(DeviceError, match="the poller gave up"):
            host.drain()
        host.start()  # a new sampling period polls again
        with pytest.raises(DeviceError, match="the poller gave up"):
            host.stop()


def test_autostart_samples_without_a_start() -> None:
    host = SamplerHost(CountingPoller, {}, name="auto", mode="thread", empty=list, autostart=True)
    with host:
        assert host.sampling
        assert len(host.stop()) >= 1  # the stop's own poll at the latest
