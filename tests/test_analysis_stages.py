"""File-level stages: run_bin / run_differentiate read raw files and write the contracted outputs;
summary_table builds summary.csv."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fingrav import rawio
from fingrav.analysis.binning import BINNED_SCHEMA
from fingrav.analysis.loi import LOIS_SCHEMA
from fingrav.analysis.stages import run_bin, run_differentiate, scenario_sensor
from fingrav.analysis.summarize import ROW_EXTRA, ROW_HEAD, ROW_TAIL, ROW_TRUTH, ROW_TRUTH_EXTRA, summary_table
from fingrav.analysis.synthetic import SynthSpec, generate

ANALYSIS = {
    "bootstrap_reps": 200,
    "ci_level": 0.95,
    "fit_degree": 4,
    "min_lois": 10,
    "delay_correction": True,
    "max_drift_ppm": 200.0,
    "max_clock_residual_us": 20.0,
}


def write_scenario(tmp: Path, name: str, spec: SynthSpec, with_clock: bool = True) -> tuple[Path, Path, dict]:
    d = generate(spec)
    raw = tmp / "raw" / name
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
    plan = {k: v for k, v in d["plan"].items() if k not in ("kernel", "backend")}
    rawio.write_json(raw / "plan.json", {**plan, "provenance": prov})
    truth = tmp / "truth" / f"{name}.parquet"
    rawio.write_table(truth, "truth", {c: d["truth"][c].to_numpy() for c in d["truth"].columns}, prov)
    s = d["sensor"]
    cal = {
        "clock": {**d["clock_fit"], "offset_ns": d["clock_fit"]["offset_ns"] + 50_000.0},  # deliberately off
        "sensor": {
            "total": {
                "period_ms": s["period_ns"] / 1e6,
                "delay_ms": s["delay_ns"] / 1e6,
                "window_ms": 0.001,
                "lag_ms": 0.0,
                "settle_ms": 0.0,
            }
        },
    }
    rawio.write_json(tmp / "calibration.json", cal)
    return raw, truth, d


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
    raw, truth, d = write_scenario(tmp_path, "cb-2k", spec)
    binned_path = tmp_path / "binned" / "cb-2k.parquet"
    meta = run_bin(raw, raw / "plan.json", binned_path, None, {"stage": "bin"})
    assert meta["runs_golden"] == 29 and meta["bins"]["sse"]["runs_golden"] == 19
    b = pl.read_parquet(binned_path)
    assert b.schema == pl.Schema(BINNED_SCHEMA)
    assert list(BINNED_SCHEMA) == ["run", "phase", "bin_exec_time_ns", "ssp_exec_time_ns", "golden", "reason"]
    bmeta = rawio.read_metadata(binned_path)
    assert {"margin", "bin_low_ns", "bin_high_ns", "bins", "provenance"} <= set(bmeta) and bmeta["margin"] == 0.05
    assert set(bmeta["bins"]) == {"ssp", "sse"}

    out = tmp_path / "profiles" / "cb-2k"
    summary = run_differentiate(
        raw, binned_path, tmp_path / "calibration.json", truth, ANALYSIS, out, {"stage": "differentiate"}
    )
    lois = pl.read_parquet(out / "lois.parquet")
    assert lois.schema == pl.Schema(LOIS_SCHEMA)
    assert rawio.read_metadata(out / "lois.parquet")["clock_source"] == "scenario"
    on_disk = json.loads((out / "summary.json").read_text())
    assert on_disk["scenario"] == "cb-2k" and on_disk["row"]["scenario"] == "cb-2k"
    assert set(on_disk) >= {"scenario", "row", "channels", "clock", "flags", "plan", "provenance"}
    assert set(on_disk["clock"]) == {"offset_ns", "gpu_ref_ns", "drift_ppm", "residual_ns"}
    assert on_disk["clock"]["drift_ppm"] == pytest.approx(20.0, abs=0.01)
    row = summary["row"]
    assert row["kernel"] == "gemm 2048x2048x2048 bf16" and row["backend"] == "sim" and row["predecessor"] is None
    assert row["ssp_power_w"] == pytest.approx(400.0) and row["sse_power_w"] == pytest.approx(350.0)
    assert row["ssp_error_pct"] == pytest.approx(0.0, abs=1e-9) and row["valid"] is True
    assert (row["sse_runs_total"], row["sse_runs_golden"]) == (20, 19)
    assert row["reference_power_w"] == pytest.approx(400.0) and row["ssp_vs_reference_pct"] == pytest.approx(0.0)
    assert row["reference_error_pct"] == pytest.approx(0.0, abs=1e-9)
    assert on_disk["reference"]["executions"] == 1000 and on_disk["reference"]["t_stable_source"] == "probe"
    assert set(lois["phase"].unique()) == {"sse", "ssp"}
    assert summary["sensor"]["delay_correction_ns"] == 40_000
    ch = on_disk["channels"]["total"]["ssp"]
    assert set(ch) >= {"mean_mw", "ci_low_mw", "ci_high_mw", "lois", "fit_coeffs", "truth_mw"}


def test_differentiate_falls_back_to_calibration_clock(tmp_path: Path):
    raw, _, _ = write_scenario(tmp_path, "s", SynthSpec(runs=10), with_clock=False)
    run_bin(raw, raw / "plan.json", tmp_path / "b.parquet")
    s = run_differentiate(raw, tmp_path / "b.parquet", tmp_path / "calibration.json", None, ANALYSIS, tmp_path / "out")
    assert s["provenance"]["clock_source"] == "calibration"
    assert s["clock"]["offset_ns"] == pytest.approx(163_000 + 50_000)  # the calibration's (50 us off)
    assert s["row"]["ssp_power_w"] is not None and "truth_ssp_power_w" not in s["row"]
    assert s["row"]["reference_power_w"] is None and s["reference"] is None


def test_scenario_sensor_merges_calibration_over_plan():
    got = scenario_sensor(
        {"sensor": {"total": {"delay_ms": 2.8}, "memory": {"delay_ms": 50.0}}},
        {"sensor": {"period_ns": 20_000_000, "delay_ns": 1, "window_ns": 4_500_000}},
    )
    assert got["total"]["delay_ns"] == 2_800_000 and got["total"]["window_ns"] == 4_500_000
    assert got["memory"]["delay_ns"] == 50_000_000


def test_summary_table_column_order_and_types():
    rows = [
        {"scenario": "a", "ssp_power_w": 1.0, "ssp_memory_power_w": 0.5, "runs_total": 3, "valid": True, "flags": ""},
        {
            "row": {
                "scenario": "b",
                "ssp_xcd_power_w": 2.0,
                "truth_ssp_power_w": 2.1,
                "valid": False,
                "flags": "too_few_lois",
            }
        },
    ]
    t = summary_table(rows)
    assert t.columns == [
        *ROW_HEAD,
        "ssp_memory_power_w",
        "ssp_xcd_power_w",
        *ROW_TAIL,
        *ROW_TRUTH,
        *ROW_EXTRA,
        *ROW_TRUTH_EXTRA,
    ]
    assert ROW_EXTRA[3:] == (
        "sse_runs_total",
        "sse_runs_golden",
        "reference_power_w",
        "reference_power_ci_low_w",
        "reference_power_ci_high_w",
        "ssp_vs_reference_pct",
        "reference_energy_power_w",
        "reference_counter_vs_samples_pct",
        "sse_vs_ssp_error_ci_low_pct",
        "sse_vs_ssp_error_ci_high_pct",
        "interleaved_vs_ssp_ci_low_pct",
        "interleaved_vs_ssp_ci_high_pct",
    )
    assert t.schema["sse_runs_total"] == pl.Int64
    assert t.schema["runs_total"] == pl.Int64 and t.schema["valid"] == pl.Boolean
    assert t.schema["kernel"] == pl.String and t.schema["exec_time_us"] == pl.Float64
    assert t["scenario"].to_list() == ["a", "b"] and t["ssp_xcd_power_w"].to_list() == [None, 2.0]
    assert summary_table(rows[:1]).columns == [*ROW_HEAD, "ssp_memory_power_w", *ROW_TAIL, *ROW_EXTRA]
