"""analysis/sources.py: the energy counter vs the samples over the whole collection, and the sensor-source term in
the CIs of the absolute numbers (headline, method SSP), not in comparisons of one source with itself."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.loi import host_executions
from fingrav.analysis.sources import SourceTerm, collection_counter_vs_samples, collection_mean_power_mw
from fingrav.config import AnalysisConfig
from fingrav.contracts.result import Estimate, ci_columns
from fingrav.testing.synthetic import SynthSpec, analyze, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200, ci_level=0.95, min_lois=10)


@pytest.mark.parametrize("seed", range(6))
def test_widen_combines_the_term_in_quadrature_on_each_side(seed: int) -> None:
    rng = np.random.default_rng(seed)
    v, below, above, pct = rng.uniform(1e5, 7e5), rng.uniform(0, 5e3), rng.uniform(0, 5e3), rng.uniform(0.01, 3)
    e = Estimate.of(v, v - below, v + above, "mW", "bootstrap")
    w = SourceTerm(pct).widen(e)
    t = v * pct / 100.0
    assert w.value == e.value and w.unit == "mW" and "sensor-source" in w.method
    assert w.ci_low == pytest.approx(v - math.hypot(below, t)) and w.ci_high == pytest.approx(v + math.hypot(above, t))
    assert SourceTerm(None).widen(e) == e and SourceTerm(0.0).widen(e) == e
    assert SourceTerm(pct).widen(Estimate.of(v, unit="mW")).ci_low is None  # no CI: nothing to widen


@pytest.mark.parametrize("seed", range(4))
def test_the_counter_vs_the_samples_is_measured_over_the_collection(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    scale = float(rng.uniform(0.97, 1.03))
    spec = SynthSpec(runs=40, sse_runs=10, noise_mw=2000.0, seed=seed, reference_executions=20_000, counter_scale=scale)
    d = generate(spec)
    s = analyze(d, ANALYSIS)
    row = s["row"]
    # the synthetic counter reads the true energy x scale, the samples the true power: the disagreement is the scale
    assert row["counter_vs_samples_pct"] == pytest.approx((scale - 1.0) * 100.0, abs=0.05)
    # the term is the disagreement as a power offset (W): its share of the collection's mean power
    hx = host_executions(d["executions"], d["runs"], d["plan"], d["clock_fit"], None)
    mean_w = collection_mean_power_mw(d["runs"], hx, d["samples"], 0) / 1e3
    offset_w = abs(row["counter_vs_samples_pct"]) / 100.0 * mean_w
    for col, power in (("power_w", "power_w"), ("ssp_power_w", "ssp_power_w"), ("energy_per_exec_mj", "power_w")):
        lo, hi = ci_columns(col)
        t = offset_w / row[power] * row[col]  # the offset, in the number's own unit
        assert row[hi] - row[col] >= t * (1 - 1e-3), col
        assert row[col] - row[lo] >= t * (1 - 1e-3), col
    # comparisons of one source with itself keep their CIs: the method SSP vs the reference run is narrower than
    # the term where the term is large
    if abs(scale - 1.0) > 0.01:
        half_cmp = 0.5 * (row["ssp_vs_reference_ci_high_pct"] - row["ssp_vs_reference_ci_low_pct"])
        assert half_cmp < abs(row["counter_vs_samples_pct"])
    # imprecise judges the CIs without the term: a 3 % source disagreement does not make the row imprecise
    assert "imprecise" not in s["flags"]


def test_no_counter_no_term() -> None:
    d = generate(SynthSpec(runs=30, sse_runs=0, seed=3, energy_counter=False, reference_executions=5_000))
    s = analyze(d, ANALYSIS)
    assert s["row"]["counter_vs_samples_pct"] is None
    runs = d["runs"].with_columns(pl.lit(None, dtype=pl.Float64).alias("energy_start_mj"))
    assert collection_counter_vs_samples(runs, pl.DataFrame(), d["samples"], 0).value is None


def test_the_term_is_the_disagreement_beyond_its_own_noise() -> None:
    """A comparison within its own noise (the counter's resolution and update period) adds nothing; beyond it, the
    part beyond: sqrt(d² - half²)."""
    assert SourceTerm.of(Estimate.of(0.3, -0.1, 0.7, "%")).pct == 0.0
    assert SourceTerm.of(Estimate.of(-0.5, -0.8, -0.2, "%")).pct == pytest.approx(0.4)
    assert SourceTerm.of(Estimate.of(-0.5, unit="%")).pct == pytest.approx(0.5)  # no CI: all of it
    assert SourceTerm.of(Estimate(unit="%")).pct is None


def test_the_comparison_has_the_counters_own_noise_as_its_ci() -> None:
    from fingrav.backends import EnergyCounter

    d = generate(SynthSpec(runs=30, sse_runs=0, seed=5, reference_executions=5_000, counter_scale=1.004))
    hx = host_executions(d["executions"], d["runs"], d["plan"], d["clock_fit"], None)
    plain = collection_counter_vs_samples(d["runs"], hx, d["samples"], 0)
    fine = collection_counter_vs_samples(d["runs"], hx, d["samples"], 0, EnergyCounter(1e-6, 1.0, "ideal"))
    coarse = collection_counter_vs_samples(d["runs"], hx, d["samples"], 0, EnergyCounter(1.0, 100e6, "H200-like"))
    assert plain.value == fine.value == coarse.value == pytest.approx(0.4, abs=0.05) and plain.ci_low is None
    half_fine, half_coarse = (0.5 * (e.ci_high - e.ci_low) for e in (fine, coarse))
    assert 0 < half_fine < 1e-3 < half_coarse
    assert SourceTerm.of(fine).pct == pytest.approx(abs(fine.value), rel=1e-3)
    assert SourceTerm.of(coarse).pct < abs(coarse.value)


def test_the_term_is_a_power_offset_not_a_share_of_every_power() -> None:
    """Issue 22: a disagreement of d % over a collection whose mean power is P_coll is an offset of d x P_coll; a
    kernel at P > P_coll gets d x P_coll / P % (the idle between runs no longer inflates it), a power in W the same
    offset, an energy per execution the offset's share of its power."""
    term = SourceTerm.of(Estimate.of(-0.5, -0.8, -0.2, "%"), mean_mw=300e3)  # 0.4 % of 300 W beyond noise: 1.2 W
    assert term.pct == pytest.approx(0.4) and term.mw == pytest.approx(1.2e3)
    p_mw = Estimate.of(600e3, 599e3, 601e3, "mW", "batch means")
    assert term.share_pct(p_mw) == pytest.approx(0.2)
    w = term.widen(p_mw)
    assert w.ci_high - w.value == pytest.approx(math.hypot(1e3, 1.2e3))
    p_w = Estimate.of(600.0, 599.0, 601.0, "W", "bootstrap")  # the same power in W: the same offset
    assert term.widen(p_w).ci_high - 600.0 == pytest.approx(math.hypot(1.0, 1.2))
    e = Estimate.of(60.0, 59.9, 60.1, "mJ", "x cycle")  # 600 W x 100 µs: the offset's share of 600 W, 0.2 %
    assert term.widen(e, p_w).ci_high - 60.0 == pytest.approx(math.hypot(0.1, 0.12))
    # without the collection's mean power the term stays a share of every number (as before)
    assert SourceTerm.of(Estimate.of(-0.5, -0.8, -0.2, "%")).share_pct(p_mw) == pytest.approx(0.4)
