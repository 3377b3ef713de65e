"""The adaptive SSP stop (`fingrav.analysis.ssp_stop`): never before min_lois LOIs and MIN_RUNS runs, always at the CI
target, always at the run budget; its CI is the cluster bootstrap's over runs."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.analysis.profiles import ClusterBootstrap, small_sample_factor
from fingrav.analysis.ssp_stop import MIN_RUNS, SSP_STOP_REASONS, ssp_ci_pct, ssp_stop_decision


def _runs(rng: np.random.Generator, k: int, per_run: float, run_sd: float, sample_sd: float):
    """k runs of Poisson(per_run) LOIs around 700 W, a per-run offset (run_sd) and per-sample noise (sample_sd), mW."""
    n = rng.poisson(per_run, k)
    offs = rng.normal(0.0, run_sd, k)
    sums = np.array([np.sum(700_000.0 + o + rng.normal(0.0, sample_sd, c)) for o, c in zip(offs, n, strict=True)])
    return sums, n


@pytest.mark.parametrize("seed", range(40))
def test_the_stop_never_comes_before_min_lois_and_min_runs_and_always_at_the_target(seed: int) -> None:
    rng = np.random.default_rng(seed)
    min_lois = int(rng.integers(1, 200))
    target = float(rng.uniform(0.05, 2.0))
    max_runs = int(rng.integers(MIN_RUNS, 400))
    sums, n = _runs(
        rng, max_runs, float(rng.uniform(0.2, 6.0)), float(rng.uniform(0, 5000)), float(rng.uniform(0, 9e4))
    )
    stopped_at = None
    for k in range(1, max_runs + 1):
        d = ssp_stop_decision(sums[:k], n[:k], min_lois, target, max_runs)
        assert d.reason in SSP_STOP_REASONS and d.runs == k and d.lois == int(n[:k].sum())
        met = k >= MIN_RUNS and d.lois >= min_lois and d.ci_pct is not None and d.ci_pct <= target
        if not d.extend:
            assert met or k == max_runs  # never before its targets, only at the budget
            assert d.reason == ("ci_reached" if met else "max_runs")
            stopped_at = k
            break
        assert not met  # and always once they are met
        assert d.reason in {"too_few_runs", "too_few_lois", "ci_too_wide"}
    assert stopped_at is not None  # the budget ends it at the latest


def test_the_reasons_in_order() -> None:
    sums, n = np.full(MIN_RUNS - 1, 2_800_000.0), np.full(MIN_RUNS - 1, 4)
    assert ssp_stop_decision(sums, n, 10, 1.0, 100).reason == "too_few_runs"
    sums, n = np.full(MIN_RUNS, 700_000.0), np.ones(MIN_RUNS, np.int64)
    assert ssp_stop_decision(sums, n, MIN_RUNS + 1, 1.0, 100).reason == "too_few_lois"
    assert ssp_stop_decision(sums, n, MIN_RUNS, 1.0, 100).reason == "ci_reached"  # no scatter: a CI of 0
    assert ssp_stop_decision(sums, n, MIN_RUNS + 1, 1.0, MIN_RUNS).reason == "max_runs"
    spread = sums * np.where(np.arange(MIN_RUNS) % 2 == 0, 0.9, 1.1)
    d = ssp_stop_decision(spread, n, MIN_RUNS, 1.0, 100)
    assert d.reason == "ci_too_wide" and d.extend and d.ci_pct is not None and d.ci_pct > 1.0


def test_without_lois_there_is_no_mean_and_no_stop() -> None:
    d = ssp_stop_decision(np.zeros(20), np.zeros(20, np.int64), 1, 1.0, 100)
    assert d.extend and d.mean_mw is None and d.ci_pct is None
    assert ssp_ci_pct(np.array([700.0]), np.array([1])) == (700.0, None)


def test_the_ci_is_the_cluster_bootstraps_over_runs() -> None:
    """The closed form against the analysis's own interval: the percentile interval of the cluster bootstrap's ratio
    (pooled mean) widened by small_sample_factor, on 40 runs (within 10 %: the bootstrap's own noise)."""
    rng = np.random.default_rng(3)
    sums, n = _runs(rng, 40, 3.0, 3000.0, 20000.0)
    mean, ci = ssp_ci_pct(sums, n)
    boot = ClusterBootstrap(n.size, 4000, 0.95, seed=1)
    lo, hi = boot.ci(boot.ratio(sums, n.astype(float)))
    assert lo is not None and hi is not None and mean is not None and ci is not None
    half = 0.5 * (hi - lo) * small_sample_factor(n.size, 0.95) / mean * 100.0
    assert ci == pytest.approx(half, rel=0.1)
