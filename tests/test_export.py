"""Exports (fingrav/export.py, fingrav/contracts/export.py): the committed JSON result schema equals the models,
results.json and every summary.json validate against it, and the aiconfigurator-style CSV has its columns."""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from fingrav import rawio
from fingrav.cli import RESULT_SCHEMA_PATH, main, result_schema_text
from fingrav.contracts.export import AICONFIGURATOR_COLUMNS, RESULT_SCHEMA_ID
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.provenance import Provenance
from fingrav.export import aiconfigurator_row, power_limit_w
from fingrav.layout import SweepLayout


def _stage_tests():
    """tests/stages/test_stages.py (its synthetic scenario writer), imported as pytest does: module `test_stages`."""
    mod = sys.modules.get("test_stages")
    if mod is None:
        spec = importlib.util.spec_from_file_location("test_stages", ROOT / "tests" / "stages" / "test_stages.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["test_stages"] = mod
        spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> SweepLayout:
    """Two differentiated synthetic scenarios (2K GEMMs on a synthetic simulated device) in one results folder."""
    from fingrav.stages import bin as bin_stage
    from fingrav.stages import differentiate
    from fingrav.testing.synthetic import SynthSpec

    st = _stage_tests()
    root = tmp_path_factory.mktemp("export") / "results" / "synthetic"
    for name in ("cb-2k", "cb-2k-again"):
        layout, _ = st.write_scenario(root, name, SynthSpec(runs=20, sse_runs=6))
        bin_stage.run(layout, name, 0, st.ANALYSIS)
        differentiate.run(layout, name, 0, st.ANALYSIS, st.MAX_CLOCK_RESIDUAL_US, with_truth=True)
    return SweepLayout(root)


def test_result_schema_file_in_sync_with_models() -> None:
    assert RESULT_SCHEMA_PATH.read_text() == result_schema_text(), "stale: run `fingrav result-schema`"
    schema = json.loads(result_schema_text())
    assert schema["$id"] == RESULT_SCHEMA_ID and "ScenarioSummary" in schema["$defs"]
    assert main(["result-schema", "--check"]) == 0


def test_export_writes_results_json_that_validates_and_the_csv(sweep: SweepLayout) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    assert main(["export", "--results", str(sweep.root)]) == 0
    schema = json.loads(RESULT_SCHEMA_PATH.read_text())
    doc = json.loads(sweep.results_json.read_text())
    jsonschema.validate(doc, schema)
    assert doc["sweep"] == "synthetic" and [s["scenario"] for s in doc["scenarios"]] == ["cb-2k", "cb-2k-again"]
    one = {"$schema": schema["$schema"], "$defs": schema["$defs"], "$ref": "#/$defs/ScenarioSummary"}  # a summary.json
    for name in ("cb-2k", "cb-2k-again"):
        jsonschema.validate(json.loads(sweep.summary_json(name, 0).read_text()), one)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({k: v for k, v in doc.items() if k != "scenarios"}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**doc["scenarios"][0], "flags": "not a list"}, one)

    with open(sweep.aiconfigurator_csv) as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == list(AICONFIGURATOR_COLUMNS) and len(rows) == 2
    summary = rawio.read_model(sweep.summary_json("cb-2k", 0), ScenarioSummary)
    r, srow = rows[0], summary.row
    assert (r["framework"], r["op_name"], r["shape"], r["dtype"]) == (
        "fingrav-sim",
        "gemm",
        "m=2048 n=2048 k=2048",
        "bf16",
    )
    assert float(r["latency"]) == pytest.approx(srow["exec_time_us"] / 1000.0)
    assert float(r["latency_ci_low"]) <= float(r["latency"]) <= float(r["latency_ci_high"])
    assert float(r["power"]) == pytest.approx(srow["power_w"]) and float(r["energy"]) == srow["energy_per_exec_mj"]
    assert r["power_limit"] == "" and r["valid"] == str(summary.valid).lower()  # the synthetic device has no limit


def test_power_limit_from_each_backend() -> None:
    assert power_limit_w({"enforced_power_limit_mw": 700_000, "power_limit_mw": 650_000}) == 700.0
    assert power_limit_w({"enforced_power_limit_mw": None, "power_limit_mw": 650_000}) == 650.0
    assert power_limit_w({"parameters": {"power": {"cap_w": 750.0}}}) == 750.0  # the simulator's cap
    assert power_limit_w({"backend": "amdsmi"}) is None


def test_attention_row_names_the_sdpa_backend(sweep: SweepLayout) -> None:
    s = rawio.read_model(sweep.summary_json("cb-2k", 0), ScenarioSummary)
    kernel = {"kind": "attention", "batch": 1, "heads": 32, "q_len": 1, "kv_len": 4096, "head_dim": 128}
    raw = {
        "device": {"backend": "nvml", "name": "NVIDIA H200", "torch_version": "2.13.0", "enforced_power_limit_mw": 7e5},
        "scenario": {"name": "decode", "kernel": {**kernel, "causal": False, "dtype": "bf16"}},
        "kernels": {"main": {"label": "attention ...", "sdpa_backend": "flash"}},
    }
    prov = s.provenance.model_copy(update={"raw": Provenance.model_validate(raw)})
    row = aiconfigurator_row(s.model_copy(update={"provenance": prov}))
    assert (row["framework"], row["version"], row["device"]) == ("torch", "2.13.0", "NVIDIA H200")
    assert row["op_name"] == "attention" and row["kernel_source"] == "torch.sdpa:flash"
    assert row["shape"] == "batch=1 heads=32 q_len=1 kv_len=4096 head_dim=128 causal=0" and row["power_limit"] == 700.0


def test_export_errors_are_one_message(tmp_path: Path, caplog) -> None:
    assert main(["export", "--results", str(tmp_path)]) == 2
    assert "no profiles/gpu0/<scenario>/summary.json" in caplog.text
    assert main(["export", "--results", str(tmp_path), "--out", str(tmp_path / "x.csv")]) == 2
    assert "--out names one file" in caplog.text


def test_an_unwritable_export_path_is_one_message_naming_it(sweep: SweepLayout, caplog) -> None:
    for out in ("/proc/fingrav-export.json", str(ROOT / "README.md" / "x.json")):
        caplog.clear()
        assert main(["export", "--results", str(sweep.root), "--format", "json", "--out", out]) == 2
        assert out in caplog.text or str(Path(out).parent) in caplog.text, caplog.text
        assert "Traceback" not in caplog.text
