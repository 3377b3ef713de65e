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
