"""The sweep config: schema in sync with the models, and bad configs rejected with one clear message."""

from __future__ import annotations

import copy
import json
import re

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
    # the sweep's policy, with the analysis' SSE LOI threshold where run_policy.sse_min_lois is unset (issue 20)
    assert cfg.policy_for("cb-8k") == cfg.run_policy.model_copy(update={"sse_min_lois": cfg.analysis.min_lois})
    data["scenarios"][0]["run_policy"] = {"sse_min_lois": 4}
    assert parse_config(data).policy_for("cb-2k").sse_min_lois == 4
    data["scenarios"][0]["run_policy"] = {"margin": 0.8}
    assert "scenarios['cb-2k'].run_policy.margin: unknown key (value 0.8)" in _bad(lambda d: d.update(data))


# --------------------------------------------------------------------------- listed GPUs (device.gpus)
def listed(gpus: list[int], fleet: bool = False, **device: object) -> dict:
    data = tiny_config()
    data["device"].update(gpus=gpus, fleet=fleet, **device)
    return data


def test_listed_gpus_spread_scenarios_round_robin_and_fleet_runs_all() -> None:
    """Spread: scenario i on gpus[i % n], whatever runs first; fleet: every scenario on every listed GPU."""
    cfg = parse_config(listed([2, 5]))
    assert [cfg.gpus_of(s.name) for s in cfg.scenarios] == [[2], [5], [2]]
    fleet = parse_config(listed([2, 5], fleet=True))
    assert all(fleet.gpus_of(s.name) == [2, 5] for s in fleet.scenarios)
    assert parse_config(tiny_config()).gpus_of("cb-2k") == []


def test_a_listed_gpu_runs_as_a_one_gpu_sweep_of_its_device() -> None:
    dev = parse_config(listed([2, 5], fleet=True, backend="replay", replay_dir="data/fleet")).device
    card = dev.card(5)
    assert (card.index, card.gpus, card.fleet, card.world_size) == (5, None, False, 1)
    assert card.replay_dir == "data/fleet/cards/5"  # a replayed fleet's GPU i: the dataset's cards/<i>/
    with pytest.raises(KeyError):
        dev.card(3)


@pytest.mark.parametrize(
    ("device", "pattern"),
    [
        ({"gpus": [0, 0]}, re.escape("a GPU is listed twice")),
        ({"gpus": [0, 1], "world_size": 2}, re.escape("device.gpus = [0, 1] and device.world_size = 2")),
        ({"gpus": [0, 1], "index": 3}, re.escape("list the GPUs in device.gpus")),
        ({"fleet": True}, re.escape("device.fleet needs device.gpus")),
        ({"gpus": [1], "fleet": True}, re.escape("a fleet survey needs at least 2 GPUs")),
        ({"gpus": []}, re.escape("device.gpus")),
        ({"gpus": [-1]}, r"device\.gpus(\.0|\[0\]) = -1"),  # the item's spelling is the config errors' own
        ({"sim": {"card_spread_pct": 50.0}}, re.escape("device.sim.card_spread_pct = 50.0")),
    ],
)
def test_bad_listed_gpus_are_refused(device: dict, pattern: str) -> None:
    """One message naming the field and value."""
    data = tiny_config()
    data["device"].update(device)
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert re.search(pattern, str(err.value)), err.value
