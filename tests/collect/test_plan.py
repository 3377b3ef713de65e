"""Collection planning: the guidance table, the stability probe and the run/execution choice."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.collect.plan import analyze_probe, guidance, make_plan
from fingrav.config import RunPolicy
from fingrav.contracts.plan import Plan
from fingrav.contracts.sensor import PlanSensor

MS = 1_000_000


@pytest.mark.parametrize(
    ("exec_ns", "runs", "spacing", "margin"),
    [
        (30_000, 400, 5_000, 0.05),
        (100_000, 200, 10_000, 0.05),
        (500_000, 200, 10_000, 0.02),
        (3 * MS, 200, 10_000, 0.02),
    ],
)
def test_guidance_table(exec_ns, runs, spacing, margin) -> None:
    assert guidance(exec_ns) == (runs, spacing, margin)


def _probe_trace(t_stable_ms: float, period_ms: float = 1.0, overshoot: bool = False):
    """A synthetic sensor trace: idle 100 W, busy from 0 to 400 ms, first-order rise with time constant
    t_stable/5 to 500 W (optionally overshooting to 600 W and throttling back), idle again after."""
    t = np.arange(-50.0, 600.0, period_ms)
    p = np.full_like(t, 100.0)
    busy = (t >= 0) & (t <= 400)
    tau = t_stable_ms / 5
    rise = 1 - np.exp(-t[busy] / tau)
    level = 400 * rise
    if overshoot:
        level = level + 100 * np.exp(-t[busy] / 60.0) * rise
    p[busy] = 100 + level
    after = t > 400
    p[after] = 100 + 400 * np.exp(-(t[after] - 400) / tau)
    return (t * MS).astype(np.int64), p * 1000.0


def test_probe_finds_settling_time() -> None:
    t, p = _probe_trace(t_stable_ms=50.0)
    res = analyze_probe(t, p, 0, 400 * MS, 1000, tol_pct=1.0)
    assert res.settled
    # within 1 % of 500 W: 400 W step * exp(-t/10ms) < 5 W  ->  t > 43.8 ms
    assert 40 * MS <= res.t_stable_ns <= 50 * MS
    assert res.level_mw == pytest.approx(500_000, rel=0.002)
    assert 40 * MS <= res.t_recover_ns <= 60 * MS


def test_probe_sees_throttling_after_overshoot() -> None:
    t, p = _probe_trace(t_stable_ms=10.0, overshoot=True)
    res = analyze_probe(t, p, 0, 400 * MS, 1000, tol_pct=1.0)
    # 100 W * exp(-t/60 ms) < 5 W  ->  t > 180 ms: the throttle, not the sensor, sets the SSP
    assert res.t_stable_ns >= 170 * MS
    assert res.peak_mw > 570_000


def test_a_probe_window_inside_a_longer_load_times_the_return_to_idle_from_the_loads_end() -> None:
    """The probe read from the reference run's start: stability from the window, recovery after the load's end
    (`load_end_ns`), against the level the idle settles at where a warmer die idles a little higher."""
    t = np.arange(-50.0, 1500.0, 1.0)
    p = np.full_like(t, 100.0)
    busy = (t >= 0) & (t <= 1000)
    p[busy] = 100 + 400 * (1 - np.exp(-t[busy] / 10.0))
    after = t > 1000
    warm = 108.0  # 2 % of the 400 W swing above the idle before: within WARM_IDLE_FRAC
    p[after] = warm + (500 - warm) * np.exp(-(t[after] - 1000) / 10.0)
    tt, pp = (t * MS).astype(np.int64), p * 1000.0
    res = analyze_probe(tt, pp, 0, 400 * MS, 400, tol_pct=1.0, load_end_ns=1000 * MS)
    assert res.settled and 40 * MS <= res.t_stable_ns <= 50 * MS
    assert res.level_mw == pytest.approx(500_000, rel=0.002) and res.busy_ns == 400 * MS
    assert res.idle_level_mw == pytest.approx(100_000)  # the idle before, as recorded
    assert 40 * MS <= res.t_recover_ns <= 60 * MS  # back at the warm idle ~50 ms after the load's end
    # judged against the idle before (a probe run of its own), the warm idle never counts as back
    plain = analyze_probe(tt[tt < 1000 * MS], pp[tt < 1000 * MS], 0, 400 * MS, 400, tol_pct=1.0)
    assert plain.t_stable_ns == res.t_stable_ns
    # an idle far above the one before (25 % of the swing) has not come back: the whole watch
    p[after] = 200 + 300 * np.exp(-(t[after] - 1000) / 10.0)
    res = analyze_probe(tt, p * 1000.0, 0, 400 * MS, 400, tol_pct=1.0, load_end_ns=1000 * MS)
    assert res.t_recover_ns >= 490 * MS


def test_probe_needs_samples() -> None:
    with pytest.raises(ValueError, match="probe_ms"):
        analyze_probe(np.array([0, 1]), np.array([1.0, 2.0]), 0, 10, 10, 1.0)


SENSOR_FAST = PlanSensor(period_ns=1 * MS, delay_ns=300_000, window_ns=1 * MS, lag_ns=0, settle_ns=int(1.3 * MS))
SENSOR_H200 = PlanSensor(
    **{
        "period_ns": 20 * MS,
        "delay_ns": int(2.8 * MS),
        "window_ns": int(4.5 * MS),
        "lag_ns": 12 * MS,
        "settle_ns": 63 * MS,
    }
)


def test_plan_short_kernel_on_fast_sensor() -> None:
    plan = make_plan(40_000, 42_000, SENSOR_FAST, None, RunPolicy())
    assert isinstance(plan, Plan) and plan.sensor == SENSOR_FAST
    assert plan.sse_index == 3
    # SSP after the sensor settled (1.3 ms / 42 us = 31 executions) and strictly after the SSE
    assert plan.ssp_index == 30
    # the plan no longer fixes the margin: binning takes the guidance table's for the measured time
    assert plan.margin is None and plan.margin_for_binning(None) == 0.05
    # 30 SSE LOIs at 4 % chance per run -> 750 SSE runs; SSP runs from the guidance table (the adaptive stop's
    # budget), and as many SSE runs more as SSP runs it is expected to save (their SSE LOIs: 400 - 8)
    assert plan.sse_runs == 750 + 400 - 8 and plan.runs == 400 and plan.ssp_runs_expected == 8
    fixed = make_plan(40_000, 42_000, SENSOR_FAST, None, RunPolicy(ssp_ci_pct=None))
    assert fixed.sse_runs == 750 and fixed.runs == 400 and fixed.ssp_runs_expected is None
    assert plan.sse_executions_per_run == 4
    # trailing: one for the last SSP cycle + ceil(group delay 0.5 ms / 42 us) = 12 for the centroid-aligned SSP
    assert plan.executions_per_run == plan.ssp_index + plan.tail + plan.trailing and plan.trailing == 1 + 12
    assert plan.idle_ns >= SENSOR_FAST.settle_ns


def test_trailing_executions_cover_the_sensors_content_lead() -> None:
    """Readings whose content lies later than the sensor model says (`PlanSensor.content_lead_ns`) must still see
    the run busy: the trailing executions grow by the lead (2.1 ms / 42 us = 50 more), nothing else changes."""
    base = make_plan(40_000, 42_000, SENSOR_FAST, None, RunPolicy())
    led = make_plan(40_000, 42_000, SENSOR_FAST.model_copy(update={"content_lead_ns": 2_100_000}), None, RunPolicy())
    assert led.trailing == base.trailing + 50
    assert (led.ssp_index, led.tail, led.runs) == (base.ssp_index, base.tail, base.runs)
    assert led.executions_per_run == base.executions_per_run + 50


def test_plan_long_kernel_keeps_ssp_after_sse() -> None:
    plan = make_plan(1_500_000, 1_505_000, SENSOR_FAST, None, RunPolicy())
    assert plan.ssp_index == 4 and plan.sse_index == 3
    assert plan.runs == 200 and plan.sse_runs == 200 + 200 - plan.ssp_runs_expected  # + the SSP runs' SSE LOIs
    assert plan.margin is None and plan.margin_for_binning(None) == 0.02
    assert plan.reference_executions == 1994 and plan.reference_max_ms == 30_000.0  # 3 s by default, adaptive


def test_plan_coarse_sensor_caps_runs_and_extends_tail() -> None:
    plan = make_plan(170_000, 172_000, SENSOR_H200, None, RunPolicy(max_runs=300, sse="always", ssp_ci_pct=None))
    assert plan.sse_runs == 300 and plan.runs == 200
    assert any("capped" in n for n in plan.notes)
    # SSP only after ~63 ms of back-to-back executions
    assert plan.ssp_index + 1 >= 63 * MS / 172_000
    # the tail gives ~lois_wanted SSP LOIs over all runs
    assert plan.tail * plan.runs * 170_000 / (20 * MS) >= plan.lois_wanted
    # adaptive SSP stop: a 4-period tail; the SSE runs get the SSP runs it expects to save
    adaptive = make_plan(170_000, 172_000, SENSOR_H200, None, RunPolicy(max_runs=300, sse="always"))
    assert adaptive.tail * 172_000 >= 4 * 20 * MS and adaptive.ssp_runs_expected == 8
    assert adaptive.sse_runs == 300 + (200 - 8) and any(
        "adaptive stop is expected to save" in n for n in adaptive.notes
    )


def test_explicit_policy_overrides() -> None:
    pol = RunPolicy(mode="explicit", runs=50, executions_per_run=12)
    plan = make_plan(100_000, 101_000, SENSOR_FAST, None, pol)
    assert (plan.runs, plan.executions_per_run, plan.mode) == (50, 12, "explicit")
    # an explicit margin is analysis.margin now; it overrides the guidance table when binning
    assert plan.margin is None and plan.margin_for_binning(0.1) == 0.1
    assert plan.ssp_index == 10 and plan.tail == 1 and plan.trailing == 1


def test_reference_run_length() -> None:
    plan = make_plan(100_000, 125_000, SENSOR_FAST, None, RunPolicy(reference_ms=2000))
    assert plan.reference_executions == 16_000 and plan.reference_ms == 2000


def test_probe_smooths_over_execution_cycles() -> None:
    """A 1 ms sensor sees the shape inside 1.5 ms executions: a repeating 684/684/723 W pattern is stable."""
    t = np.arange(0, 400) * MS
    p = np.tile([684.0, 684.0, 723.0], 134)[:400] * 1000
    p[:20] = np.linspace(150_000, 690_000, 20)
    res = analyze_probe(t, p, 0, 399 * MS, 266, tol_pct=1.0, cycle_ns=1_500_000)
    assert res.settled and res.t_stable_ns <= 25 * MS
