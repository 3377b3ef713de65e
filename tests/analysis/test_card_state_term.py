"""The card's state between runs in the headline's CI (fingrav.analysis.card_state; named apart from
tests/experiments/test_card_state.py, which tests experiments/card_state.py: the test folders are not packages)."""

from __future__ import annotations

import math

import pytest

from fingrav.analysis.card_state import CardStateTerm, card_state_of
from fingrav.analysis.sustained import SustainedHeadline
from fingrav.analysis.tdist import t_critical
from fingrav.backends import BACKENDS, CardState
from fingrav.contracts.plan import Plan
from fingrav.contracts.provenance import DeviceInfo
from fingrav.contracts.result import Estimate
from fingrav.device.sim.presets import PRESETS, preset_summary
from fingrav.testing.synthetic import SynthSpec, generate


def _plan_with_device(device: dict | None) -> Plan:
    plan = generate(SynthSpec())["plan"]
    info = DeviceInfo(**device) if device is not None else None
    return plan.model_copy(update={"provenance": plan.provenance.model_copy(update={"device": info})})


def _headline(source: str = "sustained", power_mw: float = 500_000.0, half_mw: float = 500.0) -> SustainedHeadline:
    p = Estimate.of(power_mw, power_mw - half_mw, power_mw + half_mw, "mW", "batch means")
    e = p.scaled(20_000 * 1e-9, "mJ", "x the cycle")  # a 20 µs cycle: mW x ns x 1e-9 = mJ
    return SustainedHeadline(source, p, 20_000.0, e)  # type: ignore[arg-type]


def test_the_spread_comes_from_the_recorded_device_else_its_backend() -> None:
    sim = card_state_of(_plan_with_device({"backend": "sim", "parameters": {"state_sd_pct": 0.3}}))
    assert sim == CardState(0.3, None, sim.source) and "simulator" in sim.source
    assert card_state_of(_plan_with_device({"backend": "nvml"})) == BACKENDS["nvml"].card_state
    assert card_state_of(_plan_with_device({"backend": "amdsmi"})) is None  # not characterized
    assert card_state_of(_plan_with_device({"backend": "sim", "parameters": {}})) is None  # older sim plans
    assert card_state_of(_plan_with_device(None)) is None


def test_the_simulator_records_its_own_spread() -> None:
    assert preset_summary(PRESETS["h200"])["state_sd_pct"] == pytest.approx(100.0 * PRESETS["h200"].state_sd)


def test_the_h200_spread_is_a_measured_one_with_its_degrees_of_freedom() -> None:
    spec = BACKENDS["nvml"].card_state
    assert spec is not None and 0.1 < spec.sd_pct < 1.0 and spec.df is not None and spec.df >= 10
    assert "results/h200-state-reps" in spec.source


def test_the_term_is_t_sd_of_the_power_above_idle_in_quadrature() -> None:
    spec = CardState(0.4, 16.0, "test")
    term = CardStateTerm(spec, idle_mw=100_000.0)
    expect = t_critical(0.95, 16) * 0.004 * 400_000.0
    assert term.half_mw(500_000.0, 0.95) == pytest.approx(expect)
    hl = term.widen(_headline(), cycling=False, level=0.95)
    half = 0.5 * (hl.power.ci_high - hl.power.ci_low)
    assert half == pytest.approx(math.hypot(500.0, expect))
    assert hl.power.value == 500_000.0 and "card state" in hl.power.method
    e_half = 0.5 * (hl.energy.ci_high - hl.energy.ci_low)  # the energy per execution: the same share
    assert e_half / hl.energy.value == pytest.approx(half / hl.power.value)
    exact = CardStateTerm(CardState(0.4, None, "sim"), idle_mw=100_000.0)
    assert exact.half_mw(500_000.0, 0.95) == pytest.approx(1.96 * 0.004 * 400_000.0, rel=1e-3)


def test_no_term_where_the_limiter_cycles_for_a_burst_headline_or_without_a_spread() -> None:
    term = CardStateTerm(CardState(0.4, 16.0, "test"), idle_mw=100_000.0)
    hl = _headline()
    assert term.widen(hl, cycling=True, level=0.95) == hl
    burst = _headline("burst")
    assert term.widen(burst, cycling=False, level=0.95) == burst
    assert CardStateTerm(None, 100_000.0).widen(hl, cycling=False, level=0.95) == hl
    assert CardStateTerm(CardState(0.4, 16.0, "t"), None).widen(hl, cycling=False, level=0.95) == hl
    below_idle = CardStateTerm(CardState(0.4, 16.0, "t"), idle_mw=600_000.0)  # no excess: no term
    assert below_idle.widen(hl, cycling=False, level=0.95) == hl
