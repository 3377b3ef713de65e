"""Bad sweep configs: each gives one ConfigError whose message names the field (or the file and line)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from fingrav.config import ConfigError, load_config, parse_config

GOOD: dict[str, Any] = {
    "sweep": "s",
    "seed": 1,
    "device": {"backend": "sim", "sim": {"preset": "h200"}},
    "run_policy": {"mode": "auto"},
    "scenarios": [{"name": "a", "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048}}],
}


def _set(path: str, value: Any) -> dict[str, Any]:
    d = copy.deepcopy(GOOD)
    cur: Any = d
    keys = path.split(".")
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur.setdefault(k, {})
    cur[int(keys[-1]) if isinstance(cur, list) else keys[-1]] = value
    return d


CASES = [
    ("scenarios.0.kernel.m", True, "scenarios.0.kernel.m = True"),  # bool is no int
    ("scenarios.0.kernel.m", "2048", "kernel"),  # a string is no int
    ("scenarios.0.kernel.m", 10**30, "kernel"),
    ("scenarios.0.kernel.m", 0, "kernel"),
    ("scenarios.0.kernel.m", -5, "kernel"),
    ("scenarios.0.kernel.m", 2048.5, "kernel"),
    ("scenarios.0.kernel", {"kind": "gemm", "m": 1 << 18, "n": 1 << 18, "k": 2048}, "GiB of operands"),
    ("scenarios.0.kernel.dtype", "fp8", "kernel"),
    ("scenarios.0.kernel.kind", "conv", "kernel"),
    ("scenarios.0.name", "calibration", "reserved"),
    ("scenarios.0.name", "../x", "scenarios.0.name"),
    ("scenarios.0.name", "", "scenarios.0.name"),
    ("scenarios.0.predecessor", {"count": 0, "kernel": {"kind": "gemv", "m": 64, "k": 64}}, "predecessor.count"),
    ("scenarios.0.predecessor", {"count": 10**9, "kernel": {"kind": "gemv", "m": 64, "k": 64}}, "predecessor.count"),
    ("seed", -1, "seed"),
    ("seed", True, "seed"),
    ("seed", "1", "seed"),
    ("sweep", "a/b", "sweep"),
    ("sweep", "", "sweep"),
    ("device.backend", "cuda", "device.backend"),
    ("device.index", -1, "device.index"),
    ("device.world_size", 0, "device.world_size"),
    ("device.sim.preset", "b200", "device.sim.preset"),
    ("device.sim.overrides", {"sensor_period_ms": 1e-6}, "sensor_period_ms"),
    ("device.sim.overrides", {"sensor_period_ms": float("nan")}, "sensor_period_ms"),
    ("device.sim.overrides", {"sensor_noise_mw": float("inf")}, "sensor_noise_mw"),
    ("device.sim.overrides", {"sensor_lag_ms": -1.0}, "sensor_lag_ms"),
    ("device.sim.overrides", {"clock_drift_ppm": float("nan")}, "clock_drift_ppm"),
    ("device.sim.overrides", {"exec_jitter_pct": 90.0}, "exec_jitter_pct"),
    ("device.sim.overrides", {"sensr_period_ms": 1.0}, "sensr_period_ms"),
    ("run_policy.runs", 10**9, "run_policy.runs"),
    ("run_policy.runs", True, "run_policy.runs"),
    ("run_policy.max_runs", 0, "run_policy.max_runs"),
    ("run_policy.probe_ms", float("inf"), "run_policy.probe_ms"),
    ("run_policy.probe_ms", 1e9, "run_policy.probe_ms"),
    ("run_policy.reference_ms", float("nan"), "run_policy.reference_ms"),
    ("run_policy.reference_ms", -1.0, "run_policy.reference_ms"),
    ("run_policy.warmups", 100, "run_policy.warmups"),
    ("run_policy.mode", "manual", "run_policy.mode"),
    ("run_policy.margin", 0.05, "run_policy.margin"),  # moved to analysis.margin
    ("run_policy.stability_tol_pct", 0, "run_policy.stability_tol_pct"),
    ("analysis.margin", 0.9, "analysis.margin"),
    ("analysis.margin", 0, "analysis.margin"),
    ("analysis.bootstrap_reps", 5, "analysis.bootstrap_reps"),
    ("analysis.ci_level", 1.0, "analysis.ci_level"),
    ("analysis.max_ci_pct", -1.0, "analysis.max_ci_pct"),
    ("analysis.fit_degree", 12, "analysis.fit_degree"),
    ("calibration.steps", 2, "calibration.steps"),
    ("calibration.step_on_ms", float("inf"), "calibration.step_on_ms"),
    ("calibration.clock_bursts", 10**9, "calibration.clock_bursts"),
    ("calibration.max_clock_residual_us", 0, "calibration.max_clock_residual_us"),
    ("device.replay_dir", "x", "device.replay_dir"),  # only with the replay backend? accepted: see below
]


@pytest.mark.parametrize(("path", "value", "needle"), [c for c in CASES if c[0] != "device.replay_dir"])
def test_bad_value_names_its_field(path: str, value: Any, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(_set(path, value))
    assert needle in str(exc.value), str(exc.value)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({**GOOD, "scenarios": []}, "scenarios"),
        ({**GOOD, "scenarios": GOOD["scenarios"] * 2}, "duplicate scenario name 'a'"),
        ({**GOOD, "scenarios": [GOOD["scenarios"][0] | {"name": f"s{i}"} for i in range(2001)]}, "scenarios"),
        ({**GOOD, "run_policy": {"mode": "explicit"}}, "explicit"),
        ({**GOOD, "device": {"backend": "replay"}}, "replay_dir"),
        ({k: v for k, v in GOOD.items() if k != "sweep"}, "sweep"),
        ({**GOOD, "sweeep": "x"}, "sweeep"),
    ],
)
def test_bad_structure_names_its_field(data: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    assert needle in str(exc.value), str(exc.value)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("sweep: a\nsweep: b\nscenarios: []\n", "line 2: duplicate key 'sweep'"),
        (
            "a: &a [1, 2]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            + "".join(f"c{i}: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" for i in range(12)),
            "YAML aliases",
        ),
        ("sweep: [unclosed\n", "not valid YAML"),
        ("!!python/object/apply:os.system ['true']\n", "not valid YAML"),
        ("- just\n- a list\n", "must be a mapping"),
    ],
)
def test_bad_file_is_refused_before_validation(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_config(path)


def test_binary_and_huge_files_are_refused(tmp_path: Path) -> None:
    (tmp_path / "bin.yaml").write_bytes(bytes(range(256)) * 4)
    with pytest.raises(ConfigError, match="not a text"):
        load_config(tmp_path / "bin.yaml")
    (tmp_path / "big.yaml").write_text("# x\n" * 400_000)
    with pytest.raises(ConfigError, match="at most"):
        load_config(tmp_path / "big.yaml")
