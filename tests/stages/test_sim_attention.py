"""config/sim-attention.yaml end to end through Snakemake: attention (prefill, decode, decode after prefills) and the
example Triton kernel as a callable on the simulated H200, their throughput columns, provenance and exports."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, snakemake

from fingrav.cli import main
from fingrav.replay_check import replayed_columns

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("sim-attention")
    (work / "examples").symlink_to(ROOT / "examples")  # the callable's module, found from the working directory
    snakemake(work, "--configfile", str(ROOT / "config" / "sim-attention.yaml"), "--cores", "2")
    return work / "results" / "sim-attention"


def _rows(res: Path) -> dict[str, dict[str, Any]]:
    """Every number of the sweep (metrics.csv) and its text cells, by scenario."""
    return replayed_columns(res)


def test_every_kind_runs_and_matches_truth(sweep: Path) -> None:
    rows = _rows(sweep)
    assert set(rows) == {"attn-prefill-4k", "attn-decode-4k", "attn-decode-after-prefill", "triton-vector-add"}
    for name, r in rows.items():
        assert abs(float(r["power_vs_truth_pct"])) < 2.0, (name, r["power_vs_truth_pct"])
        assert r["kernel"]
    assert rows["triton-vector-add"]["kernel"] == "callable make_vector_add"
    assert rows["attn-prefill-4k"]["kernel"] == "attention b1 h32 q4096 kv4096 d128 causal bf16"


def test_throughput_columns_follow_from_work_cycle_and_power(sweep: Path) -> None:
    rows = _rows(sweep)
    for name, r in rows.items():
        s = json.loads((sweep / "profiles" / "gpu0" / name / "summary.json").read_text())
        # the cycle users see: the uninstrumented sustained one where there is a reference run, else the SSP's
        sustained = r["power_source"] == "sustained"
        cycle_s = float(r["sustained_cycle_time_us"]) * 1e-6 if sustained else s["cycle_time_mean_ns"] * 1e-9
        gb_s = float(r["work_bytes"]) / cycle_s / 1e9
        assert float(r["bandwidth_gb_s"]) == pytest.approx(gb_s, rel=1e-9), name
        assert float(r["bandwidth_ci_low_gb_s"]) <= float(r["bandwidth_gb_s"]) <= float(r["bandwidth_ci_high_gb_s"])
        tflop_s = float(r["throughput_tflop_s"])
        assert tflop_s == pytest.approx(float(r["work_flop"]) / cycle_s / 1e12, rel=1e-9), name
        assert float(r["energy_efficiency_tflop_s_per_w"]) == pytest.approx(tflop_s / float(r["power_w"]), rel=1e-9)
        assert float(r["energy_per_byte_pj"]) == pytest.approx(
            float(r["energy_per_exec_mj"]) * 1e9 / float(r["work_bytes"]), rel=1e-9
        )
    pre, dec = rows["attn-prefill-4k"], rows["attn-decode-4k"]
    # compute-bound vs memory-bound: ~95x on the simulated H200 (the decode cycle moves with the scenario's own draws)
    assert float(pre["throughput_tflop_s"]) > 50 * float(dec["throughput_tflop_s"])
    assert float(dec["bandwidth_gb_s"]) > 2000  # the decode step streams the KV cache at HBM speed
    assert (
        float(rows["triton-vector-add"]["work_flop"]) == 67108864
        and float(rows["triton-vector-add"]["work_bytes"]) == 805306368
    )


def test_plans_record_the_kernels(sweep: Path) -> None:
    plan = json.loads((sweep / "raw" / "gpu0" / "attn-decode-after-prefill" / "plan.json").read_text())
    kernels = plan["provenance"]["kernels"]
    assert kernels["main"]["label"] == "attention b16 h32 q1 kv4096 d128 bf16"
    assert kernels["predecessor"]["label"] == "attention b1 h32 q4096 kv4096 d128 causal bf16"


def test_exports_of_the_sweep(sweep: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    assert main(["export", "--results", str(sweep)]) == 0
    jsonschema.validate(
        json.loads((sweep / "export" / "results.json").read_text()),
        json.loads((ROOT / "docs" / "result.schema.json").read_text()),
    )
    with open(sweep / "export" / "aiconfigurator.csv") as fh:
        rows = {r["scenario"]: r for r in csv.DictReader(fh)}
    assert (
        rows["attn-prefill-4k"]["op_name"] == "attention" and rows["attn-prefill-4k"]["kernel_source"] == "sim-roofline"
    )
    assert rows["triton-vector-add"]["shape"] == "n=67108864" and rows["triton-vector-add"]["dtype"] == "fp32"
    assert rows["attn-decode-after-prefill"]["predecessor"] == "attention b1 h32 q4096 kv4096 d128 causal bf16 x8"
    assert {r["power_limit"] for r in rows.values()} == {"700.0"}  # the simulated H200's cap
