"""NVML clock / clock-event telemetry (fingrav/device/nvidia/telemetry.py) against the fake pynvml: run-time discovery
with everything, some and nothing offered, decoding of the reasons bitmask, errors wrapped once, the read's cost.

Cost measured here (the fake, 2-core dev VM, 2026-12-01): a read (2 clocks, the reasons, 2 violation policies, one
field-values call for 13 fields) takes 70 / 100 / 160 us (p10 / p50 / p90 of 2000 reads) of Python; on hardware each
NVML call is a driver round trip, so the cost there is what `ClockTelemetry.read_ns` (and experiments/peers.py)
says."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time

import numpy as np
import pytest

from fingrav.config import SimConfig
from fingrav.device.base import ClockTelemetry
from fingrav.device.nvidia.telemetry import FIELD_NAMES, TEMPERATURE, NVMLTelemetry, decode_reasons, reason_bits
from fingrav.device.sim import SimulatedGPU

FAKE_MODULE = "fingrav.testing.fakes.fake_pynvml"
EPOCH_NS = 1_790_000_000_000_000_000
MS = 1_000_000


class ManualClock:
    def __init__(self, t_ns: int = EPOCH_NS) -> None:
        self.t = int(t_ns)

    def __call__(self) -> int:
        return self.t


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.delenv("FAKE_PYNVML_CONFIG", raising=False)
    mod = importlib.import_module(FAKE_MODULE)
    mod.configure()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    yield mod
    mod.configure()


def _telemetry(fake, clock: ManualClock | None = None, **cfg) -> NVMLTelemetry:
    clock = clock or ManualClock()
    fake.configure(clock_ns=clock, **cfg)
    fake.nvmlInit()
    return NVMLTelemetry(fake, fake.nvmlDeviceGetHandleByIndex(0), clock_ns=clock)


# --------------------------------------------------------------------------- decoding
def test_reason_bits_come_from_the_module_and_decode(fake):
    bits = reason_bits(fake)
    assert bits[0x4] == "sw_power_cap" and bits[0x1] == "gpu_idle" and bits[0x40] == "hw_thermal_slowdown"
    assert bits[0x2] == "applications_clocks_setting"  # not its deprecated alias UserDefinedClocks
    assert bits[0x200] == "board_limit"  # only the older Throttle family names it
    assert 0 not in bits and 0x1FF not in bits  # None / All are masks, not reasons
    assert decode_reasons(0x4 | 0x40, bits) == ("sw_power_cap", "hw_thermal_slowdown")
    assert decode_reasons(0x800 | 0x1, bits) == ("gpu_idle", "0x800")  # a bit this pynvml does not name
    assert decode_reasons(0, bits) == ()


# --------------------------------------------------------------------------- discovery: all offered
def test_everything_offered_is_found_and_read(fake):
    clock = ManualClock()
    events = [(100 * MS, 300 * MS, fake.nvmlClocksEventReasonSwPowerCap), (400 * MS, 450 * MS, 0x40)]
    tel = _telemetry(fake, clock, clock_events=events)
    d = tel.describe()
    json.dumps(d)
    assert d["clocks"] == ["mem", "sm"]
    assert d["reasons_function"] == "nvmlDeviceGetCurrentClocksEventReasons"
    assert d["violation_policies"] == ["power", "thermal"] and d["violation_unit"] == "ns"
    assert "violation:sync_boost" in d["absent"] and "Not Supported" in d["absent"]["violation:sync_boost"]
    assert d["fields"]["NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"] == {"id": 74, "scope": 0, "unit": "ns"}
    assert d["fields"]["NVML_FI_DEV_POWER_INSTANT"]["unit"] == "mW"
    # one ID, one answer: the perf-policy names of the same IDs are aliases
    assert d["field_aliases"]["NVML_FI_DEV_PERF_POLICY_POWER"] == "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"
    assert d["field_aliases"]["NVML_FI_DEV_PERF_POLICY_SYNC_BOOST"] == "NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST"
    assert "field:NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS" in d["absent"]  # the fake does not answer it

    clock.t = EPOCH_NS + 200 * MS  # inside the power-cap event
    r = tel.read()
    assert isinstance(r, ClockTelemetry) and r.errors == {}
    assert r.host_ns == clock.t and r.read_ns > 0
    assert r.sm_mhz == 1410 and r.mem_mhz == 3201
    assert r.reasons == 0x4 and r.reason_names == ("sw_power_cap",)
    assert r.violation == {"power": 100 * MS, "thermal": 0}
    assert r.fields["NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP"] == 100 * MS
    assert r.fields["NVML_FI_DEV_POWER_CURRENT_LIMIT"] == 700_000
    assert r.fields[TEMPERATURE] == 41.0 and d["temperature"].startswith(TEMPERATURE)  # the die, C
    fake.STATE.gpu_temp_c = 57
    assert tel.read().fields[TEMPERATURE] == 57.0

    clock.t = EPOCH_NS + 1000 * MS  # after both events
    later = tel.read()
    assert later.sm_mhz == 1980 and later.reasons == 0 and later.reason_names == ()
    assert later.violation == {"power": 200 * MS, "thermal": 50 * MS}
    assert later.fields["NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN"] == 50 * MS
    assert later.counters_since(r) == {"power": 100 * MS, "thermal": 50 * MS}
    json.dumps(later.as_dict())


# --------------------------------------------------------------------------- discovery: some offered
def test_a_driver_without_the_event_reasons_symbol_falls_back_to_throttle_reasons(fake):
    tel = _telemetry(
        fake,
        clock_events=[(0, 10**12, 0x20)],
        missing_functions={"nvmlDeviceGetCurrentClocksEventReasons"},
    )
    assert tel.reasons_function == "nvmlDeviceGetCurrentClocksThrottleReasons"
    assert "Function Not Found" in tel.describe()["absent"]["reasons:nvmlDeviceGetCurrentClocksEventReasons"]
    assert tel.read().reason_names == ("sw_thermal_slowdown",)


def test_an_old_binding_without_the_new_names(fake, monkeypatch):
    for name in ("nvmlDeviceGetCurrentClocksEventReasons", "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN"):
        monkeypatch.delattr(fake, name)
    tel = _telemetry(fake)
    d = tel.describe()
    assert d["reasons_function"] == "nvmlDeviceGetCurrentClocksThrottleReasons"
    assert "pynvml has no" in d["absent"]["reasons:nvmlDeviceGetCurrentClocksEventReasons"]
    assert d["absent"]["field:NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN"] == "not defined by this pynvml"
    assert "NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN" not in tel.read().fields


def test_some_policies_and_fields_only(fake):
    tel = _telemetry(
        fake,
        violation_policies=(fake.NVML_PERF_POLICY_POWER,),
        telemetry_fields=(fake.NVML_FI_DEV_POWER_CURRENT_LIMIT,),
        unsupported={"nvmlDeviceGetClockInfo"},
    )
    d = tel.describe()
    assert d["clocks"] == [] and "clock_sm" in d["absent"]
    assert d["violation_policies"] == ["power"]
    power_fields = ["NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE", "NVML_FI_DEV_POWER_CURRENT_LIMIT"]
    assert list(d["fields"]) == power_fields  # the fake answers the power fields whatever telemetry_fields says
    r = tel.read()
    assert r.sm_mhz is None and r.mem_mhz is None and set(r.violation) == {"power"}
    assert r.fields["NVML_FI_DEV_POWER_CURRENT_LIMIT"] == 700_000 and r.errors == {}


# --------------------------------------------------------------------------- discovery: nothing offered
def test_nothing_offered(fake):
    tel = _telemetry(
        fake,
        unsupported={
            "nvmlDeviceGetClockInfo",
            "nvmlDeviceGetCurrentClocksEventReasons",
            "nvmlDeviceGetCurrentClocksThrottleReasons",
            "nvmlDeviceGetFieldValues",
            "nvmlDeviceGetTemperature",
        },
        violation_policies=(),
    )
    d = tel.describe()
    assert d["clocks"] == [] and d["reasons_function"] is None and d["violation_policies"] == [] and d["fields"] == {}
    assert d["temperature"] is None and "Not Supported" in d["absent"][TEMPERATURE]
    assert len([k for k in d["absent"] if k.startswith("field:")]) == len(FIELD_NAMES) - len(d["field_aliases"])
    calls = dict(fake.STATE.calls)
    r = tel.read()
    assert (r.sm_mhz, r.mem_mhz, r.reasons, r.reason_names) == (None, None, None, ())
    assert (r.violation, r.fields, r.errors) == ({}, {}, {})
    assert fake.STATE.calls == calls  # nothing absent is called again


# --------------------------------------------------------------------------- errors
def test_read_errors_are_wrapped_once_and_the_rest_is_read(fake, caplog):
    tel = _telemetry(fake)
    fake.STATE.errors["nvmlDeviceGetClockInfo"] = [fake.NVML_ERROR_GPU_IS_LOST]
    fake.STATE.telemetry_fields = ()  # every field answers NOT_SUPPORTED from now on
    with caplog.at_level(logging.WARNING, logger="fingrav.device.nvidia.telemetry"):
        r = tel.read()
    assert r.sm_mhz is None and r.mem_mhz == 3201 and set(r.violation) == {"power", "thermal"}
    msg = r.errors["clock_sm"]
    assert "nvmlDeviceGetClockInfo failed" in msg and "fell off the bus" in msg and msg.count("failed") == 1
    field_msg = r.errors["field:NVML_FI_DEV_MEMORY_TEMP"]
    assert "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP) failed: Not Supported" in field_msg
    assert field_msg.count("failed") == 1
    assert tel.read_failures == 1 and "NVML telemetry read" in caplog.text


def test_an_unexpected_probe_error_leaves_the_item_out_loudly(fake, caplog):
    fake.configure()
    fake.STATE.errors["nvmlDeviceGetViolationStatus"] = [fake.NVML_ERROR_GPU_IS_LOST]
    fake.nvmlInit()
    with caplog.at_level(logging.WARNING, logger="fingrav.device.nvidia.telemetry"):
        tel = NVMLTelemetry(fake, fake.nvmlDeviceGetHandleByIndex(0))
    assert "fell off the bus" in tel.describe()["absent"]["violation:board_limit"]  # the first policy probed
    assert "failed when probed" in caplog.text
    assert tel.describe()["violation_policies"] == ["power", "thermal"]


# --------------------------------------------------------------------------- cost
def test_read_cost_on_the_fake(fake):
    tel = _telemetry(fake, clock_events=[(0, 10**12, 0x4)])
    costs = np.array([tel.read().read_ns for _ in range(200)])
    # the fake is Python only: well under a millisecond; on hardware read_ns must be looked at (module docstring)
    assert float(np.median(costs)) < 2e6


# --------------------------------------------------------------------------- the device API
def test_nvml_power_describes_and_reads_telemetry(fake):
    from fingrav.device.nvidia import NVMLPower

    fake.configure(period_ms=10.0, clock_events=[(0, 10**15, 0x4)])
    with NVMLPower(sampler_mode="thread") as p:
        d = p.describe()
        assert d["telemetry"]["reasons_function"] == "nvmlDeviceGetCurrentClocksEventReasons"
        json.dumps(d)
        r1 = p.read_telemetry()
        time.sleep(0.02)
        r2 = p.read_telemetry()
    assert r1.reason_names == ("sw_power_cap",) and r2.host_ns > r1.host_ns
    assert r2.counters_since(r1)["power"] > 0


def test_devices_without_telemetry_return_none():
    assert SimulatedGPU(SimConfig(preset="h200"), seed=1).read_telemetry() is None
