"""Shape grids (fingrav.grid): expansion, stable names, validation like hand-written scenarios, the CLI listing."""

from __future__ import annotations

from typing import Any

import pytest

from fingrav import cli
from fingrav.config import SweepConfig, load_config, parse_config
from fingrav.errors import ConfigError
from fingrav.grid import GridEntry


def _cfg(*grids: dict[str, Any], scenarios: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {"sweep": "g", "grid": list(grids)}
    if scenarios is not None:
        data["scenarios"] = scenarios
    return data


GEMMS = {
    "name": "m8b",
    "kernel": {"kind": "gemm", "dtype": "bf16"},
    "shapes": [{"name": "qkv", "k": 4096, "n": 6144}, {"name": "o", "k": 4096, "n": 4096}],
    "axes": {"m": [1, 128, 8192]},
}


def test_shapes_cross_axes_in_order_with_stable_names() -> None:
    cfg = parse_config(_cfg(GEMMS))
    names = [s.name for s in cfg.scenarios]
    assert names == ["m8b-qkv-m1", "m8b-qkv-m128", "m8b-qkv-m8192", "m8b-o-m1", "m8b-o-m128", "m8b-o-m8192"]
    first = cfg.scenarios[0].kernel
    assert (first.kind, first.m, first.n, first.k, first.dtype) == ("gemm", 1, 6144, 4096, "bf16")
    assert (cfg.scenarios[-1].kernel.m, cfg.scenarios[-1].kernel.n) == (8192, 4096)
    # the same config expands to the same names, whatever else the sweep holds
    again = parse_config(_cfg(GEMMS, scenarios=[{"name": "x", "kernel": {"kind": "gemv", "m": 8, "k": 8}}]))
    assert [s.name for s in again.scenarios] == ["x", *names]


def test_several_axes_are_crossed_and_a_tie_copies_a_field() -> None:
    att = {
        "name": "pre",
        "kernel": {"kind": "attention", "batch": 1, "heads": 8, "head_dim": 64, "causal": True},
        "axes": {"q_len": [256, 512], "batch": [1, 4]},
        "tie": {"kv_len": "q_len"},
    }
    cfg = parse_config(_cfg(att))
    assert [s.name for s in cfg.scenarios] == ["pre-q_len256-batch1", "pre-q_len256-batch4", "pre-q_len512-batch1",
                                               "pre-q_len512-batch4"]  # fmt: skip
    assert all(s.kernel.kv_len == s.kernel.q_len for s in cfg.scenarios)
    assert [s.kernel.batch for s in cfg.scenarios] == [1, 4, 1, 4]


def test_predecessor_and_run_policy_reach_every_scenario() -> None:
    g = {
        **GEMMS,
        "predecessor": {"count": 3, "kernel": {"kind": "gemv", "m": 1024, "k": 1024}},
        "run_policy": {"runs": 7},
    }
    cfg = parse_config(_cfg(g))
    assert all(s.predecessor is not None and s.predecessor.count == 3 for s in cfg.scenarios)
    assert {cfg.policy_for(s.name).runs for s in cfg.scenarios} == {7}


def test_a_dump_revalidates_to_the_same_sweep() -> None:
    cfg = parse_config(_cfg(GEMMS))
    dumped = cfg.model_dump(mode="json")
    assert "grid" not in dumped  # its scenarios are in `scenarios`: no double expansion
    assert SweepConfig.model_validate(dumped) == cfg.model_copy(update={"grid": []})


def test_a_bad_generated_scenario_is_named_by_its_generated_name() -> None:
    g = {**GEMMS, "axes": {"m": [1, 0]}}
    with pytest.raises(ConfigError) as err:
        parse_config(_cfg(g))
    assert "scenarios['m8b-qkv-m0'].kernel.m = 0" in str(err.value)


@pytest.mark.parametrize(
    ("grid", "expected"),
    [
        ({**GEMMS, "axes": {"m": []}}, "grid[0].axes.m = []"),
        ({**GEMMS, "axes": {"m": [1, 1]}}, "value 1 is given twice"),
        ({**GEMMS, "shapes": [{"name": "a", "n": 1, "k": 1}, {"name": "a", "n": 2, "k": 2}]}, "shape name 'a'"),
        ({**GEMMS, "tie": {"k": "nope"}}, "tie.k = 'nope': no such field"),
        ({**GEMMS, "tie": {"m": "n"}}, "'m' is an axis too"),
        ({**GEMMS, "name": "x" * 60, "shapes": [{"name": "y" * 30, "n": 1, "k": 1}]}, "at most 80"),
        ({**GEMMS, "colour": "red"}, "grid[0].colour: unknown key"),
        ({**GEMMS, "axes": {"m": [1] + list(range(2, 2002))}}, "makes 4002 scenarios"),
    ],
)
def test_bad_grids_get_one_message_naming_the_problem(grid: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_cfg(grid))
    assert expected in str(err.value)


def test_generated_names_must_not_clash() -> None:
    with pytest.raises(ConfigError, match="has the name of a scenario in `scenarios`"):
        parse_config(_cfg(GEMMS, scenarios=[{"name": "m8b-o-m1", "kernel": {"kind": "gemv", "m": 8, "k": 8}}]))
    with pytest.raises(ConfigError, match="duplicate scenario name 'm8b-qkv-m1'"):
        parse_config(_cfg(GEMMS, GEMMS))


def test_no_scenarios_and_no_grid_is_refused() -> None:
    with pytest.raises(ConfigError, match="give at least one in `scenarios` or a `grid`"):
        parse_config({"sweep": "g"})


def test_count_matches_expansion() -> None:
    g = GridEntry.model_validate({**GEMMS, "axes": {"m": [1, 2, 3], "dtype": ["bf16", "fp16"]}})
    assert g.count() == len(g.scenarios()) == 2 * 3 * 2
    assert g.scenarios()[1]["name"] == "m8b-qkv-m1-dtypefp16"


def test_shipped_llama3_grid_expands_to_a_database(repo_root) -> None:
    cfg = load_config(repo_root / "config" / "llama3-grid.yaml")
    kinds = [s.kernel.kind for s in cfg.scenarios]
    assert len(cfg.scenarios) >= 100 and set(kinds) == {"gemm", "attention"}
    assert sum(g.count() for g in cfg.grid) == len(cfg.scenarios)
    down_70b = cfg.scenario("l3-70b-down-m4096").kernel
    assert (down_70b.m, down_70b.k, down_70b.n) == (4096, 28672, 8192)


def test_validate_expand_lists_every_scenario(repo_root, capsys) -> None:
    assert cli.main(["validate", "--config", str(repo_root / "config" / "llama3-grid.yaml"), "--expand"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["scenario", "kernel", "predecessor"]
    assert len(lines) == 1 + len(load_config(repo_root / "config" / "llama3-grid.yaml").scenarios)
    assert any(line.startswith("l3-prefill-70b-q_len8192 ") and "causal" in line for line in lines)
