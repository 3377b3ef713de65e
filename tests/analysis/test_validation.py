"""Truth comparison (simulator): truth per role over golden runs, signed errors in % of truth."""

from __future__ import annotations

import polars as pl
import pytest

from fingrav.analysis.binning import bin_runs
from fingrav.analysis.differentiate import differentiate as _differentiate
from fingrav.analysis.validation import truth_by_group, validate
from fingrav.config import AnalysisConfig
from fingrav.testing.synthetic import SynthSpec, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200)


def differentiate(*args: object, **kw: object) -> tuple[pl.DataFrame, dict]:
    """`fingrav.analysis.differentiate.differentiate` with the clock-residual limit of the default config."""
    kw.setdefault("max_clock_residual_us", 20.0)
    lois, summary = _differentiate(*args, **kw)  # type: ignore[arg-type]
    return lois, {**summary.model_dump(), "row": summary.result.flat(), "flags": summary.flags, "valid": summary.valid}


def with_cycle_energy(truth: pl.DataFrame) -> pl.DataFrame:
    """A truth frame whose power_mw a test changed, with the cycle energies that go with it."""
    return truth.with_columns(cycle_energy_mj=pl.col("power_mw") * pl.col("cycle_ns") * 1e-9)


def sse_index_power(truth: pl.DataFrame, in_sse_runs_mw: float, in_ssp_runs_mw: float) -> pl.DataFrame:
    """A truth frame (of `generate` with runs=10: SSE runs from run 10 on) whose executions at the SSE's index (3)
    draw `in_sse_runs_mw` in SSE runs and `in_ssp_runs_mw` in SSP runs, with the cycle energies that go with it."""
    is_sse_run = pl.col("run") >= 10
    power = pl.when(is_sse_run).then(in_sse_runs_mw).otherwise(in_ssp_runs_mw)
    truth = truth.with_columns(power_mw=pl.when(pl.col("exec_index") == 3).then(power).otherwise(pl.col("power_mw")))
    return with_cycle_energy(truth)


def test_truth_is_time_weighted():
    """Two cycles of 1 µs at 100 W and 3 µs at 500 W: the truth is 400 W (energy / time), not 300 W."""
    d = generate(SynthSpec(runs=4, sse_runs=0, exec_jitter=0.0, truth_rows="all"))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    tail = pl.col("exec_index").is_between(d["plan"].ssp_index, d["plan"].trail_index - 1)
    first_of_tail = pl.col("exec_index") == d["plan"].ssp_index
    truth = d["truth"].with_columns(
        cycle_ns=pl.when(first_of_tail).then(1_000.0).when(tail).then(3_000.0).otherwise(pl.col("cycle_ns")),
        power_mw=pl.when(first_of_tail).then(100_000.0).when(tail).then(500_000.0).otherwise(pl.col("power_mw")),
    )
    truth = with_cycle_energy(truth)
    n_tail = d["plan"].tail
    expected = (100_000.0 * 1_000 + 500_000.0 * 3_000 * (n_tail - 1)) / (1_000 + 3_000 * (n_tail - 1))
    tb = truth_by_group(truth, binned, d["plan"]).filter((pl.col("channel") == "total") & (pl.col("group") == "ssp"))
    assert tb["power_mw"].item() == pytest.approx(expected)
    assert tb["power_mw"].item() != pytest.approx((100_000.0 + 500_000.0 * (n_tail - 1)) / n_tail)


def test_truth_by_group_uses_golden_runs_and_tail():
    d = generate(SynthSpec(runs=8, sse_runs=0, outlier_runs=(2,), predecessor_count=2, truth_rows="all"))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    ssp = d["plan"].ssp_index
    # the outlier (non-golden) run's truth is absurd; the SSP tail of run 0 differs by execution
    truth = d["truth"].with_columns(
        power_mw=pl.when(pl.col("run") == 2)
        .then(1e12)
        .when((pl.col("run") == 0) & (pl.col("exec_index") == ssp) & (pl.col("segment") == "main"))
        .then(pl.col("power_mw") + 40_000.0 * 4)  # +160 W on 1 of 4 tail executions: run 0 mean +40 W
        .otherwise(pl.col("power_mw"))
    )
    tb = truth_by_group(with_cycle_energy(truth), binned, d["plan"])
    tot = {r["group"]: r["power_mw"] for r in tb.filter(pl.col("channel") == "total").iter_rows(named=True)}
    # pooled over the 7 golden runs' 28 tail cycles (near-equal lengths): +160 W on one of them
    assert tot["ssp"] == pytest.approx(400_000.0 + 40_000.0 / 7, rel=1e-4)
    assert tot["sse"] == pytest.approx(350_000.0)
    assert tot["first"] == pytest.approx(450_000.0)
    assert tot["pred"] == pytest.approx(500_000.0)


def test_validate_signed_errors():
    d = generate(SynthSpec(runs=6))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    truth = d["truth"].with_columns(power_mw=pl.col("power_mw") * 0.8, energy_mj=pl.col("energy_mj") * 1.25)
    truth = with_cycle_energy(truth)
    v = validate(
        truth,
        binned,
        d["plan"],
        power_mw=400_000.0,
        sse_reading_mw=350_000.0,
        energy_per_exec_mj=80.0,
        sse_kernel_mw=350_000.0,
    )
    assert v.truth_power_w == pytest.approx(320.0)
    assert v.power_vs_truth_pct == pytest.approx(25.0)  # (400 - 320) / 320
    assert v.truth_sse_kernel_power_w == pytest.approx(280.0)
    assert v.sse_kernel_power_vs_truth_pct == pytest.approx(25.0)
    assert v.sse_reading_vs_truth_pct is None  # no reading truth given
    assert v.truth_sse_reading_w is None
    e_true = v.truth_energy_per_exec_mj
    assert v.energy_per_exec_vs_truth_pct == pytest.approx((80.0 - e_true) / e_true * 100)
    assert v.truth_interleaved_kernel_power_w is None and v.interleaved_kernel_power_vs_truth_pct is None


def test_differentiate_row_has_truth_columns():
    d = generate(SynthSpec(runs=20, predecessor_count=2))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    truth = with_cycle_energy(d["truth"].with_columns(power_mw=pl.col("power_mw") * 1.1))
    _, s = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], ANALYSIS, truth
    )
    row = s["row"]
    assert row["truth_power_w"] == pytest.approx(440.0)
    assert row["power_vs_truth_pct"] == pytest.approx((400 - 440) / 440 * 100)
    assert row["truth_interleaved_kernel_power_w"] == pytest.approx(495.0)
    # energy truth = true cycle power x cycle time: 10 % high like the power
    assert row["energy_per_exec_vs_truth_pct"] == pytest.approx((400 / 440 - 1) * 100)
    assert s["result"]["truth"]["energy_truth"] == "cycle"
    assert s["channels"]["memory"]["ssp"]["truth_mw"] == pytest.approx(110_000.0)
    # the synthetic sensor resolves the SSE (350 W): its kernel power is measured and validated against 385 W
    assert s["kernel_power"]["sse"]["measurable"] is True
    assert s["kernel_power"]["sse"]["power"]["value"] == pytest.approx(350_000.0, rel=2e-3)
    assert s["row"]["sse_kernel_power_vs_truth_pct"] == pytest.approx((350 - 385) / 385 * 100, abs=0.2)
    assert set(s["validation"]) == {"groups", "reading_groups", "truth_exec_energy_mj"}  # the rest is the result's
    # without truth: no truth columns
    _, s2 = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], ANALYSIS, None
    )
    assert s2["row"]["truth_power_w"] is None and s2["result"]["truth"] is None and s2["validation"] is None


def test_cycle_power_with_launch_gaps_and_trailing_execution():
    """Launch gaps at a lower power: SSP power is the cycle power (gaps included), matching the truth's
    cycle-mean power within sampling error; energy = SSP power x cycle time; trailing not profiled."""
    d = generate(SynthSpec(runs=60, launch_gap_ns=20_000, trailing=1, exec_jitter=0.0))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    lois, s = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], ANALYSIS, d["truth"]
    )
    row = s["row"]
    cycle_w = (400 * 200 + 150 * 20) / 220
    assert row["truth_power_w"] == pytest.approx(cycle_w)
    assert row["power_ci_low_w"] <= cycle_w <= row["power_ci_high_w"]
    assert abs(row["power_vs_truth_pct"]) < 2.0
    assert row["exec_time_us"] == pytest.approx(200.0) and row["ssp_cycle_time_us"] == pytest.approx(220.0)
    assert row["energy_per_exec_mj"] == pytest.approx(row["power_w"] * 220e-6 * 1e3)
    assert row["truth_energy_per_exec_mj"] == pytest.approx(cycle_w * 220e-6 * 1e3)
    assert "trail" in lois["role"].unique().to_list() and "trail" not in s["channels"]["total"]
    assert lois.filter(pl.col("toi_frac") >= 1.0)["power_mw"].unique().sort().to_list() == [37_500.0, 150_000.0]


def test_truth_with_only_the_relevant_rows_and_sse_from_both_kinds():
    """The truth file holds only SSE, first and SSP-tail rows; SSE truth = the SSE executions of golden
    runs of both kinds (pooled, time-weighted), SSP truth = SSP runs only."""
    d = generate(SynthSpec(runs=10, sse_runs=30, predecessor_count=2, outlier_runs=(1,), sse_outlier_runs=(4,)))
    plan = d["plan"]
    rows = d["truth"].filter(pl.col("channel") == "total")
    assert rows["segment"].unique().to_list() == ["main"]
    assert set(rows["exec_index"].unique().to_list()) == {0, 3, 6, 7, 8, 9}  # first, SSE, SSP tail
    assert rows.filter(pl.col("run") >= 10).height == 30 * 2  # SSE runs: first + SSE
    binned, _ = bin_runs(d["executions"], d["runs"], plan, d["margin"])
    # SSE executions: 300 W in SSE runs, 360 W in SSP runs -> mean over the 9 + 29 golden runs
    truth = sse_index_power(d["truth"], 300_000.0, 360_000.0)
    tot = {
        r["group"]: r["power_mw"]
        for r in truth_by_group(truth, binned, plan).filter(pl.col("channel") == "total").iter_rows(named=True)
    }
    assert set(tot) == {"ssp", "sse", "first"}  # no warm-up or predecessor rows: no truth for them
    assert tot["sse"] == pytest.approx((29 * 300_000.0 + 9 * 360_000.0) / 38, rel=1e-4)  # pooled, ~equal cycles
    assert tot["ssp"] == pytest.approx(400_000.0) and tot["first"] == pytest.approx(450_000.0)
    v = validate(truth, binned, plan, 400_000.0, 350_000.0, None, reference_power_mw=404_000.0)
    assert v.reference_vs_truth_pct == pytest.approx(1.0)
    assert validate(truth, binned, plan, 400_000.0, None, None).reference_vs_truth_pct is None


def test_sse_kernel_power_truth_is_the_sse_runs_sse():
    """The SSE kernel power's truth is the SSE of the golden SSE runs (their last execution: its cycle is itself),
    not the "sse" group pooled with the SSP runs' execution at the SSE's index, whose cycle takes in the launch gap
    to the next execution; where no SSE run is golden (or there are none), the pooled group's truth."""
    d = generate(SynthSpec(runs=10, sse_runs=30, predecessor_count=2, outlier_runs=(1,), sse_outlier_runs=(4,)))
    plan = d["plan"]
    binned, _ = bin_runs(d["executions"], d["runs"], plan, d["margin"])
    truth = sse_index_power(d["truth"], 300_000.0, 280_000.0)
    v = validate(truth, binned, plan, 400_000.0, None, None, sse_kernel_mw=303_000.0)
    assert v.truth_sse_kernel_power_w == pytest.approx(300.0)
    assert v.sse_kernel_power_vs_truth_pct == pytest.approx(1.0)
    no_sse_golden = binned.with_columns(golden=pl.col("golden") & (pl.col("phase") != "sse"))
    pooled = validate(truth, no_sse_golden, plan, 400_000.0, None, None, sse_kernel_mw=303_000.0)
    assert pooled.truth_sse_kernel_power_w == pytest.approx(280.0)
