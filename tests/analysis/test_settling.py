"""The SSP tail's trend test and the bias it adds to the CI."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.profiles import ClusterBootstrap
from fingrav.analysis.settling import TREND_Z, tail_trend
from fingrav.testing.plans import make_plan


def _lois(slope_mw_per_exec: float, tail: int, runs: int = 60, noise_mw: float = 2_000.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    plan = make_plan(ssp_index=5, tail=tail, trailing=1, runs=runs)
    rows = []
    for r in range(runs):
        for i in range(plan.ssp_index - 1, plan.trail_index):
            for _ in range(4):  # 4 samples per execution
                role = "ssp" if i >= plan.ssp_index else "warmup"
                p = 400_000.0 + slope_mw_per_exec * (i - plan.ssp_index) + rng.normal(0, noise_mw)
                rows.append((r, "ssp", True, role, "main", i, "total", p))
    lois = pl.DataFrame(
        rows, schema=["run", "phase", "golden", "role", "segment", "exec_index", "channel", "power_mw"], orient="row"
    )
    boot = ClusterBootstrap(runs, 400, 0.95, seed=1)
    return lois, plan, boot, np.arange(runs)


@pytest.mark.parametrize("tail", [1, 4])
def test_a_trending_tail_is_significant_and_bounds_its_bias(tail: int) -> None:
    lois, plan, boot, runs = _lois(slope_mw_per_exec=3_000.0, tail=tail)
    tr = tail_trend(lois, "total", runs, plan, boot, cycle_ns=100_000.0, group_delay_ns=500_000.0)
    assert tr.tested and tr.significant and abs(tr.trend_z) > TREND_Z
    assert tr.slope_mw_per_ms == pytest.approx(30_000.0, rel=0.2)  # 3 W per 0.1 ms execution
    assert tr.bias_bound_mw == pytest.approx(15_000.0, rel=0.2)  # 30 W/ms x 0.5 ms group delay


@pytest.mark.parametrize("tail", [1, 4])
def test_a_flat_tail_is_not_significant(tail: int) -> None:
    hits = 0
    for seed in range(20):
        lois, plan, boot, runs = _lois(slope_mw_per_exec=0.0, tail=tail, seed=seed)
        tr = tail_trend(lois, "total", runs, plan, boot, cycle_ns=100_000.0, group_delay_ns=500_000.0)
        assert tr.tested
        hits += tr.significant
        assert tr.bias_bound_mw < 2_000.0  # a noise-sized slope: a small bound
    assert hits <= 1  # a 0.1 % test


def test_quantization_bias_is_large_without_noise_and_vanishes_with_it() -> None:
    from fingrav.analysis.settling import quantization_bias_mw
    from fingrav.contracts.sensor import SensorModel

    assert quantization_bias_mw(SensorModel(quantization_mw=10_000.0, noise_mw=0.0)) == pytest.approx(5_000.0)
    assert quantization_bias_mw(SensorModel(quantization_mw=10_000.0, noise_mw=10_000.0)) < 1e-5
    assert quantization_bias_mw(SensorModel(quantization_mw=0.0, noise_mw=0.0)) == 0.0
    # the bound holds for a constant signal rounded to the step (worst case without noise: q / 2)
    rng = np.random.default_rng(0)
    for sigma in (0.05, 0.2, 0.5):
        x = 0.37 + rng.normal(0, sigma, 200_000)  # in units of q
        bias = abs(np.round(x).mean() - 0.37)
        assert bias <= quantization_bias_mw(SensorModel(quantization_mw=1.0, noise_mw=sigma)) + 0.005


def _rounded_moments(phase: float, sigma: float) -> tuple[float, float]:
    """Mean and variance of round(phase + N(0, sigma²)) (units of the step), exactly: the sum over the grid."""
    from statistics import NormalDist

    k = np.arange(-60, 61, dtype=np.float64)
    cdf = np.vectorize(NormalDist().cdf)
    p = cdf((k + 0.5 - phase) / sigma) - cdf((k - 0.5 - phase) / sigma)
    mean = float(p @ k)
    return mean, float(p @ (k - mean) ** 2)


def test_rounding_adds_at_most_a_quarter_step_squared_to_a_gaussian_levels_variance() -> None:
    """The premise of `noise_floor_mw`: for every phase of the level and every noise, var(rounded) <= σ² + q²/4,
    approached by a level half-way between two steps under little noise."""
    worst = 0.0
    for sigma in (0.005, 0.02, 0.05, 0.1, 0.2, 0.25, 0.3, 0.4, 0.5, 0.7, 1.0, 2.0):
        for phase in np.linspace(0.0, 1.0, 41):
            _, var = _rounded_moments(float(phase), sigma)
            assert var - sigma**2 <= 0.25 + 1e-12, (sigma, phase)
            worst = max(worst, var - sigma**2)
    assert worst == pytest.approx(0.25, abs=1e-4)


def test_noise_floor_is_the_least_noise_the_calibration_allows() -> None:
    from fingrav.analysis.settling import noise_floor_mw
    from fingrav.contracts.sensor import SensorModel

    assert noise_floor_mw(SensorModel(noise_mw=3_000.0)) == 3_000.0  # no step: the calibrated noise as it is
    assert noise_floor_mw(SensorModel(noise_mw=None, quantization_mw=1_000.0)) == 0.0
    assert noise_floor_mw(SensorModel(noise_mw=1_630.0, quantization_mw=4_520.0)) == 0.0  # below q / 2
    assert noise_floor_mw(SensorModel(noise_mw=5_000.0, quantization_mw=6_000.0)) == pytest.approx(4_000.0)
    # calibrations of rounded levels at any phases: the floor never exceeds the noise they were drawn with
    rng = np.random.default_rng(3)
    for sigma in (0.0, 0.05, 0.16, 0.3, 0.6, 1.5):
        for _ in range(20):
            levels = rng.uniform(0.0, 1.0, 2) + np.array([27.0, 72.0])  # idle and load, in steps
            x = levels[:, None] + rng.normal(0.0, sigma, (2, 4_000))
            s = float(np.sqrt(np.mean(np.var(np.round(x), axis=1))))  # pooled within-level sd, as sensorfit
            floor = noise_floor_mw(SensorModel(noise_mw=s * 1_000.0, quantization_mw=1_000.0)) / 1_000.0
            assert floor <= sigma + 0.02, (sigma, levels, s, floor)


def test_reading_quantization_term_covers_a_bias_the_calibrated_noise_hides() -> None:
    """A fidelity-6-like sensor (step 4.52 W, noise 0.73 W): its calibration reads two levels whose samples split
    between two steps, so its noise_mw (~1.6 W) hides the noise and the SSP's term is ~0.1 W; a reading of a
    level 0.16 step above a step is 0.57 W low. The reading term (at the floor, 0: q / 2) covers it, at every
    phase of the read level."""
    from fingrav.analysis.settling import quantization_bias_mw, reading_quantization_bias_mw
    from fingrav.contracts.sensor import SensorModel

    q, sigma = 4_520.3, 730.1
    cal = [_rounded_moments(p, sigma / q)[1] for p in (0.77, 0.58)]  # the simulated H200's idle and load phases
    noise = float(np.sqrt(np.mean(cal))) * q
    assert 1_300.0 < noise < 1_900.0
    sensor = SensorModel(noise_mw=noise, quantization_mw=q)
    bias = max(abs(_rounded_moments(p, sigma / q)[0] - p) * q for p in np.linspace(0.0, 1.0, 101))
    assert bias > 800.0  # the first harmonic: (q / π) exp(-2 π² σ² / q²) ~ 0.86 W
    assert quantization_bias_mw(sensor) < 0.3 * bias  # what the SSP's term (σ = noise_mw) would allow
    assert reading_quantization_bias_mw(sensor) == pytest.approx(q / 2.0)
    assert reading_quantization_bias_mw(sensor) >= bias


def test_reading_quantization_term_vanishes_with_noise_or_without_a_step() -> None:
    from fingrav.analysis.settling import (
        quantization_bias_mw,
        reading_quantization_bias_mw,
        rounding_bias_bound_mw,
    )
    from fingrav.contracts.sensor import SensorModel

    assert reading_quantization_bias_mw(SensorModel(noise_mw=4_770.0)) == 0.0  # no step
    assert reading_quantization_bias_mw(SensorModel(noise_mw=22_691.0, quantization_mw=8_654.6)) < 1e-3
    assert reading_quantization_bias_mw(SensorModel(noise_mw=9_000.0, quantization_mw=8_500.0)) < 1e-3
    # just above q / 2 it falls fast; the SSP's term keeps σ = noise_mw
    assert reading_quantization_bias_mw(SensorModel(noise_mw=5_500.0, quantization_mw=8_000.0)) < 0.01 * 8_000.0
    s = SensorModel(noise_mw=1_000.0, quantization_mw=3_000.0)
    assert quantization_bias_mw(s) == rounding_bias_bound_mw(3_000.0, 1_000.0)
    assert rounding_bias_bound_mw(0.0, 0.0) == 0.0
    assert rounding_bias_bound_mw(4_000.0, 0.0) == pytest.approx(2_000.0)
