"""A sweep's GPU time is bounded from below before it runs and refused above max_gpu_hours (`fingrav.cost`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import ROOT

from fingrav.config import load_config, parse_config
from fingrav.cost import calibration_cost, scenario_cost
from fingrav.errors import ConfigError

KERNEL = {"kind": "gemm", "m": 64, "n": 64, "k": 64}


def sweep(**parts: object) -> dict:
    return {"sweep": "s", "scenarios": [{"name": "x", "kernel": KERNEL}], **parts}


@pytest.mark.parametrize(
    ("parts", "needle"),
    [
        ({"run_policy": {"mode": "explicit", "runs": 10**6, "executions_per_run": 10**6}}, "1e+12 executions"),
        ({"calibration": {"steps": 1000, "step_on_ms": 600_000, "step_off_ms": 600_000}}, "calibration: 1000 steps"),
        ({"run_policy": {"probe_ms": 600_000, "reference_ms": 600_000}, "scenarios": [
            {"name": f"s{i}", "kernel": KERNEL} for i in range(100)]}, "needs at least 33.4 h"),
    ],
)  # fmt: skip
def test_a_sweep_of_days_is_refused_with_its_largest_part(parts: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=r"max_gpu_hours = 24: this sweep needs at least .*raise max_gpu_hours") as e:
        parse_config(sweep(**parts))
    assert needle in str(e.value)


def test_the_bound_is_the_users_to_raise_and_replays_are_never_refused() -> None:
    huge = {"run_policy": {"mode": "explicit", "runs": 10**6, "executions_per_run": 10**6}}
    parse_config(sweep(max_gpu_hours=1e6, **huge))
    parse_config(sweep(device={"backend": "replay", "replay_dir": "x"}, **huge))


def test_min_lois_is_bounded() -> None:
    with pytest.raises(ConfigError, match="run_policy.min_lois = 1000000000: Input should be less than or equal"):
        parse_config(sweep(run_policy={"min_lois": 10**9}))


def test_every_shipped_sweep_is_well_within_the_bound() -> None:
    for path in sorted((ROOT / "config").glob("*.yaml")):
        if path.name == "schema.json":
            continue
        cfg = load_config(path)
        seconds = calibration_cost(cfg.calibration).seconds
        seconds += sum(scenario_cost(s, cfg.policy_for(s.name)).seconds for s in cfg.scenarios)
        assert 0 < seconds < 3600, path.name


def test_a_stage_out_of_memory_is_one_message(tmp_path: Path, monkeypatch) -> None:
    from fingrav.stages import bin as bin_stage
    from fingrav.stages.job import run_stage

    def boom(params: dict) -> None:
        raise MemoryError

    monkeypatch.setattr(bin_stage, "from_params", boom)
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"root": str(tmp_path / "r")}))
    assert run_stage(["bin", "--log", str(tmp_path / "bin.log"), "--params-file", str(params)]) == 1
    text = (tmp_path / "bin.log").read_text()
    assert "bin: out of memory on this machine" in text and "Traceback" not in text
