"""Config files are read by fingrav (`fingrav.config.read_yaml`): YAML 1.2 numbers, and a budget on the expanded
document checked before anything is built (an alias bomb is refused in milliseconds, with one message)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fingrav.config import MAX_CONFIG_NODES, load_config, merge_config, read_yaml
from fingrav.errors import ConfigError
from fingrav.preflight import screen_snakemake_command_line


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_numbers_follow_yaml_1_2(tmp_path: Path) -> None:
    data = read_yaml(write(tmp_path, "a: 0512\nb: 1.0e9\nc: 1e-3\nd: 0o17\ne: 0x1F\nf: yes\ng: 2001-12-14\nh: -07\n"))
    assert data == {"a": 512, "b": 1e9, "c": 1e-3, "d": 15, "e": 31, "f": "yes", "g": "2001-12-14", "h": -7}


def test_a_leading_zero_size_and_an_exponent_float_reach_the_model(tmp_path: Path) -> None:
    """YAML 1.1 read `m: 0512` as octal (a 330^3 GEMM) and `flops: 1.0e9` as a string (refused)."""
    cfg = load_config(
        write(
            tmp_path,
            "sweep: s\nscenarios:\n"
            "  - {name: a, kernel: {kind: gemm, m: 0512, n: 512, k: 512}}\n"
            "  - {name: b, kernel: {kind: callable, target: 'x.py:f', flops: 1.0e9}}\n",
        )
    )
    assert cfg.scenarios[0].kernel.m == 512 and cfg.scenarios[1].kernel.flops == 1e9


def bomb(levels: int = 8) -> str:
    """~1 KB of YAML inside a callable's args, levels * 8 aliases (under the alias limit), 10 * 8**levels nodes once
    expanded."""
    lines = ["sweep: s", "scenarios:", "  - name: a", "    kernel:", "      kind: callable", "      target: x.py:f"]
    lines += ["      flops: 1.0", "      args:", "        a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"        a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 8)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_under_the_alias_limit_is_refused_before_it_is_built(tmp_path: Path) -> None:
    path = write(tmp_path, bomb())
    assert path.stat().st_size < 1500
    with pytest.raises(ConfigError, match=rf"expands to \d+ YAML nodes .*at most {MAX_CONFIG_NODES}") as exc:
        load_config(path)
    assert str(path) in str(exc.value)
    with pytest.raises(SystemExit, match="expands to"):  # the logger plugin's screen, before Snakemake reads it
        screen_snakemake_command_line(["-n", "--configfile", str(path)])


def test_shared_aliases_within_the_budget_are_fine(tmp_path: Path) -> None:
    load_config(write(tmp_path, bomb(levels=2).replace("sweep: s", "sweep: t")))


def test_config_files_merge_as_snakemake_merges_them() -> None:
    base = {"sweep": "a", "run_policy": {"runs": 3, "mode": "explicit"}}
    assert merge_config(base, {"run_policy": {"runs": 5}}, "x") == {
        "sweep": "a",
        "run_policy": {"runs": 5, "mode": "explicit"},
    }
    with pytest.raises(ConfigError, match="x.yaml: a sweep config must be a mapping"):
        merge_config(base, [1, 2], "x.yaml")


def test_a_moved_key_says_where_it_went() -> None:
    from fingrav.config import parse_config

    kernel = {"kind": "gemm", "m": 64, "n": 64, "k": 64}
    for data in (
        {"sweep": "s", "run_policy": {"margin": 0.02}, "scenarios": [{"name": "x", "kernel": kernel}]},
        {"sweep": "s", "scenarios": [{"name": "x", "kernel": kernel, "run_policy": {"margin": 0.02}}]},
    ):
        with pytest.raises(
            ConfigError, match=r"run_policy.margin: unknown key \(value 0.02\); moved to analysis.margin"
        ):
            parse_config(data)


@pytest.mark.parametrize(
    ("names", "needle"),
    [
        (["x", "x.readings"], "ends in '.readings', which names another scenario's files"),
        (["x" + "ab" * 20], "ends in 'ab' repeated 20 or more times"),
        (["a" * 30], "ends in 'a' repeated 20 or more times"),
    ],
)
def test_names_snakemake_or_the_layout_cannot_take_are_refused(names: list[str], needle: str) -> None:
    from fingrav.config import parse_config

    kernel = {"kind": "gemm", "m": 64, "n": 64, "k": 64}
    with pytest.raises(ConfigError, match=re.escape(needle)):
        parse_config({"sweep": "s", "scenarios": [{"name": n, "kernel": kernel} for n in names]})
    parse_config({"sweep": "s", "scenarios": [{"name": "cb-2k-after-cb-4k", "kernel": kernel}]})


def test_validate_refuses_what_the_pipeline_refuses(tmp_path: Path, monkeypatch, caplog) -> None:
    from fingrav.cli import main

    monkeypatch.chdir(tmp_path)
    path = write(
        tmp_path, "sweep: s\nscenarios:\n  - {name: a, kernel: {kind: callable, target: 'nope.py:f', flops: 1.0}}\n"
    )
    assert main(["validate", "--config", str(path)]) == 2
    assert "scenarios['a'].kernel: callable target 'nope.py:f': no such file" in caplog.text
