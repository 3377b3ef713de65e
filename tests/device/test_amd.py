"""The AMD backend against the fake amdsmi (fingrav/testing/fakes/fake_amdsmi.py): no GPU, no ROCm, no torch.

Sampling and derivation run in-process on a manual clock (exact); one test runs the real sampler process
(multiprocessing spawn) against the fake on the wall clock."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import drain_until

from fingrav.device.amd import AMDSMIDevice, AMDSMIPower, same_gpu_check
from fingrav.device.amd import library as amdlib
from fingrav.device.amd import timestamp as amdts
from fingrav.device.amd.library import call_amdsmi, init_amdsmi
from fingrav.device.amd.poller import AMDSMISamplerConfig, MetricsPoller, PowerDeriver, plan_channels
from fingrav.device.amd.power import amdsmi_sampler
from fingrav.device.base import PowerSamples
from fingrav.errors import BackendUnavailableError, DeviceError
from fingrav.testing.fakes import fake_amdsmi as fake

ROOT = Path(__file__).resolve().parents[2]
FAKE_MODULE = "fingrav.testing.fakes.fake_amdsmi"

MS = 1_000_000
COMPONENTS = {"xcd_energy_acc": [(0, 380.0), (20 * MS, 90.0)], "aid_energy_acc": 140.0, "hbm_energy_acc": 75.0}


class ManualClock:
    def __init__(self, start_ns: int = 1_750_000_000_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    c = ManualClock()
    fake.set_clock(c)
    fake.configure()  # epoch on the manual clock
    yield c
    fake.reset()


@pytest.fixture(autouse=True)
def _fresh_fake():
    fake.reset()
    yield
    fake.reset()


def _poller(clock: ManualClock, **cfg) -> MetricsPoller:
    init_amdsmi(fake)
    handle = fake.amdsmi_get_processor_handles()[0]
    return MetricsPoller(fake, handle, AMDSMISamplerConfig(**cfg), clock=clock)


def _run(poller: MetricsPoller, clock: ManualClock, duration_ns: int, step_ns: int = 250_000) -> None:
    for _ in range(duration_ns // step_ns):
        clock.now += step_ns
        poller.poll()


def _rel(firmware_ns: np.ndarray) -> np.ndarray:
    """Firmware time (ns) -> fake epoch-relative ns."""
    return np.array([fake.firmware_to_rel_ns(int(f) // fake.FIRMWARE_TICK_NS) for f in firmware_ns])


def _expected_mw(spec, rel: np.ndarray) -> np.ndarray:
    """What the counters say: whole ticks between consecutive updates x resolution / interval."""
    cfg = fake.config()
    ticks = np.array([fake.energy_ticks(spec, int(t)) for t in rel], dtype=object)
    d = np.array([(int(b) - int(a)) % (1 << cfg.energy_bits) for a, b in zip(ticks[:-1], ticks[1:], strict=True)])
    return d * cfg.counter_resolution_uj / np.diff(rel) * 1e6


# ----------------------------------------------------------------------------------------- sampling
def test_energy_derived_power_is_exact_against_the_counters(clock):
    steps = [(0, 210.0), (20_300_000, 655.5), (41_700_000, 93.25)]
    fake.configure(power_w=steps)
    poller = _poller(clock)
    assert poller.plan.source == "energy" and poller.plan.channels == ("total",)
    _run(poller, clock, 60 * MS)
    batch = poller.take()
    s = batch.samples
    assert set(s.channel) == {"total"}
    rel = _rel(batch.firmware_ns)
    # one sample per firmware update after the baseline, stamped with the host time of the read
    assert len(s) == len(batch.host_ns) == 60
    assert np.all(np.diff(rel) == 1 * MS)
    assert np.array_equal(s.t_ns, batch.host_ns)
    baseline = fake.firmware_to_rel_ns(fake.firmware_ticks(0))
    expected = _expected_mw(steps, np.concatenate([[baseline], rel]))
    np.testing.assert_allclose(s.power_mw, expected, rtol=1e-12)
    # and within one counter tick per interval of the true mean power
    truth = np.array([fake.truth_power_mw(a, b) for a, b in zip(np.r_[baseline, rel[:-1]], rel, strict=True)])
    assert np.max(np.abs(s.power_mw - truth)) <= 15.3 * 1e6 / MS + 1e-9
    assert batch.duplicates > 0 and not s.gaps
    # host stamps: the read that first saw the update, at most one poll step after it
    host_rel = s.t_ns - fake.epoch_ns()
    assert np.all(host_rel >= rel) and np.all(host_rel - rel <= 250_000)


def test_unchanged_reads_between_firmware_updates_emit_nothing(clock):
    poller = _poller(clock)
    for _ in range(7):  # all within one firmware period
        clock.now += 100_000
        assert poller.poll() == 0
    clock.now += 400_000
    assert poller.poll() == 1
    batch = poller.take()
    assert batch.duplicates == 7 and len(batch.samples) == 1
    np.testing.assert_allclose(batch.samples.power_mw, [300_000.0], atol=15.3)


def test_power_field_source_and_auto_fallback(clock):
    fake.configure(power_w=[(0, 250.4), (5 * MS, 612.0)])
    poller = _poller(clock, source="power")
    assert poller.plan.source == "power" and poller.plan.power_field == "current_socket_power"
    _run(poller, clock, 10 * MS)
    p = poller.take().samples.power_mw
    assert set(np.unique(p)) <= {250_000.0, 612_000.0}  # whole watts
    # no energy accumulator: "auto" falls back to the power field
    fake.configure(na_fields=("energy_accumulator", "average_socket_power"))
    init_amdsmi(fake)
    plan = plan_channels(fake.amdsmi_get_gpu_metrics_info(fake.amdsmi_get_processor_handles()[0]), 15.3)
    assert plan.source == "power"
    # neither: a clear error
    with pytest.raises(DeviceError, match="nothing to sample"):
        plan_channels({"energy_accumulator": "N/A", "current_socket_power": "N/A"}, 15.3)
    with pytest.raises(DeviceError, match="source 'energy'"):
        plan_channels({"energy_accumulator": "N/A"}, 15.3, source="energy")


def test_auto_prefers_energy_and_needs_a_resolution(clock):
    metrics = {"energy_accumulator": 10, "current_socket_power": 300}
    assert plan_channels(metrics, 15.3).source == "energy"
    assert plan_channels(metrics, None).source == "power"


def test_component_channels_present(clock):
    fake.configure(power_w=600.0, components=COMPONENTS)
    poller = _poller(clock)
    assert poller.plan.channels == ("total", "xcd", "iod", "hbm")
    assert poller.describe()["component_channels_available"] is True
    _run(poller, clock, 40 * MS)
    batch = poller.take()
    s = batch.samples
    rel = _rel(batch.firmware_ns)
    baseline = fake.firmware_to_rel_ns(fake.firmware_ticks(0))
    for channel, fld in (
        ("total", None),
        ("xcd", "xcd_energy_acc"),
        ("iod", "aid_energy_acc"),
        ("hbm", "hbm_energy_acc"),
    ):
        spec = fake.config().power_w if fld is None else COMPONENTS[fld]
        got = s.power_mw[s.channel == channel]
        np.testing.assert_allclose(got, _expected_mw(spec, np.concatenate([[baseline], rel])), rtol=1e-12)
    xcd = s.power_mw[s.channel == "xcd"]
    assert xcd[5] == pytest.approx(380_000, abs=20) and xcd[-1] == pytest.approx(90_000, abs=20)


def test_component_channels_absent_is_said_clearly(clock):
    poller = _poller(clock)
    d = poller.describe()
    assert d["channels"] == ["total"] and d["component_channels_available"] is False
    assert d["missing_components"] == ["xcd", "iod", "hbm"]
    assert "no per-component" in d["note"] and "amdsmi 7.0" in d["note"]


def test_accumulator_wraps_around(clock):
    start = (1 << 32) - 40 * 65_359  # 1 kW = 65,359 ticks/ms: wraps after ~40 ms
    fake.configure(power_w=1000.0, energy_bits=32, energy_start_ticks=start)
    poller = _poller(clock, energy_bits=32)
    _run(poller, clock, 80 * MS)
    batch = poller.take()
    ticks = [fake.energy_ticks(1000.0, int(t)) for t in _rel(batch.firmware_ns)]
    assert any(b < a for a, b in zip(ticks[:-1], ticks[1:], strict=True))  # it did wrap
    np.testing.assert_allclose(batch.samples.power_mw, 1_000_000.0, atol=15.3)
    assert not batch.samples.gaps


def test_counter_reset_drops_the_interval_and_records_a_gap():
    d = PowerDeriver(15.3)
    d.feed(1_000, {"firmware_timestamp": 100_000, "energy_accumulator": 1_000_000})
    d.feed(2_000, {"firmware_timestamp": 200_000, "energy_accumulator": 1_065_359})
    d.feed(3_000, {"firmware_timestamp": 300_000, "energy_accumulator": 12})  # went back: reset
    d.feed(4_000, {"firmware_timestamp": 400_000, "energy_accumulator": 65_371})  # (a glitch would end here)
    d.feed(5_000, {"firmware_timestamp": 500_000, "energy_accumulator": 130_730})
    b = d.take()
    # the interval into the reset and the one after it are dropped (a counter that stepped back and jumped up
    # again would give a plausible wrong power there), both gaps; then it counts on from the reset
    assert len(b.samples) == 2 and b.samples.gaps == [(2_000, 3_000), (3_000, 4_000)]
    assert d.fault_stats["counter_backwards"] == 1
    np.testing.assert_allclose(b.samples.power_mw, [65_359 * 15.3, 65_359 * 15.3], rtol=1e-12)


def test_gap_detection_on_firmware_stall(clock):
    fake.configure(power_w=300.0, firmware_stalls=[(20 * MS + 1, 32 * MS)])
    poller = _poller(clock)
    _run(poller, clock, 50 * MS)
    batch = poller.take()
    gaps = batch.samples.gaps
    assert len(gaps) == 1
    lo, hi = (g - fake.epoch_ns() for g in gaps[0])
    assert 20 * MS <= lo < 21 * MS and 32 * MS <= hi < 33 * MS
    # the energy over the stall is still right: one long interval at the same power
    np.testing.assert_allclose(batch.samples.power_mw, 300_000.0, atol=15.3)


def test_no_gaps_when_polling_at_the_update_rate(clock):
    poller = _poller(clock, firmware_period_ns=MS)
    _run(poller, clock, 100 * MS, step_ns=MS)
    assert not poller.take().samples.gaps


def test_failed_reads_are_counted_and_show_as_a_gap(clock):
    poller = _poller(clock)
    _run(poller, clock, 15 * MS)
    fake.fail("amdsmi_get_gpu_metrics_info", fake.AMDSMI_STATUS_BUSY, times=40)  # 10 ms of failed reads
    _run(poller, clock, 30 * MS)
    batch = poller.take()
    assert batch.errors == 40 and len(batch.samples.gaps) == 1
    assert "AMDSMI_STATUS_BUSY" in poller.last_error


def test_persistent_read_failure_raises(clock):
    poller = _poller(clock, max_consecutive_errors=5)
    fake.fail("amdsmi_get_gpu_metrics_info", fake.AMDSMI_STATUS_IO, times=None)
    with pytest.raises(DeviceError, match="5 failed reads in a row"):
        _run(poller, clock, 5 * MS)


def test_energy_count_reader(clock):
    fake.configure(power_w=400.0)
    poller = _poller(clock, reader="energy_count")
    assert poller.plan.source == "energy"
    _run(poller, clock, 100 * MS, step_ns=300_000)
    batch = poller.take()
    s = batch.samples
    assert len(s) > 90
    # The driver clock stamps reads, not firmware updates: single values scatter by poll/update period
    # (0.9 or 1.2 ms of read time for 1 ms of energy here), the time-weighted mean does not.
    dt = np.diff(batch.firmware_ns)
    assert np.sum(s.power_mw[1:] * dt) / np.sum(dt) == pytest.approx(400_000, rel=5e-3)  # ends: 1 poll step
    assert np.ptp(s.power_mw) > 50_000


# ----------------------------------------------------------------------------------------- import failures
def test_import_failure_missing_package(capsys):
    with fake.installed("missing_package"), pytest.raises(BackendUnavailableError) as err:
        amdlib.import_amdsmi()
    msg = str(err.value)
    assert "'amdsmi' is not installed" in msg and "pip install 'fingrav[amd]'" in msg
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("failure", ["missing_library", "missing_library_oserror"])
def test_import_failure_missing_library(failure, capsys):
    with fake.installed(failure), pytest.raises(BackendUnavailableError) as err:
        amdlib.import_amdsmi()
    msg = str(err.value)
    assert "cannot load ROCm's libamd_smi.so" in msg and "only the Python bindings" in msg
    assert "amd-smi-lib" in msg and "libamd_smi.so" in msg
    assert capsys.readouterr().out == ""  # what the wheel prints is captured, not shown


def test_import_failure_version_mismatch_undefined_symbol():
    with fake.installed("version_mismatch"), pytest.raises(BackendUnavailableError) as err:
        amdlib.import_amdsmi()
    msg = str(err.value)
    assert "does not match ROCm's libamd_smi.so" in msg and "undefined symbol" in msg
    assert "/opt/rocm/share/amd_smi" in msg


def test_import_failure_version_mismatch_missing_function(monkeypatch):
    monkeypatch.delattr(fake, "amdsmi_get_energy_count")
    with fake.installed(), pytest.raises(BackendUnavailableError, match="does not match.*lack amdsmi_get_energy_count"):
        amdlib.import_amdsmi()


def test_init_failing_to_load_a_symbol_is_a_version_mismatch():
    fake.configure(init_error=5)  # AMDSMI_STATUS_FAIL_LOAD_SYMBOL
    with fake.installed(), pytest.raises(BackendUnavailableError, match="does not match ROCm's libamd_smi.so"):
        AMDSMIPower()


@pytest.mark.parametrize(
    ("setup", "needle"),
    [
        ({"num_gpus": 0}, "returned no GPU"),
        ({"init_error": fake.AMDSMI_STATUS_DRIVER_NOT_LOADED}, "DRIVER_NOT_LOADED"),
        ({"init_error": fake.AMDSMI_STATUS_NO_DRV}, "NO_DRV"),
    ],
)
def test_no_amd_gpu(setup, needle):
    fake.configure(**setup)
    with fake.installed(), pytest.raises(BackendUnavailableError) as err:
        AMDSMIPower()
    msg = str(err.value)
    assert "no AMD GPU found" in msg and needle in msg and "amdgpu driver" in msg


def test_index_out_of_range():
    fake.configure(num_gpus=2)
    with fake.installed(), pytest.raises(BackendUnavailableError, match=r"device.index=5 .* 2 AMD GPU"):
        AMDSMIPower(5)
    assert not fake._STATE.initialized  # shut down again


def test_each_failure_has_its_own_message():
    msgs = {
        amdlib.msg_missing_package("x"),
        amdlib.msg_missing_library("x"),
        amdlib.msg_version_mismatch("a", "b", "x"),
        amdlib.msg_no_gpu("x"),
    }
    assert len(msgs) == 4


# ----------------------------------------------------------------------------------------- errors, identity
def test_amdsmi_errors_are_wrapped_once():
    with fake.installed():
        power = AMDSMIPower()
        fake.fail("amdsmi_get_energy_count", fake.AMDSMI_STATUS_NO_PERM)
        with pytest.raises(DeviceError) as err:
            power.energy_mj()
        power.close()
    exc = err.value
    assert "amdsmi_get_energy_count failed" in str(exc) and "err_code 10" in str(exc)
    assert isinstance(exc.__cause__, fake.AmdSmiLibraryException)
    assert not isinstance(exc.__cause__, DeviceError) and exc.__cause__.__cause__ is None


def test_call_amdsmi_passes_other_exceptions_and_flags_missing_functions():
    with pytest.raises(ZeroDivisionError):
        call_amdsmi(type("M", (), {"f": staticmethod(lambda: 1 / 0), "AmdSmiException": fake.AmdSmiException}), "f")
    with pytest.raises(DeviceError, match="amdsmi has no amdsmi_nothing"):
        call_amdsmi(fake, "amdsmi_nothing")
    with pytest.raises(DeviceError, match="NOT_INIT"):
        call_amdsmi(fake, "amdsmi_get_processor_handles")  # before amdsmi_init


def test_describe_and_energy(clock):
    fake.configure(power_w=500.0)
    with fake.installed():
        power = AMDSMIPower(clock=clock)
        d = power.describe()
        e0 = power.energy_mj()
        clock.now += 100 * MS
        e1 = power.energy_mj()
        power.close()
        power.close()  # idempotent
    assert d["backend"] == "amdsmi" and d["name"] == "AMD Instinct MI300X"
    assert d["driver"] == {"driver_name": "amdgpu", "driver_version": "6.10.5"}
    assert d["amdsmi_package_version"] == "7.0.2" and d["amdsmi_library_version"].startswith("26.0.2")
    assert d["metrics_version"] == "1.6" and d["asic"]["target_graphics_version"] == "gfx942"
    assert d["channels"] == ["total"] and d["component_channels_available"] is False
    assert "no per-component" in d["component_channels_note"]
    assert d["power"]["total_source"] == "energy" and d["power"]["counter_resolution_uj"] == 15.3
    assert d["verified_on_hardware"] is False and d["gpu_clock"]["source"] == "s_memrealtime"
    assert e1 - e0 == pytest.approx(500.0 * 0.1 * 1000, abs=0.02)  # 500 W x 100 ms = 50 J


def test_sampling_api_requires_start():
    with fake.installed():
        power = AMDSMIPower()
        with pytest.raises(DeviceError, match="not running"):
            power.drain_samples()
        power.close()


# ----------------------------------------------------------------------------------------- the process
def test_sampler_process_against_the_fake():
    setup = (FAKE_MODULE, "configure", {"power_w": 420.0, "components": {"hbm_energy_acc": 80.0}})
    fake.configure(**setup[2])
    with fake.installed():
        power = AMDSMIPower(module_name=FAKE_MODULE, sampler_setup=setup)
        assert power.channels == ("total", "hbm")
        power.start_sampling()
        first = drain_until(power.drain_samples, 150)
        rest = PowerSamples.concat([drain_until(power.drain_samples, 60), power.stop_sampling()])
        power.close()
    for s in (first, rest):
        assert len(s) > 0 and set(s.channel) == {"total", "hbm"}
        np.testing.assert_allclose(s.power_mw[s.channel == "total"], 420_000.0, atol=16)
        np.testing.assert_allclose(s.power_mw[s.channel == "hbm"], 80_000.0, atol=16)
        assert np.all(np.diff(s.t_ns[s.channel == "total"]) > 0)
    n = (len(first) + len(rest)) / 2
    # ~1 kHz, the fake firmware's period: on an idle machine most steps between instants are one 1 ms update; a
    # loaded one delays the polls (the 2-core CI runner beside the fidelity matrix: a median of 2.0 ms), so only a
    # few periods are asserted: the poller keeps up, it is not the cadence that is measured here
    total = np.concatenate([first.t_ns[first.channel == "total"], rest.t_ns[rest.channel == "total"]])
    assert n > 200 and np.median(np.diff(total)) < 5 * MS
    assert first.t_ns.max() < rest.t_ns.min()
    host, fw = power.firmware_stamps()
    assert len(host) == len(fw) == int(n)


def test_sampler_process_reports_child_failures():
    setup = (FAKE_MODULE, "configure", {"num_gpus": 0})
    sampler = amdsmi_sampler(AMDSMISamplerConfig(module_name=FAKE_MODULE), setup, start_timeout_s=60)
    with pytest.raises(DeviceError, match="amdsmi GPU index 0 not found"):
        sampler.open()
    assert not sampler.alive


def test_sampler_thread_reports_a_fatal_poll_error_at_the_next_drain():
    fake.configure(power_w=300.0)
    with fake.installed():
        power = AMDSMIPower()
        cfg = AMDSMISamplerConfig(source=power.plan.source, max_consecutive_errors=3, module_name="amdsmi")
        sampler = amdsmi_sampler(cfg, mode="thread")
        try:
            sampler.open()
            assert sampler.sampling and sampler.alive
            time.sleep(0.05)
            assert len(sampler.drain().samples) > 0
            fake.fail("amdsmi_get_gpu_metrics_info", fake.AMDSMI_STATUS_NO_PERM, times=100)
            time.sleep(0.05)
            with pytest.raises(DeviceError, match="3 failed reads in a row"):
                sampler.drain()
        finally:
            sampler.close()
        power.close()
    assert not sampler.alive


# ----------------------------------------------------------------------------------------- clock, laziness
def test_realtime_ticks_to_ns():
    assert amdts.realtime_ticks_to_ns(123_456_789).item() == 1_234_567_890
    np.testing.assert_array_equal(amdts.realtime_ticks_to_ns([0, 1, 2**40]), [0, 10, 10 * 2**40])
    assert amdts.realtime_ticks_to_ns(3, hz=3_000_000).item() == 1000
    assert "s_memrealtime" in amdts.MEMREALTIME_ASM and "lgkmcnt(0)" in amdts.MEMREALTIME_ASM


def test_module_imports_neither_amdsmi_nor_torch():
    code = "import sys, fingrav.device.amd; assert 'torch' not in sys.modules and 'amdsmi' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_same_gpu_check():
    props = type("P", (), {"pci_bus_id": 0x22})()
    assert same_gpu_check("0000:22:00.0", props) == "same"
    assert same_gpu_check("0000:0c:00.0", props).startswith("different")
    assert same_gpu_check("N/A", props) == "unknown" and same_gpu_check("0000:22:00.0", object()) == "unknown"


def test_device_without_a_gpu_torch_releases_amdsmi():
    from fingrav.device.torch_device import TorchGPUDevice

    assert issubclass(AMDSMIDevice, TorchGPUDevice) and AMDSMIDevice.backend == "amdsmi"
    with fake.installed(), pytest.raises(BackendUnavailableError):  # no torch here, or no GPU for it
        AMDSMIDevice(0)
    assert not fake._STATE.initialized


@pytest.fixture
def stub_torch_device(monkeypatch):
    """TorchGPUDevice's torch part replaced by a stub: what AMDSMIDevice adds can be tested without torch."""
    from types import SimpleNamespace

    from fingrav.device.torch_device import TorchGPUDevice

    def init(self, index=0, **kwargs):
        self.index = index
        self.props = SimpleNamespace(multi_processor_count=304, pci_bus_id=0x0C, name="AMD Instinct MI300X")
        self._torch = SimpleNamespace(version=SimpleNamespace(hip=kwargs.pop("hip", "6.4")))
        self._stamper = SimpleNamespace(name="stub")

    monkeypatch.setattr(TorchGPUDevice, "__init__", init)
    monkeypatch.setattr(TorchGPUDevice, "describe", lambda self: {"torch_index": self.index, "stamp_kernel": "stub"})
    monkeypatch.setattr(TorchGPUDevice, "close", lambda self: None)


def test_amdsmi_device_delegates_the_power_side(stub_torch_device):
    setup = (FAKE_MODULE, "configure", {"power_w": 333.0})
    fake.configure(**setup[2])
    with fake.installed():
        dev = AMDSMIDevice(0, power_kwargs={"module_name": FAKE_MODULE, "sampler_setup": setup})
        d = dev.describe()
        assert dev.channels == ("total",) and d["backend"] == "amdsmi" and d["torch_index"] == 0
        assert d["same_gpu_check"] == "same" and d["component_channels_available"] is False
        assert dev.energy_mj() > 0
        dev.start_sampling()
        s = PowerSamples.concat([drain_until(dev.drain_samples, 31), dev.stop_sampling()])
        dev.close()
    assert len(s) > 30
    np.testing.assert_allclose(s.power_mw, 333_000.0, atol=16)
    assert not fake._STATE.initialized


def test_amdsmi_device_finds_torchs_gpu_by_pci_bus(stub_torch_device, monkeypatch):
    from fingrav.device.torch_device import TorchGPUDevice

    stub_init = TorchGPUDevice.__init__

    def init(self, index=0, **kwargs):  # torch's GPU 0 is amdsmi's GPU 1 (bus 0x22 in the fake)
        stub_init(self, index, **kwargs)
        self.props.pci_bus_id = 0x22

    monkeypatch.setattr(TorchGPUDevice, "__init__", init)
    fake.configure(num_gpus=2)
    with fake.installed():
        dev = AMDSMIDevice(0)
        d = dev.describe()
        dev.close()
    assert d["index"] == 1 and d["bdf"] == "0000:22:00.0" and d["same_gpu_check"] == "same"
    assert d["torch_index"] == 0


def test_amdsmi_device_clock_hooks_need_rocm(stub_torch_device):
    with fake.installed():
        dev = AMDSMIDevice(0)
        dev._torch.version.hip = None
        with pytest.raises(BackendUnavailableError, match="ROCm build of torch"):
            dev._make_stamper()
        dev.close()


# ----------------------------------------------------------------------------------------- the sweep config
def test_mi300x_config_is_the_papers_setup():
    from fingrav.config import load_config

    cfg = load_config(ROOT / "config" / "mi300x.yaml")
    assert cfg.device.backend == "amdsmi"
    by_name = {s.name: s for s in cfg.scenarios}
    for size in (2048, 4096, 8192):
        tag = f"{size // 1024}k"
        gemm, gemv = by_name[f"cb-{tag}"].kernel, by_name[f"mb-{tag}"].kernel
        assert (gemm.kind, gemm.m, gemm.n, gemm.k, gemm.dtype) == ("gemm", size, size, size, "bf16")
        assert (gemv.kind, gemv.m, gemv.k, gemv.dtype) == ("gemv", size, size, "bf16")
    pairs = {
        (s.kernel.label(), s.predecessor.kernel.label(), s.predecessor.count)
        for s in cfg.scenarios
        if s.predecessor is not None
    }
    g = {n: f"gemm {n}x{n}x{n} bf16" for n in (2048, 4096, 8192)}
    v = {n: f"gemv {n}x{n} bf16" for n in (2048, 4096, 8192)}
    assert (g[8192], g[2048], 60) in pairs and (g[2048], v[4096], 40) in pairs  # the paper's counts
    wanted = {
        (g[2048], g[8192]),
        (g[2048], g[4096]),
        (v[8192], v[4096]),
        (v[8192], v[2048]),
        (v[4096], g[8192]),
        (v[4096], g[4096]),
    }
    assert wanted <= {(a, b) for a, b, _ in pairs}


def test_memrealtime_kernels_use_the_documented_asm():
    spec = amdts.MEMREALTIME
    assert spec.asm == amdts.MEMREALTIME_ASM and spec.constraint == "=s" and spec.warp_size == 64
    assert spec.hz == amdts.REALTIME_HZ and spec.impls == ("triton",)  # no CuPy on ROCm
    assert (spec.triton_stamp_name, spec.triton_spin_name) == ("triton-memrealtime", "triton-memrealtime-fma-spin")
    assert amdts.realtime_ticks_for_ns(25) == 3 and amdts.realtime_ticks_for_ns(30) == 3
    assert amdts.realtime_ticks_for_ns(1_000_000) == 100_000


# ---------------------------------------------------------------------------------------- sampler faults (never silent)
def _kept_are_right(batch, watts: float = 300.0) -> None:
    """Every sample kept is the true constant power to within a counter tick per interval (no garbage passed)."""
    s = batch.samples
    assert len(s) > 20
    np.testing.assert_allclose(s.power_mw, watts * 1000.0, atol=15.3 * 1e6 / MS + 1e-6)


def test_firmware_timestamp_stepping_back_is_counted_and_a_gap(clock):
    fake.configure(power_w=300.0, faults={20: "backwards"})
    poller = _poller(clock)
    _run(poller, clock, 50 * MS)
    batch = poller.take()
    assert poller.stats["time_backwards"] == 1 and batch.samples.gaps
    assert any("time_backwards" in w for w in poller.stats["warnings"])
    _kept_are_right(batch)


def test_conflicting_duplicate_readings_are_both_set_aside(clock):
    """Reads with the timestamp of the last update but other values: that update's samples are taken back, the
    next read starts afresh, the time in between is a gap."""
    fake.configure(power_w=300.0, faults={20: "conflict"})
    poller = _poller(clock)
    _run(poller, clock, 50 * MS)
    batch = poller.take()
    assert poller.stats["conflicting_duplicates"] == 1
    assert any("conflicting_duplicates" in w for w in poller.stats["warnings"])
    fw20 = fake.firmware_ticks(20 * MS) * fake.FIRMWARE_TICK_NS
    assert fw20 not in set(batch.firmware_ns.tolist())  # the update's sample was taken back
    (gap,) = batch.samples.gaps
    lo, hi = (g - fake.epoch_ns() for g in gap)
    assert lo < 20 * MS < hi
    _kept_are_right(batch)


@pytest.mark.parametrize("source", ["energy", "power"])
@pytest.mark.parametrize("fault", ["zero", "all_ones"])
def test_zero_and_all_ones_readings_are_set_aside(clock, fault: str, source: str):
    fake.configure(power_w=300.0, faults={15: fault, 30: fault}, na_fields=())
    poller = _poller(clock, source=source)
    _run(poller, clock, 50 * MS)
    batch = poller.take()
    assert poller.stats["nonphysical"] >= 2
    assert any("nonphysical" in w for w in poller.stats["warnings"])
    if source == "energy":
        _kept_are_right(batch)
    else:  # whole watts
        assert np.all(batch.samples.power_mw == 300_000.0) and len(batch.samples) > 20


@pytest.mark.parametrize("fault", ["float", "string"])
def test_a_value_of_unknown_type_fails_loudly(clock, fault: str):
    fake.configure(faults={5: fault})
    poller = _poller(clock)
    with pytest.raises(DeviceError, match="energy_accumulator: unknown value type"):
        _run(poller, clock, 10 * MS)


def test_energy_counter_going_backwards_is_counted_and_never_a_negative_power(clock):
    fake.configure(power_w=300.0, faults={20: "energy_backwards"})
    poller = _poller(clock)
    _run(poller, clock, 50 * MS)
    batch = poller.take()
    assert poller.stats["counter_backwards"] == 1 and batch.samples.gaps
    assert any("counter_backwards" in w for w in poller.stats["warnings"])
    _kept_are_right(batch)  # and the leap back up after it was set aside as non-physical, not kept


def test_energy_mj_drops_a_reading_that_went_backwards(clock):
    fake.configure(power_w=300.0, faults={20: "energy_backwards"})
    power = AMDSMIPower(module_name=FAKE_MODULE, clock=clock)
    try:
        clock.now += 10 * MS
        e0 = power.energy_mj()
        clock.now += 10 * MS  # update 20
        assert power.energy_mj() is None and power._energy.backwards == 1
        clock.now += 10 * MS
        assert power.energy_mj() > e0  # from the counter's own value on (update 30 is a good one)
    finally:
        power.close()


def test_amd_stamps_never_follow_the_wall_clock(monkeypatch):
    """The amdsmi poller stamps its reads with the host clock (CLOCK_MONOTONIC): the wall clock set an hour ahead in
    the middle of sampling moves no stamp."""
    fake.set_clock(time.monotonic_ns)  # the firmware runs on its own clock, not the wall clock
    fake.configure(power_w=300.0)
    init_amdsmi(fake)
    handle = fake.amdsmi_get_processor_handles()[0]
    poller = MetricsPoller(fake, handle, AMDSMISamplerConfig())  # default clock
    real_time_ns = time.time_ns
    produced, end = 0, time.monotonic() + 60.0  # 30 samples (1 ms firmware updates), then 30 with the clock ahead
    first_poll_ns = time.monotonic_ns()
    while produced < 60:
        assert time.monotonic() < end, f"{produced} samples in 60 s"
        if produced >= 30 and time.time_ns is real_time_ns:
            monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + 3600 * 10**9)
        produced += poller.poll()
        time.sleep(0.0002)
    last_poll_ns = time.monotonic_ns()
    t = poller.take().samples.t_ns
    # every stamp inside the polls' CLOCK_MONOTONIC window (not an hour ahead), in order; the window's length is the
    # machine's (a loaded machine delays polls), not a fixed 50 ms step
    assert len(t) > 20 and np.all(np.diff(t) > 0) and first_poll_ns <= t[0] and t[-1] <= last_poll_ns
    assert abs(int(t[-1]) - time.monotonic_ns()) < 10**9
