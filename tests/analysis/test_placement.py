"""fingrav.analysis.placement: the spread of the input sets' execution times beyond noise, and its CI term, on
synthetic executions with known placements: recovered, zero without placement, and covering the mean over all
placements at the CI level across random draws (a randomized stress test)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.placement import placement_term


def _execs(
    effects: np.ndarray, runs: int, per_run: int, noise_ns: float, rng: np.random.Generator, run_sd_ns: float = 200.0
) -> pl.DataFrame:
    """`runs` runs of `per_run` executions rotating through len(effects) sets (execution j: set j mod sets), each
    10 us x (1 + its set's effect) + a run offset (sd `run_sd_ns`) + white noise (ns)."""
    sets = effects.size
    run = np.repeat(np.arange(runs), per_run)
    idx = np.tile(np.arange(per_run) + 3, runs)  # the tail starts at an execution index > 0
    offset = rng.normal(0.0, run_sd_ns, runs)[run]  # the run's own state: cancels
    dur = 10_000.0 * (1.0 + effects[idx % sets]) + offset + rng.normal(0.0, noise_ns, run.size)
    return pl.DataFrame({"run": run.astype(np.int32), "exec_index": idx.astype(np.int32), "dur_ns": dur.round()})


def test_one_set_or_nothing_measures_nothing():
    rng = np.random.default_rng(0)
    assert placement_term(_execs(np.zeros(1), 4, 40, 10.0, rng), 1) is None
    assert placement_term(pl.DataFrame(schema={"run": pl.Int32, "exec_index": pl.Int32, "dur_ns": pl.Int64}), 4) is None


def test_known_placements_are_recovered():
    rng = np.random.default_rng(1)
    effects = np.array([0.006, -0.004, 0.001, -0.003])
    t = placement_term(_execs(effects, 20, 400, 30.0, rng), 4)
    assert t is not None and t.sets == 4
    centred = (effects - effects.mean()) * 100.0
    assert np.allclose(t.effects_pct, centred, atol=0.03)  # noise of a set mean: ~0.7 ns of 10 us
    assert t.sd_pct == pytest.approx(float(np.std(effects, ddof=1)) * 100.0, rel=0.05)
    assert t.half_pct == pytest.approx(3.182 * t.sd_pct / 2.0, rel=1e-3)  # t(0.975, 3) / sqrt(4)


def test_noise_alone_is_not_read_as_placement():
    rng = np.random.default_rng(2)
    halves = [placement_term(_execs(np.zeros(4), 10, 200, 50.0, rng), 4).half_pct for _ in range(40)]  # type: ignore[union-attr]
    assert np.median(halves) == 0.0 and max(halves) < 0.1  # noise of a set mean: ~0.01 % of the time


@pytest.mark.parametrize("sets", [2, 4, 8])
def test_the_term_covers_the_mean_over_all_placements(sets):
    """Across random preparations (placements drawn with sd 0.5 %), the mean over the sets +- the term covers the
    population mean (10 us) in ~95 % of draws: not far below (too narrow), not ~100 % (too wide). No run offsets
    here: the bootstrap over runs covers those, the term the placements."""
    rng = np.random.default_rng(100 + sets)
    hits, n = 0, 400
    for _ in range(n):
        effects = rng.normal(0.0, 0.005, sets)
        execs = _execs(effects, 8, 20 * sets, 30.0, rng, run_sd_ns=0.0)
        t = placement_term(execs, sets)
        mean = float(execs["dur_ns"].mean())  # type: ignore[arg-type]
        half = (t.half_pct if t is not None else 0.0) / 100.0 * mean
        hits += abs(mean - 10_000.0) <= half
    assert 0.90 <= hits / n <= 0.99


def test_with_placement_widens_in_quadrature_and_says_so():
    from fingrav.analysis.placement import PlacementTerm
    from fingrav.analysis.profiles import with_placement
    from fingrav.contracts.result import Estimate

    t = Estimate.of(1000.0, 997.0, 1004.0, "ns", "median")
    w = with_placement(t, PlacementTerm(sets=4, effects_pct=(0.4, -0.4, 0.2, -0.2), sd_pct=0.37, half_pct=0.4))
    assert w.value == 1000.0
    assert w.ci_low == pytest.approx(1000.0 - (3.0**2 + 4.0**2) ** 0.5)  # 4 ns = 0.4 % of 1000
    assert w.ci_high == pytest.approx(1000.0 + (4.0**2 + 4.0**2) ** 0.5)
    assert "placement term" in w.method and "4 sets" in w.method
    assert with_placement(Estimate(unit="ns"), PlacementTerm(4, (), 0.0, 0.4)).value is None  # nothing to widen


def test_the_input_sets_come_from_the_raw_provenance():
    from fingrav.analysis.differentiate import input_sets_of
    from fingrav.contracts.provenance import Provenance

    class _Plan:
        def __init__(self, kernels):
            self.provenance = Provenance(kernels=kernels)

    assert input_sets_of(_Plan({"main": {"label": "x", "input_sets": 4}})) == 4
    assert input_sets_of(_Plan({"main": {"label": "x"}})) == 1  # recorded before the sets were
    assert input_sets_of(_Plan(None)) == 1
    assert input_sets_of(_Plan({"main": {"input_sets": "?"}})) == 1


def test_a_simulated_sweep_carries_the_placement_term(tmp_path):
    """Through the real stages on the simulator (h200 preset, placement 1 %): the kernel reports its four input sets
    and the execution time's CI says it carries the placement term."""
    from fingrav.testing.experiments import load_experiment

    fm = load_experiment("fidelity_matrix")
    cfg = {
        "sweep": "placement",
        "seed": 5,
        "device": {"backend": "sim", "sim": {"preset": "h200", "overrides": {"placement_sd_pct": 1.0}}},
        "calibration": {"steps": 12},
        "run_policy": {"mode": "auto", "min_lois": 30, "reference_ms": 0},
        "analysis": {"bootstrap_reps": 200},
        "scenarios": [{"name": "gemv", "kernel": {"kind": "gemv", "m": 8192, "k": 8192, "dtype": "bf16"}}],
    }
    (row,) = fm.run_sweep(cfg, keep=tmp_path)
    assert "error" not in row, row
    lo, hi, t = row["exec_time_ci_low_us"], row["exec_time_ci_high_us"], row["truth_exec_time_us"]
    assert lo < row["exec_time_us"] < hi and (hi - lo) / 2 / row["exec_time_us"] > 0.001  # wider than jitter alone
    (path,) = (tmp_path / "placement" / "profiles").rglob("summary.json")
    result = json.loads(path.read_text())["result"]
    assert "placement term" in result["headline"]["exec_time"]["method"] and t is not None
    assert "placement term" in result["ssp"]["cycle_time"]["method"]  # the cycle time carries its own
