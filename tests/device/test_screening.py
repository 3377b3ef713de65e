"""The screen shared by the vendor pollers (fingrav/device/screening.py): what cannot be real is set aside and
counted with a warning, never passed on silently."""

from __future__ import annotations

import math

import pytest

from fingrav.device.screening import FAULT_KINDS, EnergyCounter, FaultLog, is_sentinel, physical_mw, unknown_value
from fingrav.errors import DeviceError


@pytest.mark.parametrize(
    ("mw", "ok"),
    [(250_000.0, True), (0.0, False), (-1.0, False), (math.nan, False), (math.inf, False), (6e6, False),
     (0xFFFF, False), (0xFFFFFFFF, False), (4_999_999.0, True)],
)  # fmt: skip
def test_physical_mw(mw: float, ok: bool) -> None:
    assert physical_mw(mw) is ok  # exactly 0xFFFF mW (65.535 W) is read as the 16-bit "not available" pattern


def test_sentinels() -> None:
    assert all(is_sentinel(v) for v in (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF))
    assert not is_sentinel(12) and not is_sentinel(math.nan)


def test_fault_log_counts_and_warns_once_per_change() -> None:
    stats: dict = {}
    log = FaultLog("test sampler", stats)
    assert all(stats[k] == 0 for k in FAULT_KINDS) and stats["warnings"] == []
    log.count("nonphysical", 2)
    log.report()
    log.report()  # unchanged: no new warning
    log.count("nonphysical")
    log.report()
    assert stats["nonphysical"] == 3 and len(stats["warnings"]) == 2 and "nonphysical = 3" in stats["warnings"][-1]
    with pytest.raises(ValueError, match="unknown fault kind"):
        log.count("gremlins")


def test_energy_counter_never_goes_backwards() -> None:
    c = EnergyCounter("test counter")
    assert c.check(100.0) == 100.0 and c.check(150.0) == 150.0
    assert c.check(20.0) is None and c.backwards == 1  # a reset: dropped
    assert c.check(30.0) == 30.0  # counting on from the reset
    assert c.check(math.nan) is None and c.nonfinite == 1 and c.check(None) is None


def test_unknown_value_is_a_device_error() -> None:
    err = unknown_value("amdsmi field energy_accumulator", 1.5)
    assert isinstance(err, DeviceError) and "unknown value type float" in str(err)
