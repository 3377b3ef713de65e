"""The NVIDIA backend without a GPU: the NVML sampler against a fake pynvml, error wrapping, the
torch-free helpers of the torch device, and clear errors when torch / pynvml / the driver are missing.

The fake (fingrav/testing/fakes/fake_pynvml.py) is imported by the sampler *process* by its module name
(FAKE_MODULE); threads and in-process pollers get it as sys.modules["pynvml"]."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import drain_until

from fingrav.config import GemmKernel
from fingrav.device.base import PowerSamples
from fingrav.device.nvidia import timestamp as nvts
from fingrav.device.nvidia.library import load_nvml, normalize_uuid, nvml_call, nvml_errors
from fingrav.device.nvidia.poller import GapDetector, NVMLSamplerConfig, PowerPoller, memory_power_supported
from fingrav.device.nvidia.power import nvml_sampler
from fingrav.device.torch_device import (
    import_torch,
)
from fingrav.errors import BackendUnavailableError, DeviceError
from fingrav.testing.fakes.fake_torch import FakeGPUClock, device_class, fake_torch_module

FAKE_MODULE = "fingrav.testing.fakes.fake_pynvml"
ROOT = Path(__file__).resolve().parents[2]
EPOCH_NS = 1_790_000_000_000_000_000  # a 2026 wall-clock time, as NVML stamps


class ManualClock:
    """A host clock the test advances by hand (ns)."""

    def __init__(self, t_ns: int = EPOCH_NS) -> None:
        self.t = int(t_ns)

    def __call__(self) -> int:
        return self.t

    def advance_ms(self, ms: float) -> None:
        self.t += int(ms * 1e6)


@pytest.fixture
def fake(monkeypatch):
    """The fake pynvml, freshly configured, installed as sys.modules['pynvml']."""
    monkeypatch.delenv("FAKE_PYNVML_CONFIG", raising=False)
    mod = importlib.import_module(FAKE_MODULE)
    mod.configure()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    yield mod
    mod.configure()


def _poller(fake, clock: ManualClock, **cfg) -> PowerPoller:
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    return PowerPoller(fake, handle, NVMLSamplerConfig(**cfg), clock_ns=clock, host_ns=clock)  # no wall-clock step


def _run(poller: PowerPoller, clock: ManualClock, seconds: float, every_ms: float = 10.0) -> None:
    for _ in range(int(round(seconds * 1000 / every_ms))):
        clock.advance_ms(every_ms)
        poller.poll()


# --------------------------------------------------------------------------- the fake itself
def test_fake_mirrors_pynvml_errors_and_structures(fake):
    err = fake.NVMLError(fake.NVML_ERROR_NOT_FOUND)
    assert isinstance(err, fake.NVMLError_NotFound) and isinstance(err, fake.NVMLError)
    assert err.value == 6 and str(err) == "Not Found"
    assert isinstance(fake.NVMLError_GpuIsLost(), fake.NVMLError) and fake.NVMLError_GpuIsLost().value == 15
    s = fake.c_nvmlSample_t()
    s.timeStamp = 123
    s.sampleValue.uiVal = 456_000
    assert (s.timeStamp, s.sampleValue.uiVal) == (123, 456_000)
    names = {f[0] for f in fake.c_nvmlFieldValue_t._fields_}
    assert {"fieldId", "scopeId", "timestamp", "valueType", "nvmlReturn", "value"} <= names


def test_fake_get_samples_semantics(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, buffer_size=10)
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    clock.advance_ms(100)
    vtype, samples = fake.nvmlDeviceGetSamples(h, fake.NVML_TOTAL_POWER_SAMPLES, 0)
    assert vtype == fake.NVML_VALUE_TYPE_UNSIGNED_INT and len(samples) == 6  # t0 .. t0 + 100 ms
    last = samples[-1].timeStamp
    with pytest.raises(fake.NVMLError_NotFound):
        fake.nvmlDeviceGetSamples(h, fake.NVML_TOTAL_POWER_SAMPLES, last)
    clock.advance_ms(1000)
    _, samples = fake.nvmlDeviceGetSamples(h, fake.NVML_TOTAL_POWER_SAMPLES, last)
    assert len(samples) == 10  # the ring buffer overflowed


# --------------------------------------------------------------------------- library loading and errors
def test_missing_pynvml_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    with pytest.raises(BackendUnavailableError, match=r"pip install 'fingrav\[nvidia\]'"):
        load_nvml()


def test_wrong_pynvml_module_is_refused():
    with pytest.raises(BackendUnavailableError, match="no nvmlInit"):
        load_nvml("json")


def test_missing_driver_is_backend_unavailable(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(init_error=fake.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(BackendUnavailableError, match="driver") as info:
        NVMLPower(sampler_mode="thread")
    assert isinstance(info.value.__cause__, fake.NVMLError)
    fake.configure(init_error=fake.NVML_ERROR_LIBRARY_NOT_FOUND)
    with pytest.raises(BackendUnavailableError, match="libnvidia-ml"):
        NVMLPower(sampler_mode="thread")


def test_no_device_and_bad_index(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(device_count=0)
    with pytest.raises(BackendUnavailableError, match="sees no GPU"):
        NVMLPower(sampler_mode="thread")
    assert fake.STATE.initialized == 0  # nvmlShutdown after the failure
    fake.configure(device_count=1)
    with pytest.raises(BackendUnavailableError, match="index 3 does not exist"):
        NVMLPower(index=3, sampler_mode="thread")


def test_nvml_errors_are_wrapped_once(fake):
    cases = [
        (fake.NVML_ERROR_GPU_IS_LOST, DeviceError, "GPU is lost"),
        (fake.NVML_ERROR_NO_PERMISSION, DeviceError, "permission"),
        (fake.NVML_ERROR_UNKNOWN, DeviceError, "Unknown Error"),
        (fake.NVML_ERROR_LIBRARY_NOT_FOUND, BackendUnavailableError, "driver"),
    ]
    for code, cls, text in cases:
        with pytest.raises(cls, match=text) as info, nvml_errors(fake, "nvmlSomething"):
            raise fake.NVMLError(code)
        assert "nvmlSomething" in str(info.value)
        assert info.value.__cause__.value == code
    with pytest.raises(KeyError), nvml_errors(fake, "x"):  # not an NVML error: untouched
        raise KeyError("k")
    with pytest.raises(DeviceError, match="no nvmlDeviceGetNothing"):
        nvml_call(fake, "nvmlDeviceGetNothing")


def test_uuid_selects_the_gpu(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(device_count=2)
    with NVMLPower(uuid="55555555-6666-7777-8888-999999999999", sampler_mode="thread") as p:
        assert p.nvml_index == 1
    with pytest.raises(BackendUnavailableError, match="no GPU with UUID"):
        NVMLPower(uuid="deadbeef-0000-0000-0000-000000000000", sampler_mode="thread")
    assert normalize_uuid("GPU-ABC") == normalize_uuid("abc") == "abc"


# --------------------------------------------------------------------------- the poller (in-process, manual clock)
def test_poller_drains_dedups_and_converts_to_ns(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, buffer_size=120)
    clock.advance_ms(5000)  # samples already buffered before start must not be returned
    poller = _poller(fake, clock, interval_ms=10.0)
    t_start = clock()
    poller.start()
    _run(poller, clock, 1.0)
    assert poller.poll() == 0  # same time again: nothing new (NOT_FOUND, quietly)
    s = poller.take()
    assert isinstance(s, PowerSamples)
    assert set(s.channel) == {"total"}
    assert 49 <= len(s) <= 51
    assert np.all(np.diff(s.t_ns) > 0) and s.t_ns[0] > t_start
    assert np.all(s.t_ns % 1000 == 0)  # us -> ns
    assert np.allclose(s.power_mw, [fake.STATE.power_mw(t) for t in s.t_ns], atol=1.0)
    assert s.gaps == []
    assert poller.stats["not_found"] >= 1 and poller.stats["period_ns"] == 20_000_000
    assert len(poller.take()) == 0  # taken once


def test_history_keeps_samples_before_start(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0)
    clock.advance_ms(1000)
    poller = _poller(fake, clock, history_ms=200.0)
    poller.start()
    poller.poll()
    assert 9 <= len(poller.take()) <= 11


def test_buffer_overflow_is_a_gap(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, buffer_size=50)  # the buffer holds 1 s
    poller = _poller(fake, clock)
    poller.start()
    _run(poller, clock, 1.0)
    first = poller.take()
    assert first.gaps == []
    clock.advance_ms(3000)  # the sampler stalls for 3 s
    _run(poller, clock, 1.0)
    s = poller.take()
    assert len(s.gaps) == 1
    a, b = s.gaps[0]
    assert a == first.t_ns[-1] and 1.9e9 < b - a < 2.1e9
    assert a < b <= s.t_ns[0]  # the hole ends at the oldest sample still in the buffer


def test_dropped_samples_are_gaps_beyond_the_factor(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, drop={30, 31, 32, 70})
    poller = _poller(fake, clock)
    poller.start()
    _run(poller, clock, 2.0)
    gaps = poller.take().gaps
    assert len(gaps) == 1  # 80 ms hole (4 periods) is a gap; 40 ms (one lost sample, 2x) is not
    assert gaps[0][1] - gaps[0][0] == 80_000_000


def test_early_gap_is_checked_once_the_period_is_known():
    det = GapDetector(factor=2.5, min_intervals=8)
    t = [0, 20, 40, 140, 160, 180, 200, 220, 240, 260, 280]
    det.feed([x * 1_000_000 for x in t[:4]])
    assert det.take() == []  # not enough intervals for a median yet
    det.feed([x * 1_000_000 for x in t[4:]])
    assert det.take() == [(40_000_000, 140_000_000)]


def test_memory_channel_is_an_average_recorded_on_change(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, memory_update_ms=100.0)
    poller = _poller(fake, clock, memory=True, memory_interval_ms=20.0)
    poller.start()
    _run(poller, clock, 1.0)
    s = poller.take()
    mem = s.channel == "memory"
    assert 9 <= mem.sum() <= 11  # one per 100 ms update, not one per read
    assert np.all(np.diff(s.power_mw[mem]) != 0)
    assert np.all(s.t_ns[mem] % 100_000_000 == fake.STATE.t0_ns % 100_000_000)  # the field's own stamps
    assert (s.channel == "total").sum() >= 49


def test_memory_support_detection(fake):
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    assert memory_power_supported(fake, h)
    fake.configure(memory_supported=False)
    fake.nvmlInit()
    assert not memory_power_supported(fake, h)


def test_transient_error_is_retried_and_persistent_error_raises(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, errors={"nvmlDeviceGetSamples": [fake.NVML_ERROR_UNKNOWN]})
    poller = _poller(fake, clock, max_consecutive_errors=3)
    poller.start()
    _run(poller, clock, 0.5)
    assert poller.stats["errors"] == 1 and len(poller.take()) >= 24
    fake.STATE.errors["nvmlDeviceGetSamples"] = [fake.NVML_ERROR_GPU_IS_LOST] * 3
    clock.advance_ms(10)
    poller.poll()
    clock.advance_ms(10)
    poller.poll()
    clock.advance_ms(10)
    with pytest.raises(DeviceError, match="GPU is lost") as info:
        poller.poll()
    assert isinstance(info.value.__cause__, DeviceError)
    assert not poller.running and poller.fatal


def test_memory_read_failures_disable_only_the_memory_channel(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, field_errors=[fake.NVML_ERROR_UNKNOWN] * 5)
    poller = _poller(fake, clock, memory=True, memory_interval_ms=10.0, max_consecutive_errors=5)
    poller.start()
    _run(poller, clock, 0.5)
    s = poller.take()
    assert poller.stats["memory_disabled"] and (s.channel == "memory").sum() == 0
    assert (s.channel == "total").sum() >= 24
    assert any("memory" in w for w in poller.stats["warnings"])


# --------------------------------------------------------------------------- NVMLPower / the sampler host (thread)
def test_nvml_power_end_to_end_in_a_thread(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(period_ms=10.0)
    with NVMLPower(sample_interval_ms=5.0, sampler_mode="thread") as p:
        assert p.channels == ("total", "memory")
        d = p.describe()
        assert d["name"] == "NVIDIA H200 (fake)" and d["uuid"].startswith("GPU-")
        assert d["serial"] is None  # NO_PERMISSION: left out, not an error
        assert d["driver_version"] == "580.159.04" and d["cuda_driver_version"] == "13.0"
        assert d["power_limit_mw"] == 700_000
        assert "AVERAGE" in d["channel_notes"]["memory"]
        json.dumps(d)
        e0 = p.energy_mj()
        assert isinstance(e0, float)
        assert len(p.drain_samples()) == 0  # not started
        p.start_sampling()
        s = drain_until(p.drain_samples, 30)  # >= 0.3 s of the fake's 10 ms samples: >= 60 polls' time at 5 ms
        assert (s.channel == "total").sum() >= 10 and "memory" in set(s.channel)
        time.sleep(0.05)
        rest = p.stop_sampling()
        rest_total = rest.t_ns[rest.channel == "total"]
        assert len(rest_total) >= 1 and rest_total.min() > s.t_ns[s.channel == "total"].max()
        assert p.sampler.stats["polls"] > 20, p.sampler.stats
    assert fake.STATE.initialized == 0


def test_nvml_power_without_memory_or_energy(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(memory_supported=False, energy_supported=False)
    with NVMLPower(sampler_mode="thread") as p:
        assert p.channels == ("total",)
        assert "memory" not in p.describe()["channel_notes"]
        assert p.energy_mj() is None
        p.start_sampling()
        time.sleep(0.1)
        assert set(p.stop_sampling().channel) <= {"total"}


def test_sampler_fatal_error_reaches_the_parent(fake):
    fake.configure(errors={"nvmlDeviceGetSamples": [fake.NVML_ERROR_UNKNOWN] * 50})
    with nvml_sampler(NVMLSamplerConfig(interval_ms=2.0, max_consecutive_errors=3), mode="thread") as sampler:
        sampler.start()
        time.sleep(0.1)
        with pytest.raises(DeviceError, match="3 failed polls in a row"):
            sampler.drain()


# --------------------------------------------------------------------------- the real sampler process (spawn)
def test_sampler_process_with_the_fake(monkeypatch):
    monkeypatch.setenv("FAKE_PYNVML_CONFIG", json.dumps({"period_ms": 10.0}))
    cfg = NVMLSamplerConfig(interval_ms=5.0, memory=True, nvml_module=FAKE_MODULE)
    sampler = nvml_sampler(cfg, mode="process")
    try:
        info = sampler.open()
        assert info["nvml_index"] == 0 and sampler.alive
        sampler.start()
        s = drain_until(sampler.drain, 15)
        assert (s.channel == "total").sum() >= 15 and s.gaps == []
        assert np.all(np.diff(s.t_ns[s.channel == "total"]) == 10_000_000)
        rest = sampler.stop()
        assert isinstance(rest, PowerSamples)
        assert len(sampler.drain()) == 0  # stopped: nothing more
    finally:
        sampler.close()
    assert not sampler.alive


def test_sampler_process_reports_a_missing_driver(monkeypatch):
    monkeypatch.setenv("FAKE_PYNVML_CONFIG", json.dumps({"init_error": 9}))
    sampler = nvml_sampler(NVMLSamplerConfig(nvml_module=FAKE_MODULE), mode="process")
    with pytest.raises(BackendUnavailableError, match="driver"):
        sampler.open()
    assert not sampler.alive


def test_sampler_process_reports_a_missing_library():
    sampler = nvml_sampler(NVMLSamplerConfig(nvml_module="fingrav_no_such_pynvml"), mode="process")
    with pytest.raises(BackendUnavailableError, match=r"pip install 'fingrav\[nvidia\]'"):
        sampler.open()


def test_sampler_config_validation():
    with pytest.raises(ValueError):
        NVMLSamplerConfig(interval_ms=0.0)
    with pytest.raises(ValueError):
        NVMLSamplerConfig(gap_factor=1.0)
    assert NVMLSamplerConfig().as_dict()["interval_ms"] == 10.0
    assert NVMLSamplerConfig(interval_ms=5.0).schedule.period_ns == 5_000_000


# --------------------------------------------------------------------------- torch device without torch
def test_no_torch_gives_a_clear_error(fake, monkeypatch):
    from fingrav.device.nvidia import NVMLDevice

    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(BackendUnavailableError, match="PyTorch"):
        import_torch()
    with pytest.raises(BackendUnavailableError, match="PyTorch"):
        NVMLDevice(index=0)


def test_gpu_kernels_without_triton_cupy_or_torch(monkeypatch):
    for mod in ("torch", "triton", "cupy"):
        monkeypatch.setitem(sys.modules, mod, None)
    with pytest.raises(ValueError):
        nvts.make_stamper(0, impl="opencl")
    with pytest.raises(BackendUnavailableError, match="no working %globaltimer stamp kernel"):
        nvts.make_stamper(0)
    with pytest.raises(BackendUnavailableError, match="no working spin kernel"):
        nvts.make_spinner(0, 132, stamper=None)


def test_smoke_benchmark_runs_help_without_torch():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "nvml_smoke.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": str(ROOT), "PATH": ""},
    )
    assert out.returncode == 0, out.stderr
    assert "--out" in out.stdout


# --------------------------------------------------------------------------- TorchGPUDevice on a fake torch
@pytest.fixture
def fake_torch(monkeypatch):
    clock = FakeGPUClock()
    monkeypatch.setitem(sys.modules, "torch", fake_torch_module(clock))
    return clock


def test_nvml_device_glue_matches_the_gpu_by_uuid(fake, fake_torch):
    from fingrav.device.nvidia import NVMLDevice

    fake.configure(
        device_count=2, uuids=("GPU-55555555-6666-7777-8888-999999999999", "GPU-00000000-1111-2222-3333-444444444444")
    )
    cls = device_class(fake_torch, base=NVMLDevice)
    with cls(index=0, sample_interval_ms=5.0, sampler_mode="thread") as dev:
        assert dev.power.nvml_index == 1  # torch's GPU 0 is NVML's GPU 1 here
        assert dev.channels == ("total", "memory")
        d = dev.describe()
        assert d["backend"] == "nvml" and d["torch_name"] == "Fake H200" and d["name"] == "NVIDIA H200 (fake)"
        json.dumps(d)
        assert isinstance(dev.energy_mj(), float)
        dev.start_sampling()
        k = dev.prepare(GemmKernel(m=8, n=8, k=8))
        dev.execute([(k, 10)])
        time.sleep(0.1)
        assert (dev.drain_samples().channel == "total").sum() >= 3
        dev.stop_sampling()
    assert fake.STATE.initialized == 0
    # a UUID NVML does not know (a MIG instance, say): fall back to the index, with a warning
    fake.configure(device_count=1)
    with cls(index=0, sampler_mode="thread") as dev:
        assert dev.power.nvml_index == 0


def test_an_nvml_device_kept_open_samples_a_second_scenario_with_the_same_sampler(fake, fake_torch):
    """A device kept open across scenarios (`fingrav.stages.collect.KeptDevice`): after `reset_for_next_scenario`
    the same sampler (not started again) samples the next scenario, whose kernels are prepared anew; the earlier
    scenario's handles are released."""
    from fingrav.device.nvidia import NVMLDevice

    fake.configure(period_ms=10.0)
    cls = device_class(fake_torch, base=NVMLDevice)
    with cls(index=0, sample_interval_ms=5.0, sampler_mode="thread") as dev:
        sampler = dev.power.sampler
        handles = []
        for _scenario in range(2):
            k = dev.prepare(GemmKernel(m=8, n=8, k=8))
            handles.append(k)
            dev.start_sampling()
            t0 = dev.host_time_ns()
            dev.execute([(k, 10)])
            s = drain_until(dev.drain_samples, 3)
            rest = dev.stop_sampling()
            total = PowerSamples.concat([s, rest])
            assert (total.channel == "total").sum() >= 3 and total.t_ns.max() > t0
            dev.reset_for_next_scenario()
        assert dev.power.sampler is sampler and sampler.alive and not sampler.sampling
        assert all(h.sets == [] and h.graphs == {} for h in handles)
    assert fake.STATE.initialized == 0


# --------------------------------------------------------------------------- sampler faults (set aside, counted, loud)
@pytest.mark.parametrize("fault", ["zero", "all_ones"])
def test_poller_sets_aside_nonphysical_values(fake, fault):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, faults={10: fault, 20: fault})
    poller = _poller(fake, clock, interval_ms=10.0)
    poller.start()
    _run(poller, clock, 1.0)
    s = poller.take()
    assert poller.stats["nonphysical"] == 2
    assert np.all(s.power_mw > 0) and np.all(s.power_mw < 5e6)
    assert any("nonphysical" in w for w in poller.stats["warnings"])


def test_poller_drops_both_samples_of_a_conflicting_duplicate(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, faults={15: "conflict"})
    poller = _poller(fake, clock, interval_ms=10.0)
    poller.start()
    _run(poller, clock, 1.0)
    s = poller.take()
    conflicted = fake.STATE.sample_time_ns(15) // 1000 * 1000
    assert poller.stats["conflicting_duplicates"] == 1
    assert conflicted not in set(s.t_ns.tolist())
    assert len(set(s.t_ns.tolist())) == len(s)  # no timestamp twice


def test_poller_counts_time_going_backwards(fake):
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, buffer_size=200, faults={12: "backwards"})
    clock.advance_ms(400)  # the faulty sample is already buffered: it arrives inside one batch
    poller = _poller(fake, clock, interval_ms=10.0, history_ms=1000.0)
    poller.start()
    poller.poll()
    assert poller.stats["time_backwards"] >= 1
    assert np.all(np.diff(poller.take().t_ns) > 0)  # what is kept is in time order


def test_unknown_value_type_fails_loudly(fake):
    from fingrav.device.nvidia.poller import value_of

    with pytest.raises(DeviceError, match="unknown value type"):
        value_of(fake.c_nvmlValue_t(), 42)
    clock = ManualClock()
    fake.configure(clock_ns=clock, period_ms=20.0, value_type=42)
    poller = _poller(fake, clock, interval_ms=10.0, max_consecutive_errors=2)
    poller.start()
    with pytest.raises(DeviceError):
        _run(poller, clock, 0.5)


# --------------------------------------------------------------------------- the host clock: a wall-clock step (NTP)
@pytest.mark.parametrize("step_ms", [2000.0, -2000.0])
def test_a_wall_clock_step_is_detected_and_never_shifts_samples(fake, step_ms: float):
    """NVML stamps its samples with the wall clock, which an NTP step can move during a collection. The poller puts
    the samples on the host clock (CLOCK_MONOTONIC): it notices the step (the wall - host offset jumps), sets aside
    the samples read around it and reports the time as a gap; every sample it keeps sits at its true time."""
    true = ManualClock()
    step_ns = int(step_ms * 1e6)
    fake.configure(clock_ns=true, period_ms=20.0, buffer_size=200, clock_steps=[(500_000_000, step_ns)])
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    poller = PowerPoller(
        fake, handle, NVMLSamplerConfig(interval_ms=10.0), clock_ns=lambda: fake.STATE.wall_ns(true()), host_ns=true
    )
    poller.start()
    _run(poller, true, 1.5)
    s = poller.take()
    assert poller.stats["clock_steps"] == 1 and any("wall clock stepped" in w for w in poller.stats["warnings"])
    truth = {fake.STATE.sample_time_ns(k) // 1000 * 1000 for k in range(200)}
    assert len(s) > 10 and set(s.t_ns.tolist()) <= truth  # nothing shifted by the step
    step_at = fake.STATE.t0_ns + 500_000_000
    assert any(a <= step_at <= b for a, b in s.gaps), s.gaps  # the time around the step is a gap
    if step_ms > 0:  # after a step ahead, the samples stamped on the new wall time are kept, at their true time
        assert s.t_ns.max() > step_at + 500_000_000
    else:  # after a step back, the driver's stamps repeat those already read: none kept, the time a gap
        assert s.t_ns.max() < step_at and max(b for _, b in s.gaps) >= true() - 20_000_000


def test_energy_counter_going_backwards_is_dropped(fake):
    """A counter that steps back (a reset) gives no reading at that point (never a negative energy) and counts
    again from there."""
    from fingrav.device.nvidia import NVMLPower

    true = ManualClock()
    fake.configure(clock_ns=true, energy_jumps=[(300_000_000, -5_000_000)])
    with NVMLPower(sampler_mode="thread") as p:
        true.advance_ms(100)
        e0 = p.energy_mj()
        true.advance_ms(300)  # past the jump back
        assert p.energy_mj() is None and p._energy.backwards == 1
        true.advance_ms(100)
        e2 = p.energy_mj()
        assert e2 is not None and e2 < e0  # counting from the reset on
        true.advance_ms(100)
        assert p.energy_mj() > e2
