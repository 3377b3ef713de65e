"""The reference run: settled power with a batch-means CI, the energy-counter cross-check, nulls
without a reference run, reference_unsettled."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.binning import bin_runs
from fingrav.analysis.differentiate import differentiate
from fingrav.analysis.energy import trapezoid_energy_mj
from fingrav.analysis.reference import counter_power, energy_counter_of, reference_stats
from fingrav.analysis.sustained import batch_means_ci
from fingrav.analysis.tdist import t_critical, t_two_sided_prob
from fingrav.backends import EnergyCounter
from fingrav.config import AnalysisConfig
from fingrav.contracts.plan import Plan, Probe
from fingrav.contracts.provenance import DeviceInfo
from fingrav.contracts.result import BY_COLUMN, ci_columns
from fingrav.contracts.sensor import PlanSensor
from fingrav.testing.synthetic import SynthSpec, analyze, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200, ci_level=0.95, min_lois=10)
REF_VALUES = (
    "reference_power_w",
    "ssp_vs_reference_pct",
    "reference_counter_power_w",
    "reference_counter_vs_samples_pct",
)
REF_COLUMNS = [c for v in REF_VALUES for c in (v, *(ci_columns(v) if BY_COLUMN[v].kind == "estimate" else ()))]


def run(spec: SynthSpec, truth: bool = True) -> tuple[dict, dict]:
    d = generate(spec)
    return analyze(d, ANALYSIS, truth=truth), d


def test_t_critical_known_values():
    assert t_critical(0.95, 9) == pytest.approx(2.262157, abs=1e-5)
    assert t_critical(0.95, 1) == pytest.approx(12.706205, abs=1e-4)
    assert t_critical(0.95, 2) == pytest.approx(4.302653, abs=1e-5)
    assert t_critical(0.90, 30) == pytest.approx(1.697261, abs=1e-5)
    assert t_critical(0.99, 4) == pytest.approx(4.604095, abs=1e-5)
    assert t_two_sided_prob(0.0, 5) == 0.0 and t_two_sided_prob(1e6, 5) == pytest.approx(1.0)


def _ar1(rng: np.random.Generator, n: int, sd: float, a: float) -> np.ndarray:
    z = rng.standard_normal(n) * sd * np.sqrt(1 - a * a)
    x = np.empty(n)
    acc = rng.standard_normal() * sd
    for i in range(n):
        acc = a * acc + z[i]
        x[i] = acc
    return x


def test_batch_means_ci_covers_known_level_of_autocorrelated_samples():
    """AR(1) samples (a = 0.98, like a sensor averaging over ~50 samples) around 690 W: the batch-means
    t-interval covers the level at about the nominal rate; an iid interval would be far too narrow."""
    rng = np.random.default_rng(11)
    level, trials, covered, ratio = 690_000.0, 200, 0, []
    for _ in range(trials):
        x = level + _ar1(rng, 4000, 5_000.0, 0.98)
        mean, lo, hi = batch_means_ci(x, 0.95)
        covered += lo <= level <= hi
        naive = 1.96 * x.std(ddof=1) / np.sqrt(x.size)
        ratio.append((hi - lo) / 2 / naive)
    assert 0.88 <= covered / trials <= 0.99
    assert np.median(ratio) > 3  # the autocorrelation widens the interval
    assert batch_means_ci(np.array([]))[0] is None
    assert batch_means_ci(np.arange(5.0)) == (2.0, None, None)
    m, lo, hi = batch_means_ci(np.full(50, 7.0))
    assert (m, lo, hi) == (7.0, 7.0, 7.0)


def test_trapezoid_energy():
    t = np.arange(0, 11) * 1_000_000  # 1 ms samples
    p = np.full(11, 500_000.0)  # 500 W
    assert trapezoid_energy_mj(t, p, 500_000, 9_500_000) == pytest.approx(500.0 * 9e-3 * 1e3)  # W x s -> mJ
    ramp = np.linspace(0.0, 1000.0, 11)
    assert trapezoid_energy_mj(t, ramp, 0, 10_000_000) == pytest.approx(500.0 * 10e-3 * 1e-3 * 1e3)
    assert trapezoid_energy_mj(t, p, -1, 5) is None  # the span starts before the first sample


def test_reference_power_exact_on_ideal_sensor():
    """Back-to-back executions at 400 W after a 600 W transient of 30 ms: the settled power is 400 W
    exactly; executions.parquet has only the reference run's first and last execution."""
    spec = SynthSpec(runs=10, sse_runs=5, reference_executions=1000, reference_transient_ns=30_000_000, delay_ns=30_000)
    s, d = run(spec)
    ref_ex = d["executions"].filter(pl.col("run") == 15)
    assert ref_ex["exec_index"].to_list() == [0, 999]
    ref = s["reference"]
    assert ref["executions"] == 1000 and ref["t_stable_ns"] == 30_000_000 and ref["t_stable_source"] == "probe"
    assert ref["busy_ns"] == pytest.approx(1000 * spec.exec_time_ns, abs=10)
    assert ref["settled_samples"] == pytest.approx((200e6 - 30e6) / 20_000, rel=0.01)
    row = s["row"]
    assert row["reference_power_w"] == pytest.approx(400.0)
    assert row["reference_power_ci_low_w"] == pytest.approx(400.0)
    assert row["reference_power_ci_high_w"] == pytest.approx(400.0)
    assert row["ssp_vs_reference_pct"] == pytest.approx(0.0, abs=1e-9)
    assert row["reference_vs_truth_pct"] == pytest.approx(0.0, abs=1e-9)
    # the counter spans the whole run, transient included: (30 ms at 600 W + 170 ms at 400 W) / 200 ms
    assert row["reference_counter_power_w"] == pytest.approx((30 * 600 + 170 * 400) / 200, rel=1e-3)
    assert abs(row["reference_counter_vs_samples_pct"]) < 0.05
    assert "reference_unsettled" not in s["flags"]


def test_counter_cross_check_sees_a_biased_counter():
    s, _ = run(
        SynthSpec(runs=5, sse_runs=0, reference_executions=500, reference_transient_ns=10_000_000, counter_scale=1.03)
    )
    assert s["row"]["reference_counter_vs_samples_pct"] == pytest.approx(3.0, abs=0.05)
    assert s["reference"]["energy_counter_mj"] == pytest.approx(s["reference"]["samples_energy_mj"] * 1.03, rel=1e-3)


def test_reference_with_launch_gaps_and_noise_is_the_cycle_power():
    spec = SynthSpec(
        runs=30,
        sse_runs=5,
        reference_executions=2000,
        reference_transient_ns=20_000_000,
        launch_gap_ns=20_000,
        trailing=1,
        noise_mw=4_000.0,
        noise_ar=0.9,
        seed=5,
    )
    s, _ = run(spec)
    cycle_w = (400 * 200 + 150 * 20) / 220
    row = s["row"]
    assert row["reference_power_ci_low_w"] <= cycle_w <= row["reference_power_ci_high_w"]
    assert abs(row["reference_vs_truth_pct"]) < 0.5
    assert row["reference_power_ci_high_w"] - row["reference_power_ci_low_w"] > 0


def test_no_reference_run_gives_nulls():
    s, _ = run(SynthSpec(runs=5, sse_runs=3))
    assert s["reference"] is None
    assert all(s["row"][c] is None for c in REF_COLUMNS) and len(REF_COLUMNS) == 12
    assert s["row"]["reference_vs_truth_pct"] is None
    assert "reference_unsettled" not in s["flags"]


def test_missing_energy_counter_keeps_the_settled_power():
    s, _ = run(SynthSpec(runs=5, sse_runs=0, reference_executions=300, energy_counter=False), truth=False)
    row = s["row"]
    assert row["reference_power_w"] == pytest.approx(400.0)
    assert row["reference_counter_power_w"] is None and row["reference_counter_vs_samples_pct"] is None
    # NaN counters (the collector writes NaN for None) read as missing too
    d = generate(SynthSpec(runs=3, sse_runs=0, reference_executions=300))
    runs = d["runs"].with_columns(energy_start_mj=pl.lit(float("nan")))
    ref = reference_stats(d["executions"], runs, d["samples"], d["plan"], d["clock_fit"])
    assert ref is not None and ref.energy_power_mw is None and ref.power_mw == pytest.approx(400_000.0)


def test_reference_unsettled_when_settling_outlasts_the_run():
    """The probe's t_stable (50 ms) is longer than the 20 ms reference run: no settled samples."""
    d = generate(SynthSpec(runs=5, sse_runs=0, reference_executions=100))
    d["plan"] = d["plan"].model_copy(update={"probe": d["plan"].probe.model_copy(update={"t_stable_ns": 50_000_000})})
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    _, s = differentiate(
        d["executions"],
        d["runs"],
        d["samples"],
        d["plan"],
        binned,
        d["clock_fit"],
        d["sensor"],
        ANALYSIS,
        max_clock_residual_us=20.0,
    )
    assert "reference_unsettled" in s.flags and s.valid is True
    row = s.result.flat()
    assert (
        s.reference is not None
        and s.reference.settled_samples == 0
        and not s.result.sustained.reference_power.has_value
    )
    assert row["reference_power_ci_low_w"] is None
    assert row["reference_counter_power_w"] == pytest.approx(400.0, rel=1e-3)  # the counter still works


def test_settle_time_falls_back_to_the_sensor():
    plan = generate(SynthSpec(runs=2, sse_runs=0))["plan"].model_copy(
        update={"sensor": PlanSensor(period_ns=20_000, delay_ns=0, window_ns=1_000, lag_ns=0, settle_ns=9)}
    )
    probe = Probe(
        busy_ns=1,
        executions=1,
        idle_level_mw=0.0,
        level_mw=0.0,
        peak_mw=0.0,
        tol_mw=0.0,
        t_stable_ns=5,
        t_recover_ns=0,
        settled=True,
        samples=1,
    )
    assert plan.model_copy(update={"probe": probe}).settle_time_ns() == (5, "probe")
    assert plan.model_copy(update={"probe": None}).settle_time_ns() == (9, "sensor_settle")
    # plan.json with an empty probe record (no probe ran): the sensor's settle time
    empty = Plan.model_validate({**plan.model_dump(), "probe": {}})
    assert empty.probe is None and empty.settle_time_ns() == (9, "sensor_settle")


def test_block_spread_sees_power_limit_cycling() -> None:
    """~715 W with a 200 ms dip to ~615 W every second (an H200 GEMM near its 700 W cap) vs flat power."""
    import numpy as np

    from fingrav.analysis.sustained import block_spread_pct

    t = np.arange(0, 2_000_000_000, 20_000_000)
    cycling = np.where((t % 1_000_000_000) >= 800_000_000, 615_000.0, 715_000.0)
    assert block_spread_pct(t, cycling) > 10
    assert block_spread_pct(t, np.full(t.size, 560_000.0)) < 0.01
    assert block_spread_pct(t[:5], cycling[:5]) is None


def test_flags_for_limiter_and_reference_mismatch() -> None:
    from fingrav.analysis.flags import FlagInputs, compute_flags
    from fingrav.contracts.clock import ClockMap
    from fingrav.contracts.sensor import SensorModel

    base = dict(
        ssp_lois=50,
        sse_lois=50,
        exec_time_ns=1e6,
        sensor=SensorModel(window_ns=1e5, lag_ns=0),
        probe=None,
        clock=ClockMap(offset_ns=0.0, gpu_ref_ns=0, drift=0.0, residual_ns=100.0),
        runs_total=10,
        runs_golden=10,
        gaps_in_golden_runs=0,
        min_lois=10,
        max_drift_ppm=200,
        max_clock_residual_us=20,
    )
    flags, valid = compute_flags(
        FlagInputs(
            **base,
            reference_block_spread_pct=14.0,
            ssp_vs_reference_pct=4.2,
            ssp_ci_mw=(712e3, 720e3),
            reference_ci_mw=(680e3, 700e3),
        )
    )
    assert "power_limit_cycling" in flags and "ssp_reference_mismatch" in flags and valid
    flags, _ = compute_flags(
        FlagInputs(
            **base,
            reference_block_spread_pct=1.0,
            ssp_vs_reference_pct=2.5,
            ssp_ci_mw=(700e3, 720e3),
            reference_ci_mw=(690e3, 705e3),
        )
    )
    assert "power_limit_cycling" not in flags and "ssp_reference_mismatch" not in flags


# ------------------------------------------------------------------------------------------ the counter's CI
def _counter_reads(power_mw: float, lead_ns: int, span_ns: int, res_mj: float, update_ns: int, phase_ns: int):
    """Two readings of a counter that counts power_mw from t = 0, changes every update_ns (phase phase_ns) in steps
    of res_mj: the first lead_ns before a span of span_ns, the second at its end."""

    def read(t_ns: int) -> float:
        tick = (t_ns - phase_ns) // update_ns * update_ns + phase_ns
        return float(np.floor(power_mw * tick * 1e-9 / res_mj) * res_mj)

    t0 = 10 * update_ns
    return read(t0 + lead_ns + span_ns) - read(t0)


@pytest.mark.parametrize("update_ms", [1, 100])
def test_counter_power_bounds_cover_the_true_power(update_ms: int) -> None:
    """A quantized counter that changes every update period and is read before a lead: the value is the plain
    counter / span, and the bounds contain the true power for every phase of the counter's updates."""
    counter = EnergyCounter(1.0, update_ms * 1e6, "test")
    span, lead, p = 2_000_000_000, 7_000_000, 650_000.0
    for phase in range(0, update_ms * 1_000_000, update_ms * 1_000_000 // 7):
        mj = _counter_reads(p, lead, span, 1.0, update_ms * 1_000_000, phase)
        est = counter_power(mj, span, 700_000.0, lead, counter, stamp_ns=20.0)
        assert est.value == pytest.approx(mj / span * 1e9, rel=1e-12)
        assert est.ci_low <= p <= est.ci_high, (phase, est)
    assert est.half_width_pct < (0.3 if update_ms == 1 else 6.0)  # 1 ms: the lead (7 ms) dominates


def test_counter_power_without_a_described_counter_has_no_ci() -> None:
    est = counter_power(1_300_000.0, 2_000_000_000, 700_000.0, 5e6, None)
    assert est.value == pytest.approx(650_000.0) and not est.has_ci
    assert counter_power(None, 2_000_000_000, 700_000.0, 5e6, None).value is None


def _plan_with_device(device: dict) -> Plan:
    plan = generate(SynthSpec())["plan"]
    return plan.model_copy(update={"provenance": plan.provenance.model_copy(update={"device": DeviceInfo(**device)})})


def test_energy_counter_of_reads_the_recorded_device() -> None:
    nvml = energy_counter_of(_plan_with_device({"backend": "nvml"}))
    assert (nvml.resolution_mj, nvml.update_ns) == (1.0, 100e6)
    sim = energy_counter_of(
        _plan_with_device(
            {"backend": "sim", "parameters": {"energy_counter": {"period_ms": 100.0, "resolution_mj": 1}}}
        )
    )
    assert (sim.resolution_mj, sim.update_ns) == (1.0, 100e6)
    amd = energy_counter_of(_plan_with_device({"backend": "amdsmi", "power": {"counter_resolution_uj": 15.3}}))
    assert amd.resolution_mj == pytest.approx(0.0153) and amd.update_ns == 1e6
    assert energy_counter_of(_plan_with_device({"backend": "gpu-from-the-future"})) is None


def test_counter_vs_samples_carries_both_cis() -> None:
    """The reference run's counter power and counter vs samples have CIs; the cross-check's CI contains 0 on a
    synthetic run whose counter agrees with the samples."""
    spec = SynthSpec(runs=5, sse_runs=0, reference_executions=500, reference_transient_ns=10_000_000, noise_mw=2000.0)
    d = generate(spec)
    device = {"backend": "sim", "parameters": {"energy_counter": {"period_ms": 1.0, "resolution_mj": 0.015}}}
    prov = d["plan"].provenance.model_copy(update={"device": DeviceInfo(**device)})
    d["plan"] = d["plan"].model_copy(update={"provenance": prov})
    row = analyze(d, ANALYSIS)["row"]
    lo, hi = (row[c] for c in ci_columns("reference_counter_power_w"))
    assert lo < row["reference_counter_power_w"] < hi
    lo, hi = (row[c] for c in ci_columns("reference_counter_vs_samples_pct"))
    assert lo < 0.0 < hi
    no_device = analyze(generate(spec), ANALYSIS)["row"]  # an unknown backend: the counter's value, no CI
    assert no_device["reference_counter_power_w"] == pytest.approx(row["reference_counter_power_w"], rel=1e-12)
    assert no_device[ci_columns("reference_counter_power_w")[0]] is None
