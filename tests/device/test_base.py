"""`fingrav.device.base`: the records every backend returns (clock reads, executions, power samples, telemetry)
and `GPUDevice`'s default unstamped run (stamped, one execute per part) on a minimal device."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from fingrav.device.base import ClockReads, ClockTelemetry, ExecRecords, GPUDevice, KernelHandle, PowerSamples


def test_clock_reads_concat() -> None:
    a = ClockReads(np.array([1]), np.array([2]), np.array([3]))
    b = ClockReads(np.array([4, 7]), np.array([5, 8]), np.array([6, 9]))
    c = ClockReads.concat([a, b])
    assert len(c) == 3 and c.gpu_ns.tolist() == [2, 5, 8] and c.host_after_ns.dtype == np.int64


def test_exec_records_duration() -> None:
    r = ExecRecords(np.zeros(2, np.int32), np.arange(2, dtype=np.int32), np.array([10, 30]), np.array([25, 32]))
    assert len(r) == 2 and r.duration_ns.tolist() == [15, 2]


def test_power_samples_concat_keeps_gaps_and_copies_only_when_joining() -> None:
    a = PowerSamples(np.array([1, 2]), np.array(["total", "total"]), np.array([1.0, 2.0]), [(0, 1)])
    b = PowerSamples(np.array([3]), np.array(["hbm"], dtype=object), np.array([3.0]), [(2, 3)])
    assert PowerSamples.concat([a]) is a
    j = PowerSamples.concat([a, None, b])
    assert len(j) == 3 and j.channel.tolist() == ["total", "total", "hbm"] and j.gaps == [(0, 1), (2, 3)]
    assert len(PowerSamples.concat([])) == 0 and len(PowerSamples.empty()) == 0


def test_telemetry_counters_and_dict() -> None:
    t0 = ClockTelemetry(host_ns=1, read_ns=2, violation={"power": 100, "thermal": 5})
    t1 = ClockTelemetry(host_ns=9, read_ns=2, sm_mhz=1980.0, reason_names=("sw_power_cap",), violation={"power": 160})
    assert t1.counters_since(t0) == {"power": 60}
    d = t1.as_dict()
    assert d["reason_names"] == ["sw_power_cap"] and d["violation"] == {"power": 160} and d["sm_mhz"] == 1980.0


class _Handle(KernelHandle):
    label = "k"


class _Device(GPUDevice):
    """Each execution takes 100 ns of GPU time, with 7 ns between executions of one call and 1000 ns between calls."""

    backend = "test"

    def __init__(self) -> None:
        self.t = 0
        self.calls: list[int] = []

    channels = ("total",)

    def describe(self):
        return {"backend": "test"}

    def host_time_ns(self) -> int:
        return self.t

    def sleep_ns(self, duration_ns: int) -> None:
        self.t += duration_ns

    def read_gpu_clock(self, n: int) -> ClockReads:
        x = np.full(n, self.t, np.int64)
        return ClockReads(x, x, x)

    def prepare(self, kernel) -> KernelHandle:
        return _Handle()

    def execute(self, segments: Sequence[tuple[KernelHandle, int]]) -> ExecRecords:
        ((_, n),) = segments
        self.calls.append(n)
        self.t += 1000
        start = self.t + np.arange(n, dtype=np.int64) * 107
        self.t = int(start[-1]) + 100
        return ExecRecords(np.zeros(n, np.int32), np.arange(n, dtype=np.int32), start, start + 100)

    def spin(self, duration_ns: int) -> ExecRecords:
        return self.execute([(_Handle(), 1)])

    def start_sampling(self) -> None: ...

    def drain_samples(self) -> PowerSamples:
        return PowerSamples.empty()

    def stop_sampling(self) -> PowerSamples:
        return PowerSamples.empty()


def test_default_unstamped_run_is_one_record_over_every_part() -> None:
    dev = _Device()
    asked: list[int] = []

    def more(done: int) -> int:
        asked.append(done)
        return 3 if done < 10 else 0

    rec = dev.run_unstamped(_Handle(), 4, more=more)
    assert dev.calls == [4, 3, 3] and asked == [4, 7, 10]
    assert len(rec) == 1 and rec.exec_index.tolist() == [9]
    assert rec.gpu_end_ns[0] == dev.t and rec.gpu_start_ns[0] == 1000
    assert not dev.unstamped_runs and dev.energy_mj() is None and dev.read_telemetry() is None
    assert dev.ground_truth_of_last_execute() is None
    with dev as same:
        assert same is dev


def test_an_unfinished_device_cannot_be_made() -> None:
    class Half(GPUDevice):
        pass

    with pytest.raises(TypeError):
        Half()


def test_the_hosts_time_after_a_run_counts_towards_the_next_runs_idle() -> None:
    from fingrav.device.base import MeasureRuns

    d = _Device()
    assert d.idle_left_ns(500) == 500  # no run has ended yet: the whole idle
    batch = MeasureRuns([[(_Handle(), 2)]], np.zeros(2, np.int64), 5000, np.array([0, 0]), 10)
    out = d.measure_runs(batch)
    # run 0: 5000 ns idle from t=0; run 1 right after run 0 ended: the whole idle again (no host time in between)
    ends = out.records.gpu_end_ns[[1, 3]]
    assert out.host_start_ns[0] == 5000 + 10 and out.host_start_ns[1] - ends[0] == 5000 + 10
    d.t += 3000  # the host drains and decides for 3 µs: only 2 µs of the next 5 µs idle are left to wait
    assert d.idle_left_ns(5000) == 2000 and d.idle_left_ns(2000) == 0
    nxt = d.measure_runs(MeasureRuns([[(_Handle(), 1)]], np.zeros(1, np.int64), 5000, np.array([0]), 10))
    assert nxt.host_start_ns[0] - ends[1] == 5000 + 10  # the GPU idled the full 5 µs, the host waited 2 µs of it


@pytest.mark.parametrize("read_ns", [0, 700, 2500, 4000])
def test_the_telemetry_read_before_a_run_goes_into_its_idle(read_ns: int) -> None:
    """A read before a run (NVML: 8.7 ms median, 38 ms p90 on the H200) is made in the second half of the idle and
    no longer adds to the run's cost; the GPU still idles the whole idle; only a read longer than half the idle
    adds its excess."""
    from fingrav.device.base import ClockTelemetry, MeasureRuns

    class Slow(_Device):
        def __init__(self) -> None:
            super().__init__()
            self.read_at: list[int] = []

        def read_telemetry(self) -> ClockTelemetry:
            self.read_at.append(self.t)
            self.t += read_ns
            return ClockTelemetry(host_ns=self.t, read_ns=read_ns, sm_mhz=None, mem_mhz=None, reasons=None)

    d = Slow()
    idle, guard, half = 5000, 10, 5000 - 5000 // 2
    out = d.measure_runs(MeasureRuns([[(_Handle(), 2)]], np.zeros(3, np.int64), idle, np.zeros(3, np.int64), guard))
    ends = out.records.gpu_end_ns[1::2]
    # after each run its after-read (inside the next idle), then sleep to half the idle, the before-read, the rest
    gap = max(max(read_ns, half) + read_ns, idle) + guard
    assert (out.host_start_ns[1:] - ends[:-1] == gap).all()
    assert out.host_start_ns[0] == max(half + read_ns, idle) + guard  # the first run: its whole idle too
    if 2 * read_ns <= idle:  # a read within half the idle costs nothing (read after the idle: + read_ns)
        assert gap == idle + guard
        assert [t - e for t, e in zip(d.read_at[2::2], ends[:-1], strict=True)] == [half, half]
    assert all(t.read_ns == read_ns for pair in out.telemetry for t in pair)


def test_the_idle_after_an_unstamped_run_counts_from_its_end() -> None:
    """The collector's unstamped (reference) run marks the GPU idle at its end: the first measure run after it idles
    its whole idle from there, not from the end of the stamped run before the reference (stop 27's h200-state: the
    first SSP run began 36-99 ms after the reference ended, planned 121-163 ms)."""
    from fingrav.collect.runner import _Recorder
    from fingrav.device.base import MeasureRuns

    d = _Device()
    rec = _Recorder(d)
    rec.run(0, "timing", [(_Handle(), 2)], ["main"], 100, 0)
    d.t += 50_000  # long after the stamped run: its end would leave nothing of the next idle
    ref = rec.run(1, "reference", [(_Handle(), 5)], ["main"], 0, 0, unstamped=True)
    assert d.idle_left_ns(5000) == 5000
    nxt = d.measure_runs(MeasureRuns([[(_Handle(), 1)]], np.zeros(1, np.int64), 5000, np.array([0]), 10))
    assert nxt.host_start_ns[0] - ref.gpu_end_ns[-1] >= 5000


def test_a_device_reset_for_the_next_scenario_releases_its_kernels_and_idles_in_full() -> None:
    """`reset_for_next_scenario` (a device kept open across scenarios): `release_kernels` (a no-op by default) and
    the next scenario's first run idles in full, as on a newly opened device, however short the host's pause."""
    d = _Device()
    released: list[int] = []
    d.release_kernels()  # the default: nothing to free
    d.release_kernels = lambda: released.append(d.t)  # type: ignore[method-assign]
    d.execute([(_Handle(), 2)])
    d.mark_busy_end()
    d.t += 3000
    assert d.idle_left_ns(5000) == 2000
    d.reset_for_next_scenario()
    assert released == [d.t] and d.idle_left_ns(5000) == 5000
