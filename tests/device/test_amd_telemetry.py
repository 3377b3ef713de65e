"""amdsmi clock / violation-status telemetry (fingrav/device/amd/telemetry.py) against the fake amdsmi: run-time
discovery with everything, some and nothing offered, the violation counters and flags, errors wrapped once."""

from __future__ import annotations

import json

import pytest

from fingrav.device.amd import AMDSMIPower
from fingrav.device.amd.library import init_amdsmi
from fingrav.device.amd.telemetry import VIOLATION_UNIT, AMDSMITelemetry
from fingrav.testing.fakes import fake_amdsmi as fake

MS = 1_000_000


class ManualClock:
    def __init__(self, start_ns: int = 1_750_000_000_000_000_000) -> None:
        self.now = start_ns

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    c = ManualClock()
    fake.set_clock(c)
    fake.configure()
    yield c
    fake.reset()


def _telemetry(clock: ManualClock, **cfg) -> AMDSMITelemetry:
    fake.configure(**cfg)
    init_amdsmi(fake)
    return AMDSMITelemetry(fake, fake.amdsmi_get_processor_handles()[0], clock_ns=clock)


def test_violation_status_is_discovered_and_read(clock):
    # firmware updates every 1 ms: PPT (power) violation active from 10 to 30 ms
    tel = _telemetry(clock, violations={"ppt_pwr": [(10 * MS, 30 * MS)]})
    d = tel.describe()
    json.dumps(d)
    assert d["clocks"] == ["mem", "sm"] and d["violation_function"] == "amdsmi_get_violation_status"
    assert "acc_counter" in d["violation_counters"] and "acc_ppt_pwr" in d["violation_counters"]
    assert "acc_gfx_clk_below_host_limit" not in d["violation_counters"]  # "N/A" on this GPU
    assert "violation:acc_gfx_clk_below_host_limit_pwr" in d["absent"]  # per-partition lists are left out
    assert d["fields"]["per_ppt_pwr"] == {"unit": "%"} and "active_ppt_pwr" in d["reason_flags"]

    clock.now = fake.epoch_ns() + 20 * MS
    inside = tel.read()
    assert inside.reasons is None and inside.reason_names == ("ppt_pwr",) and inside.errors == {}
    assert inside.sm_mhz == 1600 and inside.mem_mhz == 1300 and inside.violation_unit == VIOLATION_UNIT
    assert inside.violation["acc_counter"] == 21 and inside.violation["acc_ppt_pwr"] == 11

    clock.now = fake.epoch_ns() + 100 * MS
    after = tel.read()
    assert after.reason_names == () and after.sm_mhz == 2100
    delta = after.counters_since(inside)
    assert delta["acc_counter"] == 80 and delta["acc_ppt_pwr"] == 9  # updates 21..29 were still inside
    assert after.fields["per_ppt_pwr"] == 19.0  # 20 of the 101 updates, in whole percent
    json.dumps(after.as_dict())


def test_an_asic_without_violation_status(clock):
    tel = _telemetry(clock, violation_supported=False)
    d = tel.describe()
    assert d["violation_function"] is None and d["violation_counters"] == []
    assert "NOT_SUPPORTED" in d["absent"]["violation_status"]
    r = tel.read()
    assert r.violation == {} and r.reason_names == () and r.sm_mhz == 2100 and r.errors == {}
    assert fake.calls("amdsmi_get_violation_status") == 1  # probed once, never read again


def test_an_amdsmi_without_the_functions(clock, monkeypatch):
    monkeypatch.delattr(fake, "amdsmi_get_violation_status")
    monkeypatch.delattr(fake, "AmdSmiClkType")
    tel = _telemetry(clock)
    d = tel.describe()
    assert d["clocks"] == [] and "no AmdSmiClkType.GFX" in d["absent"]["clock_sm"]
    assert "amdsmi has no amdsmi_get_violation_status()" in d["absent"]["violation_status"]
    r = tel.read()
    assert (r.sm_mhz, r.mem_mhz, r.violation, r.reason_names, r.errors) == (None, None, {}, (), {})


def test_read_errors_are_wrapped_once(clock):
    tel = _telemetry(clock)
    fake.fail("amdsmi_get_violation_status", fake.AMDSMI_STATUS_IO, times=1)
    r = tel.read()
    msg = r.errors["violation_status"]
    assert msg.startswith("amdsmi_get_violation_status failed:") and "AMDSMI_STATUS_IO" in msg
    assert msg.count("failed") == 1
    assert r.sm_mhz == 2100 and r.violation == {} and tel.read_failures == 1
    assert tel.read().errors == {}  # the next read is whole again


def test_amdsmi_power_describes_and_reads_telemetry(clock):
    fake.configure(violations={"socket_thrm": [(0, 10**12)]})
    with fake.installed():
        power = AMDSMIPower(clock=clock)
        try:
            d = power.describe()
            r = power.read_telemetry()
        finally:
            power.close()
    assert "acc_socket_thrm" in d["telemetry"]["violation_counters"]
    assert r.reason_names == ("socket_thrm",) and r.host_ns == clock.now
