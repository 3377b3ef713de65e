"""fingrav/device/amd/power.py: AMDSMIPower's energy counter (accumulator ticks x the resolution amdsmi reports,
in mJ; "N/A" or going backwards: None) and what it records (the fake amdsmi on a clock the test drives)."""

from __future__ import annotations

import pytest

from fingrav.backends import get_backend
from fingrav.device.amd import AMDSMIPower
from fingrav.errors import DeviceError
from fingrav.testing.fakes import fake_amdsmi as fake


class Clock:
    def __init__(self) -> None:
        self.now = 1_750_000_000_000_000_000

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    c = Clock()
    fake.reset()
    fake.set_clock(c)
    yield c
    fake.reset()


def test_the_counter_is_the_accumulator_times_its_resolution(clock: Clock) -> None:
    fake.configure(power_w=600.0, counter_resolution_uj=15.3)
    with fake.installed():
        p = AMDSMIPower(clock=clock)
        e0 = p.energy_mj()
        clock.now += 500_000_000
        e1 = p.energy_mj()
        p.close()
    assert e1 - e0 == pytest.approx(600.0 * 500.0, abs=600.0 * 1.0 + 0.0153)  # 600 W x 0.5 s, +-one update (1 ms)
    assert e0 == pytest.approx(fake.energy_ticks(600.0, fake.update_time_ns(clock.now - 500_000_000)) * 15.3e-3)


def test_an_unavailable_or_backwards_counter_is_a_missing_value(clock: Clock) -> None:
    """Updates every 1 ms (update k at k ms): update 20 reads all ones (a driver's "not available"), update 40
    goes 1,000,000 ticks back; the reads in between are numbers; a failed call is the device's error, named."""
    fake.configure(power_w=600.0, faults={20: "all_ones", 40: "energy_backwards"})
    with fake.installed():
        p = AMDSMIPower(clock=clock)
        t0 = clock.now
        values = []
        for ms in (10, 20, 30, 40, 50):
            clock.now = t0 + ms * 1_000_000 + 500_000  # inside update `ms`
            values.append(p.energy_mj())
        fake.fail("amdsmi_get_energy_count", fake.AMDSMI_STATUS_IO)
        with pytest.raises(DeviceError, match="amdsmi_get_energy_count"):
            p.energy_mj()
        d = p.describe()
        p.close()
    assert [v is None for v in values] == [False, True, False, True, False]
    assert values[4] > values[2] > values[0]
    assert set(get_backend("amdsmi").provenance_fields) <= set(d)
    assert d["power"]["counter_resolution_uj"] == pytest.approx(15.3)  # what the counter's CI reads back
