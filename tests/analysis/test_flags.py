"""Flags fire on constructed violations, and `valid` follows the invalidating ones."""

from __future__ import annotations

import math

import numpy as np
import polars as pl

from fingrav.analysis.flags import FlagInputs, compute_flags, detect_gaps, gaps_in_spans
from fingrav.config import AnalysisConfig
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.flags import INVALIDATING
from fingrav.contracts.plan import Probe
from fingrav.contracts.result import split_flags
from fingrav.contracts.sensor import SensorModel
from fingrav.testing.synthetic import SynthSpec, analyze, generate

ANALYSIS = {"bootstrap_reps": 200, "ci_level": 0.95, "fit_degree": 4, "min_lois": 10, "max_drift_ppm": 200.0}


def probe(settled: bool) -> Probe:
    return Probe(
        busy_ns=1_000_000_000,
        executions=1000,
        idle_level_mw=100_000.0,
        level_mw=400_000.0,
        peak_mw=410_000.0,
        tol_mw=4_000.0,
        t_stable_ns=50_000_000,
        t_recover_ns=50_000_000,
        settled=settled,
        samples=1000,
    )


def clock(drift: float = 0.0, residual_ns: float = 100.0) -> ClockMap:
    return ClockMap(offset_ns=0.0, gpu_ref_ns=0, drift=drift, residual_ns=residual_ns)


def base_inputs(**kw: object) -> FlagInputs:
    args = dict(
        ssp_lois=100,
        sse_lois=100,
        exec_time_ns=200_000.0,
        sensor=SensorModel(window_ns=1000, lag_ns=0),
        clock=clock(),
        probe=probe(True),
        runs_total=100,
        runs_golden=90,
        gaps_in_golden_runs=0,
        min_lois=10,
        max_drift_ppm=200.0,
        max_clock_residual_us=20.0,
    )
    args.update(kw)
    return FlagInputs(**args)  # type: ignore[arg-type]


def test_no_flags_when_clean():
    assert compute_flags(base_inputs()) == ([], True)


def test_each_flag_fires():
    cases = {
        "too_few_lois": (dict(ssp_lois=9), False),
        "too_few_lois_sse": (dict(sse_lois=3), True),
        "kernel_shorter_than_window": (dict(sensor=SensorModel(window_ns=4_500_000, lag_ns=12_000_000)), True),
        "below_method_minimum": (dict(exec_time_ns=20_000.0), True),
        "sample_gaps": (dict(gaps_in_golden_runs=2), False),
        "clock_drift": (dict(clock=clock(drift=-250e-6)), True),
        "clock_residual": (dict(clock=clock(residual_ns=25_000.0)), False),
        "unsettled": (dict(probe=probe(False)), False),
        "low_golden_fraction": (dict(runs_golden=49), True),
        "burst_only": (dict(headline_source="burst"), True),
        "burst_too_few_lois": (dict(ssp_lois=9, headline_source="sustained"), True),
        "burst_unsettled": (dict(probe=probe(False), headline_source="sustained"), True),
        "reference_drifting": (dict(reference_drifting=True), True),
    }
    for flag, (kw, valid) in cases.items():
        flags, ok = compute_flags(base_inputs(**kw))
        assert flag in flags, flag
        assert ok is valid, flag
    # kernel_shorter_than_window uses window + lag
    assert (
        "kernel_shorter_than_window"
        not in compute_flags(base_inputs(sensor=SensorModel(window_ns=150_000, lag_ns=0)))[0]
    )
    assert (
        "kernel_shorter_than_window"
        in compute_flags(base_inputs(sensor=SensorModel(window_ns=150_000, lag_ns=60_000)))[0]
    )
    assert compute_flags(base_inputs(clock=clock(residual_ns=math.nan)))[1] is True  # unknown residual


def test_gap_detection_and_overlap():
    t = np.concatenate([np.arange(0, 1000, 10), np.arange(1100, 2000, 10)])
    smp = pl.DataFrame({"t_ns": t, "channel": "total", "power_mw": 1.0})
    gaps = detect_gaps(smp)
    assert gaps.tolist() == [[990, 1100]]
    spans = pl.DataFrame({"start_ns": [100, 1050, 3000], "end_ns": [200, 1060, 3100]})
    assert gaps_in_spans(gaps, spans) == 1
    assert gaps_in_spans(np.array([[200, 1050], [3100, 4000]]), spans) == 0


def _differentiate(d: dict, **kw: object) -> dict:
    return analyze(d, AnalysisConfig(**{**ANALYSIS, **kw.pop("analysis", {})}), **kw)  # type: ignore[arg-type]


def test_flags_from_differentiate():
    d = generate(SynthSpec(runs=12, exec_time_ns=20_000, sample_period_ns=100_000, drift=300e-6))
    # 7 of 12 runs lose their SSP execution -> incomplete -> low golden fraction
    d["executions"] = d["executions"].filter(~((pl.col("run") < 7) & (pl.col("exec_index") == d["plan"].ssp_index)))
    d["plan"] = d["plan"].model_copy(update={"probe": d["plan"].probe.model_copy(update={"settled": False})})
    d["sensor"] = {"total": d["sensor"]["total"].model_copy(update={"window_ns": 5_000_000})}
    s = _differentiate(d)
    assert s["flags"] == [
        "too_few_lois",
        "too_few_lois_sse",
        "kernel_shorter_than_window",
        "below_method_minimum",
        "clock_drift",
        "unsettled",
        "low_golden_fraction",
        "burst_only",  # synthetic data without a reference run: the headline is the burst SSP
        # the 5 ms window given to a 0.1 ms sensor's data: the joint estimator of the SSP tail (executions from the
        # SSP index on) disagrees with the SSP itself
        "ssp_inconsistent",
    ]
    row = s["row"]
    # the invalidating flags in `flags`, the informational ones in `notes` (the registry's split)
    assert row["valid"] is False and row["flags"] == "too_few_lois;unsettled"
    assert set(split_flags(row["flags"])) | set(split_flags(row["notes"])) == set(s["flags"])
    assert not set(split_flags(row["notes"])) & INVALIDATING


def test_sample_gaps_known_and_detected():
    d = generate(SynthSpec(runs=10))
    hx_run = d["runs"].filter(pl.col("run") == 4)["host_start_ns"].item()
    s = _differentiate(d, gaps=[[hx_run - 10_000, hx_run + 300_000]])
    assert "sample_gaps" in s["flags"] and s["valid"] is False and s["gaps"]["known_in_golden_runs"] == 1
    # drop 0.5 ms of samples inside run 6 -> a detected gap
    t6 = d["runs"].filter(pl.col("run") == 6)["host_start_ns"].item()
    d["samples"] = d["samples"].filter(~pl.col("t_ns").is_between(t6 + 100_000, t6 + 600_000))
    s = _differentiate(d)
    assert s["flags"] == ["sample_gaps", "burst_only"] and s["gaps"]["detected_in_golden_runs"] == 1


def test_clock_residual_limit():
    """The clock_residual limit is differentiate's max_clock_residual_us (calibration.max_clock_residual_us)."""
    d = generate(SynthSpec(runs=10))
    d["clock_fit"] = d["clock_fit"].model_copy(update={"residual_ns": 30_000.0})
    assert "clock_residual" in _differentiate(d, max_clock_residual_us=20.0)["flags"]
    assert "clock_residual" not in _differentiate(d, max_clock_residual_us=50.0)["flags"]


def test_sample_phase_flag_uniform_vs_locked() -> None:
    """A sampling grid independent of the runs passes; one locked to the run starts fires the flag."""
    import numpy as np
    import polars as pl

    from fingrav.analysis.flags import KS_CRITICAL, sample_phase_ks

    period = 20_000_000
    rng = np.random.default_rng(0)
    t = np.cumsum(rng.normal(period, 1_000_000, 5000)).astype(np.int64)
    samples = pl.DataFrame({"t_ns": t, "channel": ["total"] * t.size, "power_mw": np.ones(t.size)})
    starts = np.sort(rng.uniform(t[0], t[-100], 400)).astype(np.int64)
    runs = pl.DataFrame({"run": np.arange(400), "phase": ["sse"] * 400, "host_start_ns": starts})
    d, n = sample_phase_ks(samples, runs, period)
    assert n > 350 and d < KS_CRITICAL / np.sqrt(n)
    # runs that start 1 ms after a sample (phase locked): the first sample follows ~19 ms later, always
    locked = pl.DataFrame({"run": np.arange(400), "phase": ["ssp"] * 400, "host_start_ns": t[100:500] + 1_000_000})
    d2, n2 = sample_phase_ks(samples, locked, period)
    assert d2 > KS_CRITICAL / np.sqrt(n2)


def test_imprecise_invalidates_a_row_whose_ci_is_too_wide():
    d = generate(SynthSpec(runs=12, sse_runs=4, noise_mw=60_000.0, seed=5))
    strict = analyze(d, AnalysisConfig(bootstrap_reps=200, max_ci_pct=0.1))
    assert "imprecise" in strict["flags"] and strict["valid"] is False
    loose = analyze(d, AnalysisConfig(bootstrap_reps=200, max_ci_pct=50.0))
    assert "imprecise" not in loose["flags"]
    r = strict["row"]
    assert 0.5 * (r["power_ci_high_w"] - r["power_ci_low_w"]) / r["power_w"] * 100 > 0.1
