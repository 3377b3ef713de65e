"""`fingrav.stages.params`: each stage's parameters, as its rule writes them, validate into the stage's model; a bad
params file stops the job with one message naming the field, before the stage runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav.config import load_config
from fingrav.errors import DataError
from fingrav.stages import params as P
from fingrav.stages.job import run_stage

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def rule_params() -> dict[str, dict]:
    """The parameters rules/common.smk writes for the default sweep (the same keys and dumps)."""
    cfg = load_config(ROOT / "config" / "config.yaml")
    analysis = cfg.analysis.model_dump(mode="json")
    device = cfg.device.model_dump(mode="json", exclude={"gpus", "fleet"})
    name = cfg.scenarios[0].name
    return {
        "calibrate": {
            "root": "results/s",
            "device": device,
            "calibration": cfg.calibration.model_dump(mode="json"),
            "seed": cfg.seed,
        },
        "collect": {
            "root": "results/s",
            "device": device,
            "scenario": cfg.scenario(name).model_dump(mode="json", exclude={"run_policy"}),
            "policy": cfg.policy_for(name).model_dump(mode="json"),
            "seed": cfg.seed,
            "calibration": cfg.calibration.model_dump(mode="json"),
        },
        "bin": {"root": "results/s", "scenario": name, "rank": 0, "analysis": analysis},
        "differentiate": {
            "root": "results/s",
            "scenario": name,
            "rank": 0,
            "analysis": analysis,
            "max_clock_residual_us": cfg.calibration.max_clock_residual_us,
            "with_truth": True,
        },
        "combine": {"root": "results/s", "scenario": name, "world_size": 2, "analysis": analysis},
        "fleet": {"root": "results/s", "scenario": name, "gpus": [0, 3], "analysis": analysis},
        "report": {
            "root": "results/s",
            "scenarios": [s.name for s in cfg.scenarios],
            "meta": {
                "sweep": cfg.sweep,
                "backend": cfg.device.backend,
                "config_hash": "abc",
                "config": cfg.model_dump(mode="json"),
                "paper_sse_vs_ssp_pct": {"cb-2k": 80.0},
            },
            "world_size": 1,
            "cards": None,
        },
    }


MODELS = {
    "calibrate": P.CalibrateParams,
    "collect": P.CollectParams,
    "bin": P.BinParams,
    "differentiate": P.DifferentiateParams,
    "combine": P.CombineParams,
    "fleet": P.FleetParams,
    "report": P.ReportParams,
}


@pytest.mark.parametrize("stage", list(MODELS))
def test_the_rules_params_validate_into_the_stages_model(stage: str, rule_params: dict[str, dict]) -> None:
    q = P.parse_params(MODELS[stage], json.loads(json.dumps(rule_params[stage])), stage)
    assert q.layout.root == Path("results/s")
    if stage == "report":
        meta = q.meta.model_dump(exclude_unset=True)
        assert meta["sweep"] == rule_params["report"]["meta"]["sweep"] and "timeline_scenario" not in meta


def test_a_bad_params_record_names_every_bad_field(rule_params: dict[str, dict]) -> None:
    bad = {**rule_params["differentiate"], "rank": "first", "with_truth": "maybe"}
    del bad["scenario"]
    with pytest.raises(DataError) as err:
        P.parse_params(P.DifferentiateParams, bad, "differentiate")
    text = str(err.value)
    assert text.startswith("differentiate: bad stage parameters:")
    assert "scenario: Field required" in text and "rank:" in text and "with_truth:" in text
    with pytest.raises(DataError, match=r"analysis.bootstrap_reps"):
        P.parse_params(P.BinParams, {**rule_params["bin"], "analysis": {"bootstrap_reps": -1}}, "bin")
    with pytest.raises(DataError, match=r"unexpected: Extra inputs"):
        P.parse_params(P.BinParams, {**rule_params["bin"], "unexpected": 1}, "bin")


def test_a_bad_params_file_stops_the_job_with_one_message(tmp_path: Path, rule_params: dict[str, dict]) -> None:
    params = tmp_path / "p.json"
    params.write_text(json.dumps({**rule_params["bin"], "rank": -1, "root": str(tmp_path / "out")}))
    log = tmp_path / "bin.log"
    assert run_stage(["bin", "--log", str(log), "--params-file", str(params)]) == 1
    text = log.read_text()
    assert "bin: bad stage parameters: rank: Input should be greater than or equal to 0" in text
    assert "Traceback" not in text and not (tmp_path / "out").exists()
