"""The sweep config: schema in sync with the models, and bad configs rejected with one clear message."""

from __future__ import annotations

import copy
import json

import pytest
from conftest import tiny_config

from fingrav.cli import SCHEMA_PATH, schema_text
from fingrav.config import RunPolicy, load_config, parse_config
from fingrav.errors import ConfigError


def test_schema_file_in_sync_with_models() -> None:
    assert SCHEMA_PATH.read_text() == schema_text(), "config/schema.json is stale: run `fingrav schema`"


def test_shipped_configs_validate(repo_root) -> None:
    names = sorted(p.name for p in (repo_root / "config").glob("*.yaml"))
    assert {"config.yaml", "sim-h200.yaml"} <= set(names)
    for p in (repo_root / "config").glob("*.yaml"):
        cfg = load_config(p)
        assert cfg.scenarios


def test_schema_is_valid_json_with_all_sections() -> None:
    schema = json.loads(schema_text())
    assert set(schema["properties"]) >= {"sweep", "device", "calibration", "run_policy", "analysis", "scenarios"}
    assert schema["additionalProperties"] is False


def _bad(mutate) -> str:
    data = copy.deepcopy(tiny_config())
    mutate(data)
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    return str(exc.value)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(bogus=1), ["bogus", "unknown key"]),
        (lambda d: d["run_policy"].update(runz=5), ["run_policy.runz", "unknown key"]),
        (
            lambda d: d["scenarios"][0]["kernel"].update(m=-8),
            ["scenarios['cb-2k'].kernel.m", "-8", "greater than or equal to 1"],
        ),
        (lambda d: d["scenarios"][1]["kernel"].update(k=0), ["scenarios['cb-8k'].kernel.k", "0"]),
        (lambda d: d["scenarios"][1].update(name="cb-2k"), ["scenarios", "duplicate scenario name 'cb-2k'"]),
        (lambda d: d["device"].update(backend="cuda"), ["device.backend", "'cuda'", "'sim'"]),
        (lambda d: d["analysis"].update(margin=0.7), ["analysis.margin", "0.7", "less than or equal to 0.5"]),
        (lambda d: d["analysis"].update(margin=-0.01), ["analysis.margin", "-0.01"]),
        (lambda d: d["analysis"].update(margin=0), ["analysis.margin", "0", "greater than 0"]),
        # the margin is an analysis parameter now: under run_policy it is an unknown key
        (lambda d: d["run_policy"].update(margin=0.03), ["run_policy.margin", "unknown key"]),
        (lambda d: d["scenarios"][0]["kernel"].update(kind="conv"), ["scenarios['cb-2k'].kernel", "conv"]),
    ],
)
def test_bad_config_names_field_and_value(mutate, expected) -> None:
    msg = _bad(mutate)
    assert msg.startswith("invalid sweep config")
    for part in expected:
        assert part in msg, f"{part!r} not in {msg!r}"


def test_margin_is_not_a_collect_parameter() -> None:
    cfg = parse_config(tiny_config(analysis={"margin": 0.03}))
    assert "margin" not in RunPolicy.model_fields
    assert "margin" not in cfg.run_policy.model_dump()
    assert cfg.analysis.margin == 0.03
    # unset: decided when binning (METHOD.md's guidance table for the measured kernel time)
    assert parse_config(tiny_config()).analysis.margin is None


def test_scenario_run_policy_overrides_only_its_fields() -> None:
    data = tiny_config(analysis={"margin": 0.03})
    data["scenarios"][0]["run_policy"] = {"sse_runs": 2000}
    cfg = parse_config(data)
    own = cfg.policy_for("cb-2k")
    assert own.sse_runs == 2000 and own.max_runs == 600 and own.probe_ms == 200.0
    assert cfg.analysis.margin == 0.03
    assert cfg.policy_for("cb-8k") == cfg.run_policy
    data["scenarios"][0]["run_policy"] = {"margin": 0.8}
    assert "scenarios['cb-2k'].run_policy.margin: unknown key (value 0.8)" in _bad(lambda d: d.update(data))
