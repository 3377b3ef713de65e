"""fingrav.sample_grid: the sensor's sampling grid recovered from late stamps (ns)."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.sample_grid import MAX_LATE_FRAC, ON_TIME_FRAC, fit_grid


def _stream(
    rng: np.random.Generator,
    n: int,
    period_ns: float,
    every: int,
    late_ns: float,
    far_share: float = 0.0,
    drift_ppm: float = 0.0,
    gap_at: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(stamps, grid times): a regular grid (the sensor's clock off by drift_ppm, 0.02 ms of on-time scatter),
    every `every`-th sample stamped late by ~late_ns (lognormal spread), `far_share` of them by 0.3-0.45 periods;
    samples after `gap_at` shifted by a 5 s gap of whole periods."""
    p = period_ns * (1 + drift_ppm * 1e-6)
    grid = 1e12 + np.arange(n) * p
    if gap_at is not None:
        grid[gap_at:] += round(5e9 / p) * p
    stamps = grid + rng.normal(0, 0.02e6, n)
    if every:
        late = (np.arange(n) % every) == rng.integers(every)
        stamps[late] = grid[late] + late_ns * rng.lognormal(0, 0.4, late.sum())
    far = rng.random(n) < far_share
    stamps[far] = grid[far] + rng.uniform(0.3, 0.45, far.sum()) * period_ns
    for i in range(1, n):  # stamps stay increasing
        stamps[i] = max(stamps[i], stamps[i - 1] + 1.0)
    return stamps, grid


def test_h200_like_late_stamps_are_put_back_on_the_grid() -> None:
    rng = np.random.default_rng(1)
    stamps, grid = _stream(rng, 3000, 19.99e6, 5, 2.8e6, far_share=0.01, drift_ppm=-500.0, gap_at=1500)
    g = fit_grid(stamps)
    assert g.grid is not None and g.grid.corrects
    assert g.grid.late_share == pytest.approx(0.2, abs=0.03)
    assert g.grid.late_p50_ns == pytest.approx(2.8e6, rel=0.15)
    assert g.placed.mean() >= 0.97
    err = np.abs(g.t_ns - grid)[g.placed]
    assert np.quantile(err, 0.99) < 0.1e6  # every placed sample within the on-time scatter of its true time
    assert g.grid.period_ns == pytest.approx(19.99e6 * (1 - 500e-6), rel=1e-5)


def test_order_of_input_is_kept() -> None:
    rng = np.random.default_rng(2)
    stamps, grid = _stream(rng, 400, 20e6, 5, 3e6)
    perm = rng.permutation(stamps.size)
    g = fit_grid(stamps[perm])
    assert np.abs(g.t_ns - grid[perm])[g.placed].max() < 0.1e6


def test_really_jittered_sampling_has_no_grid() -> None:
    rng = np.random.default_rng(3)
    stamps = 1e12 + np.cumsum(rng.normal(1e6, 0.25e6, 2000).clip(0.3e6))
    g = fit_grid(stamps)
    assert g.grid is None
    assert np.array_equal(g.t_ns, stamps) and g.placed.all()


def test_exact_grid_without_late_stamps_changes_nothing() -> None:
    stamps = 1e12 + np.arange(500) * 1e6
    g = fit_grid(stamps)
    assert g.grid is not None and not g.grid.corrects
    assert np.array_equal(g.t_ns, stamps) and g.placed.all()


def test_too_few_samples_are_left_alone() -> None:
    stamps = np.array([1.0, 2.0, 3.5])
    g = fit_grid(stamps)
    assert g.grid is None and np.array_equal(g.t_ns, stamps)


@pytest.mark.parametrize("seed", range(12))
def test_random_grids_place_samples_right_or_not_at_all(seed: int) -> None:
    """Randomized: period 0.5-100 ms, late stamps every 3-10 samples by up to 0.4 periods, far-late ones, a clock
    drift and a long gap: a sample is either placed within the on-time scatter of its true grid time or left
    unplaced (no sample is put in a wrong slot), and most are placed."""
    rng = np.random.default_rng(100 + seed)
    period = float(rng.uniform(0.5e6, 100e6))
    every = int(rng.integers(3, 11))
    late = float(rng.uniform(0.05, 0.3)) * period
    stamps, grid = _stream(
        rng,
        int(rng.integers(300, 3000)),
        period,
        every,
        late,
        far_share=float(rng.uniform(0, 0.02)),
        drift_ppm=float(rng.uniform(-300, 300)),
        gap_at=int(rng.integers(50, 250)),
    )
    g = fit_grid(stamps)
    assert g.grid is not None
    scatter = max(0.1e6, 2 * ON_TIME_FRAC * period)
    wrong = g.placed & (np.abs(g.t_ns - grid) > scatter)
    assert wrong.sum() <= max(2, 0.005 * stamps.size)
    assert g.placed.mean() >= 0.9
    assert ((stamps - g.t_ns)[g.placed] <= MAX_LATE_FRAC * g.grid.period_ns).all()
