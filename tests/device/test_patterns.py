"""The calibration kernel with a known power pattern (fingrav.device.patterns): its duty, its expected power and
what its launcher enqueues (fake torch and spinners: no GPU)."""

from __future__ import annotations

import sys
import types

import pytest

from fingrav.device import kernels, patterns


def test_duty_and_expected_power() -> None:
    assert patterns.duty(300.0, 100.0) == pytest.approx(0.75)
    assert patterns.expected_power_w(300.0, 100.0, 330.0, 130.0) == pytest.approx(0.75 * 330.0 + 0.25 * 130.0)
    assert patterns.expected_power_w(500.0, 0.0, 330.0, 130.0) == pytest.approx(330.0)
    with pytest.raises(ValueError, match="high_us"):
        patterns.duty(0.0, 0.0)


class _Tensor:
    def __init__(self) -> None:
        self.zeroed = 0

    def zero_(self) -> None:
        self.zeroed += 1


def test_launcher_alternates_the_two_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int]] = []

    class Spinner:
        def __init__(self, programs: int) -> None:
            self.programs = programs

        def launch(self, t0: object, duration_ns: int) -> None:
            calls.append((f"spin{self.programs}", duration_ns))

    class Stamper:
        def stamp(self, buf: object, counter: object) -> None:
            calls.append(("stamp", 0))

    fake_torch = types.SimpleNamespace(
        cuda=types.SimpleNamespace(
            current_device=lambda: 0,
            get_device_properties=lambda i: types.SimpleNamespace(multi_processor_count=132),
        ),
        zeros=lambda *a, **k: _Tensor(),
        int64="int64",
        int32="int32",
    )
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    monkeypatch.setattr(kernels, "make_stamper", lambda index, timer: Stamper())
    monkeypatch.setattr(
        kernels, "make_spinner", lambda index, sms, stamper, timer, programs_per_sm=4: Spinner(sms * programs_per_sm)
    )
    launch = patterns.spin_pattern(high_us=300.0, low_us=100.0, cycles=2)
    assert calls == []  # nothing runs before the launcher is called
    launch()
    spins = [c for c in calls if c[0] != "stamp"]
    assert spins == [("spin528", 300_000), ("spin1", 100_000)] * 2
    assert [c[0] for c in calls].count("stamp") == 4  # every phase's deadline anchored to its own stamp


def test_bad_arguments_fail_before_any_gpu_work() -> None:
    with pytest.raises(ValueError, match="cycles"):
        patterns.spin_pattern(high_us=1.0, low_us=1.0, cycles=0)
