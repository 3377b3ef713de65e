"""File-level stages: stages.bin / stages.differentiate read a sweep's raw files (SweepLayout, gpu<k> paths)
and write the contracted outputs; the report's summary_frame builds summary.csv."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fingrav import rawio
from fingrav.analysis.binning import BINNED_SCHEMA
from fingrav.analysis.loi import LOIS_SCHEMA
from fingrav.config import AnalysisConfig
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.result import (
    METRICS_COLUMNS,
    Counts,
    Estimate,
    Flags,
    Headline,
    Labels,
    MethodSSP,
    ScenarioResult,
    Truth,
    summary_columns,
)
from fingrav.contracts.sensor import PlanSensor, SensorModel
from fingrav.layout import SweepLayout
from fingrav.report.table import metrics_frame, summary_frame
from fingrav.stages import bin as bin_stage
from fingrav.stages import differentiate
from fingrav.stages.differentiate import scenario_sensors
from fingrav.testing.synthetic import SynthSpec, generate

ANALYSIS = AnalysisConfig(
    bootstrap_reps=200, ci_level=0.95, fit_degree=4, min_lois=10, delay_correction=True, max_drift_ppm=200.0
)
MAX_CLOCK_RESIDUAL_US = 20.0  # calibration.max_clock_residual_us: a differentiate argument of its own


def write_scenario(tmp: Path, name: str, spec: SynthSpec, with_clock: bool = True) -> tuple[SweepLayout, dict]:
    """A synthetic scenario on GPU 0 of a sweep under `tmp`: raw/gpu0/<name>/, truth/gpu0/<name>.parquet and
    calibration/gpu0.json (its clock deliberately 50 us off)."""
    layout = SweepLayout(tmp)
    d = generate(spec)
    raw = layout.scenario_dir(name, 0)
    prov = {
        "stage": "collect",
        "device": {"backend": "sim", "name": "synthetic"},
        "scenario": {
            "name": name,
            "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"},
            "predecessor": None,
        },
    }
    for kind in ("executions", "runs", "samples", "clock"):
        frame = d[kind] if (kind != "clock" or with_clock) else d[kind].clear()
        meta = {**prov, "gaps": []} if kind == "samples" else prov
        rawio.write_table(raw / f"{kind}.parquet", kind, {c: frame[c].to_numpy() for c in frame.columns}, meta)
    plan = d["plan"].model_copy(update={"provenance": Provenance.model_validate(prov)})
    rawio.write_json(layout.plan(name, 0), plan.to_json())
    rawio.write_manifest(raw, ["executions.parquet", "runs.parquet", "samples.parquet", "clock.parquet", "plan.json"])
    rawio.write_table(layout.truth(name, 0), "truth", {c: d["truth"][c].to_numpy() for c in d["truth"].columns}, prov)
    clock = d["clock_fit"]
    cal = Calibration(
        clock={**clock.model_dump(), "offset_ns": clock.offset_ns + 50_000.0},  # deliberately off
        sensor={"total": SensorModel.model_validate(d["sensor"]["total"].model_dump())},
        channels=["total"],
        steps={"count": 0, "on_ns": None, "off_ns": None},
    )
    rawio.write_json(layout.calibration_json(0), cal)
    return layout, d


def test_run_bin_and_differentiate_write_contracted_files(tmp_path: Path):
    spec = SynthSpec(
        runs=30,
        sse_runs=20,
        outlier_runs=(3,),
        sse_outlier_runs=(4,),
        delay_ns=40_000,
        drift=20e-6,
        offset_ns=-2_000_000,
        idle_ns=10_000_000,
        reference_executions=1000,
        reference_transient_ns=20_000_000,
    )  # reads span > 0.3 s: clocksync fits the drift
    layout, d = write_scenario(tmp_path, "cb-2k", spec)
    binned_path = bin_stage.run(layout, "cb-2k", 0, ANALYSIS.model_copy(update={"margin": 0.05}))
    assert binned_path == tmp_path / "binned" / "gpu0" / "cb-2k.parquet"
    meta = rawio.read_metadata(binned_path)
    assert meta["runs_golden"] == 29 and meta["bins"]["sse"]["runs_golden"] == 19
    b = pl.read_parquet(binned_path)
    assert b.schema == pl.Schema(BINNED_SCHEMA)
    assert list(BINNED_SCHEMA) == ["run", "phase", "bin_exec_time_ns", "ssp_exec_time_ns", "golden", "reason"]
    assert {"margin", "bin_low_ns", "bin_high_ns", "bins", "provenance"} <= set(meta) and meta["margin"] == 0.05
    assert meta["margin_source"] == "analysis.margin"
    assert set(meta["bins"]) == {"ssp", "sse"}

    written = differentiate.run(layout, "cb-2k", 0, ANALYSIS, MAX_CLOCK_RESIDUAL_US, with_truth=True)
    out = tmp_path / "profiles" / "gpu0" / "cb-2k"
    assert written == [out / "lois.parquet", out / "summary.json"]
    lois = pl.read_parquet(out / "lois.parquet")
    assert lois.schema == pl.Schema(LOIS_SCHEMA)
    assert rawio.read_metadata(out / "lois.parquet")["clock_source"] == "scenario"
    on_disk = json.loads((out / "summary.json").read_text())
    summary = on_disk
    typed = ScenarioSummary.model_validate(on_disk)
    assert on_disk["scenario"] == "cb-2k" and typed.row["scenario"] == "cb-2k" and on_disk["format_version"] == 3
    assert set(on_disk) >= {"scenario", "result", "channels", "clock", "plan", "provenance"}
    assert set(on_disk["clock"]) == {"offset_ns", "gpu_ref_ns", "drift_ppm", "residual_ns"}
    assert on_disk["clock"]["drift_ppm"] == pytest.approx(20.0, abs=0.01)
    row = typed.row
    assert row["kernel"] == "gemm 2048x2048x2048 bf16" and row["backend"] == "sim" and row["predecessor"] is None
    assert row["power_w"] == pytest.approx(400.0) and row["sse_reading_w"] == pytest.approx(350.0)
    assert row["power_vs_truth_pct"] == pytest.approx(0.0, abs=1e-9) and row["valid"] is True
    assert (row["sse_runs_total"], row["sse_runs_golden"]) == (20, 19)
    assert row["reference_power_w"] == pytest.approx(400.0) and row["ssp_vs_reference_pct"] == pytest.approx(0.0)
    assert row["reference_vs_truth_pct"] == pytest.approx(0.0, abs=1e-9)
    assert on_disk["reference"]["executions"] == 1000 and on_disk["reference"]["t_stable_source"] == "probe"
    assert set(lois["phase"].unique()) == {"sse", "ssp"}
    assert summary["sensor"]["delay_correction_ns"] == 40_000
    ch = on_disk["channels"]["total"]["ssp"]
    assert set(ch) >= {"power", "lois", "fit_coeffs", "truth_mw"} and not {"mean_mw", "ci_low_mw"} & set(ch)
    assert ch["power"]["unit"] == "mW" and ch["power"]["ci_low"] <= ch["power"]["value"] <= ch["power"]["ci_high"]


def test_bin_margin_unset_is_the_guidance_tables(tmp_path: Path):
    """analysis.margin unset: the bin stage takes METHOD.md's guidance table for the measured kernel time
    (200 us -> 2 %), not a margin fixed at collection time."""
    layout, d = write_scenario(tmp_path, "s", SynthSpec(runs=10))
    meta = rawio.read_metadata(bin_stage.run(layout, "s", 0, AnalysisConfig()))
    assert d["plan"].exec_time_ns == 200_000
    assert meta["margin"] == 0.02 and meta["margin_source"] == "guidance table"


def test_differentiate_falls_back_to_calibration_clock(tmp_path: Path):
    layout, _ = write_scenario(tmp_path, "s", SynthSpec(runs=10), with_clock=False)
    bin_stage.run(layout, "s", 0, ANALYSIS)
    differentiate.run(layout, "s", 0, ANALYSIS, MAX_CLOCK_RESIDUAL_US, with_truth=False)
    s = json.loads(layout.summary_json("s", 0).read_text())
    assert s["provenance"]["clock_source"] == "calibration"
    assert s["clock"]["offset_ns"] == pytest.approx(163_000 + 50_000)  # the calibration's (50 us off)
    row = ScenarioSummary.model_validate(s).row
    assert row["power_w"] is not None and row["truth_power_w"] is None and s["result"]["truth"] is None
    assert row["reference_power_w"] is None and s["reference"] is None


def test_scenario_sensor_merges_calibration_over_plan():
    ms = 1_000_000
    cal = Calibration(
        clock={"offset_ns": 0.0, "gpu_ref_ns": 0},
        sensor={
            "total": SensorModel(channel="total", delay_ns=2.8 * ms),
            "memory": SensorModel(channel="memory", delay_ns=50.0 * ms),
        },
        channels=["total", "memory"],
        steps={},
    )
    plan = generate(SynthSpec(runs=2, sse_runs=2))["plan"].model_copy(
        update={"sensor": PlanSensor(period_ns=20 * ms, delay_ns=1, window_ns=4_500_000, lag_ns=0, settle_ns=0)}
    )
    got = scenario_sensors(cal, plan)
    assert got["total"].delay_ns == 2_800_000 and got["total"].window_ns == 4_500_000
    assert got["total"].period_ns == 20 * ms
    assert got["memory"].delay_ns == 50_000_000


def test_summary_table_column_order_and_types():
    """summary.csv: the narrow columns of the result model, typed; metrics: every number in long form."""
    w = Estimate(value=1.0, ci_low=0.9, ci_high=1.1, unit="W")
    a = ScenarioResult(labels=Labels(scenario="a"), valid=True, headline=Headline(power=w),
                       ssp=MethodSSP(power=w, channels={"memory": w}), counts=Counts(ssp_runs_total=3))  # fmt: skip
    b = ScenarioResult(labels=Labels(scenario="b"), valid=False, truth=Truth(power=Estimate(value=2.1, unit="W")),
                       flags=Flags(invalidating=["too_few_lois"]))  # fmt: skip
    t = summary_frame([a, b])
    assert tuple(t.columns) == summary_columns(truth=True) and len(t.columns) <= 30
    assert tuple(summary_frame([a]).columns) == summary_columns(truth=False) and len(summary_frame([a]).columns) <= 25
    assert t.schema["valid"] == pl.Boolean and t.schema["ssp_valid"] == pl.Boolean
    assert t.schema["kernel"] == pl.String and t.schema["exec_time_us"] == pl.Float64
    assert t.schema["power_source"] == pl.String and t.schema["notes"] == pl.String
    assert t["scenario"].to_list() == ["a", "b"] and t["power_w"].to_list() == [1.0, None]
    assert t["truth_power_w"].to_list() == [None, 2.1] and t["flags"].to_list() == ["", "too_few_lois"]
    m = metrics_frame([a, b], {"a": {"combined_power_w": 2.0, "rank1_valid": True}})
    assert m.columns == list(METRICS_COLUMNS)
    got = {(r["scenario"], r["metric"]): r for r in m.iter_rows(named=True)}
    assert got[("a", "power_w")]["ci_low"] == 0.9 and got[("a", "power_w")]["unit"] == "W"
    assert got[("a", "ssp_memory_power_w")]["value"] == 1.0 and got[("a", "ssp_runs_total")]["value"] == 3.0
    assert got[("b", "truth_power_w")]["value"] == 2.1 and got[("a", "combined_power_w")]["value"] == 2.0
    assert ("a", "rank1_valid") not in got  # not a number
