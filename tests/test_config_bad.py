"""Bad sweep configs: each gives one ConfigError whose message names the field (or the file and line)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import run_snakemake

from fingrav.config import ConfigError, load_config, parse_config

ROOT = Path(__file__).resolve().parent.parent

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
    ("scenarios.0.kernel.m", True, "scenarios['a'].kernel.m = True"),  # bool is no int
    ("scenarios.0.kernel.m", "2048", "kernel"),  # a string is no int
    ("scenarios.0.kernel.m", 10**30, "kernel"),
    ("scenarios.0.kernel.m", 0, "kernel"),
    ("scenarios.0.kernel.m", -5, "kernel"),
    ("scenarios.0.kernel.m", 2048.5, "kernel"),
    ("scenarios.0.kernel", {"kind": "gemm", "m": 1 << 18, "n": 1 << 18, "k": 2048}, "GiB of operands"),
    ("scenarios.0.kernel.dtype", "fp8", "kernel"),
    ("scenarios.0.kernel.kind", "conv", "kernel"),
    ("scenarios.0.name", "calibration", "reserved"),
    ("scenarios.0.name", "../x", "scenarios[0].name = '../x'"),  # the name is the problem: by position
    ("scenarios.0.name", "", "scenarios[0].name = ''"),
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
    assert len(problems(str(exc.value))) == 1, str(exc.value)


def problems(msg: str) -> list[str]:
    """The problem lines of a ConfigError message (one per mistake, after the "invalid sweep config:" line)."""
    lines = msg.splitlines()
    return lines[1:] if lines and lines[0] == "invalid sweep config:" else lines


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


# --------------------------------------------------------------------------- more bad configs: one message each, naming
# the field and its value, a scenario by its name (never by its position), the closest key for a misspelled one
def _scenario(**fields: Any) -> dict[str, Any]:
    """GOOD with its scenario 'a' changed (fields None: removed)."""
    d = copy.deepcopy(GOOD)
    d["scenarios"][0].update(fields)
    d["scenarios"][0] = {k: v for k, v in d["scenarios"][0].items() if v is not None}
    return d


def _with(**top: Any) -> dict[str, Any]:
    """GOOD with top-level sections replaced (None: removed)."""
    d = {**copy.deepcopy(GOOD), **top}
    return {k: v for k, v in d.items() if v is not None}


GEMM = {"kind": "gemm", "m": 64, "n": 64, "k": 64}
MORE: list[tuple[str, dict[str, Any], tuple[str, ...]]] = [
    # misspelled keys: "did you mean"
    (
        "kernel key",
        _scenario(kernel={"kind": "gemm", "m": 64, "n": 64, "kk": 64}),
        ("scenarios['a'].kernel.kk", "(value 64)", "did you mean 'k'?"),
    ),
    ("run_policy key", _set("run_policy.rnus", 5), ("run_policy.rnus", "(value 5)", "did you mean 'runs'?")),
    ("device key", _set("device.backnd", "sim"), ("device.backnd", "did you mean 'backend'?")),
    ("analysis key", _set("analysis.bootstrap_rep", 500), ("analysis.bootstrap_rep", "did you mean 'bootstrap_reps'?")),
    ("calibration key", _set("calibration.step", 10), ("calibration.step", "did you mean 'steps'?")),
    (
        "override key",
        _set("device.sim.overrides", {"sensor_perod_ms": 1.0}),
        ("sensor_perod_ms", "did you mean 'sensor_period_ms'?"),
    ),
    (
        "scenario policy key",
        _scenario(run_policy={"warmup": 2}),
        ("scenarios['a'].run_policy.warmup", "did you mean 'warmups'?"),
    ),
    (
        "predecessor key",
        _scenario(predecesor={"count": 2, "kernel": GEMM}),
        ("scenarios['a'].predecesor", "did you mean 'predecessor'?"),
    ),
    (
        "top-level key",
        {**{k: v for k, v in GOOD.items() if k != "scenarios"}, "senarios": GOOD["scenarios"]},
        ("senarios", "did you mean 'scenarios'?"),
    ),
    (
        "gemv has no n",
        _scenario(kernel={"kind": "gemv", "m": 64, "k": 64, "n": 64}),
        ("scenarios['a'].kernel.n", "unknown key"),
    ),
    # values
    ("seed too large", _set("seed", 2**64), ("seed = 18446744073709551616",)),
    ("seed a float", _set("seed", 1.5), ("seed = 1.5",)),
    ("world_size too large", _set("device.world_size", 65), ("device.world_size = 65",)),
    ("world_size a bool", _set("device.world_size", True), ("device.world_size = True",)),
    ("index a string", _set("device.index", "0"), ("device.index = '0'",)),
    ("nccl on the simulator", _set("device.dist_backend", "nccl"), ("device.dist_backend 'nccl' needs GPUs",)),
    ("window 0", _set("device.sim.overrides", {"sensor_window_ms": 0}), ("sensor_window_ms = 0",)),
    ("period 1e6 ms", _set("device.sim.overrides", {"sensor_period_ms": 1e6}), ("sensor_period_ms = 1000000.0",)),
    ("outliers 90 %", _set("device.sim.overrides", {"outlier_run_fraction": 0.9}), ("outlier_run_fraction = 0.9",)),
    ("offset inf", _set("device.sim.overrides", {"clock_offset_us": float("inf")}), ("clock_offset_us = inf",)),
    ("gap negative", _set("device.sim.overrides", {"launch_gap_us": -1.0}), ("launch_gap_us = -1.0",)),
    ("delay nan", _set("device.sim.overrides", {"sensor_delay_ms": float("nan")}), ("sensor_delay_ms = nan",)),
    ("preset a number", _set("device.sim.preset", 300), ("device.sim.preset = 300",)),
    ("steps 5000", _set("calibration.steps", 5000), ("calibration.steps = 5000",)),
    ("step off 0", _set("calibration.step_off_ms", 0), ("calibration.step_off_ms = 0",)),
    ("step on negative", _set("calibration.step_on_ms", -1.0), ("calibration.step_on_ms = -1.0",)),
    ("no clock reads", _set("calibration.clock_reads_per_burst", 0), ("calibration.clock_reads_per_burst = 0",)),
    (
        "residual nan",
        _set("calibration.max_clock_residual_us", float("nan")),
        ("calibration.max_clock_residual_us = nan",),
    ),
    ("timing reps 2", _set("run_policy.timing_reps", 2), ("run_policy.timing_reps = 2",)),
    ("min lois 0", _set("run_policy.min_lois", 0), ("run_policy.min_lois = 0",)),
    ("executions 0", _set("run_policy.executions_per_run", 0), ("run_policy.executions_per_run = 0",)),
    ("sse runs negative", _set("run_policy.sse_runs", -3), ("run_policy.sse_runs = -3",)),
    ("explicit without executions", _set("run_policy", {"mode": "explicit", "runs": 10}), ("mode 'explicit' needs",)),
    (
        "executions below warm-ups",
        _set("run_policy", {"executions_per_run": 2}),
        ("executions_per_run=2", "warmups + 1 = 4"),
    ),
    ("probe 0", _set("run_policy.probe_ms", 0), ("run_policy.probe_ms = 0",)),
    ("reference 1e7", _set("run_policy.reference_ms", 1e7), ("run_policy.reference_ms = 10000000.0",)),
    ("policy a list", _set("run_policy", [1, 2]), ("run_policy = [1, 2]",)),
    ("ci level 0.4", _set("analysis.ci_level", 0.4), ("analysis.ci_level = 0.4",)),
    ("fit degree -1", _set("analysis.fit_degree", -1), ("analysis.fit_degree = -1",)),
    ("analysis min lois 0", _set("analysis.min_lois", 0), ("analysis.min_lois = 0",)),
    ("drift 0", _set("analysis.max_drift_ppm", 0), ("analysis.max_drift_ppm = 0",)),
    ("bool as a string", _set("analysis.delay_correction", "yes"), ("analysis.delay_correction = 'yes'",)),
    ("margin a string", _set("analysis.margin", "0.02"), ("analysis.margin = '0.02'",)),
    ("bootstrap 1e6", _set("analysis.bootstrap_reps", 10**6), ("analysis.bootstrap_reps = 1000000",)),
    # scenarios, named by name
    (
        "missing dimension",
        _scenario(kernel={"kind": "gemm", "m": 64, "n": 64}),
        ("scenarios['a'].kernel.k: required field is missing",),
    ),
    (
        "gemv too big",
        _scenario(kernel={"kind": "gemv", "m": 1 << 20, "k": 1 << 20}),
        ("scenarios['a'].kernel", "GiB of operands"),
    ),
    (
        "collective on one GPU",
        _scenario(kernel={"kind": "allreduce", "size_bytes": 65536}),
        ("scenario 'a' runs a collective", "world_size must be >= 2"),
    ),
    (
        "collective size",
        _scenario(kernel={"kind": "allreduce", "size_bytes": 3}),
        ("scenarios['a'].kernel", "size_bytes=3"),
    ),
    ("name too long", _scenario(name="x" * 81), ("scenarios[0].name = 'xxxx",)),
    ("reserved name, other case", _scenario(name="Calibration"), ("scenarios[0].name = 'Calibration'", "reserved")),
    ("kernel null", _scenario(kernel=None), ("scenarios['a'].kernel: required field is missing",)),
    ("kernel dtype case", _scenario(kernel={**GEMM, "dtype": "FP16"}), ("scenarios['a'].kernel.dtype = 'FP16'",)),
    (
        "predecessor kind",
        _scenario(predecessor={"count": 2, "kernel": {"kind": "conv"}}),
        ("scenarios['a'].predecessor.kernel", "'conv'"),
    ),
    (
        "predecessor count a bool",
        _scenario(predecessor={"count": True, "kernel": GEMM}),
        ("scenarios['a'].predecessor.count = True",),
    ),
    ("scenario policy bound", _scenario(run_policy={"warmups": 100}), ("scenarios['a'].run_policy.warmups = 100",)),
    (
        "scenario explicit, sweep without runs",
        _scenario(run_policy={"mode": "explicit"}),
        ("scenarios['a'].run_policy", "mode 'explicit' needs"),
    ),
    (
        "scenario executions below the sweep's warm-ups",
        _scenario(run_policy={"executions_per_run": 3}),
        ("scenarios['a'].run_policy", "warmups + 1 = 4"),
    ),
    ("scenario a string", _with(scenarios=["a"]), ("scenarios[0] = 'a'",)),
    ("scenarios a mapping", _with(scenarios={"a": GEMM}), ("scenarios = {",)),
    ("sweep too long", _with(sweep="s" * 81), ("sweep = 'ssss",)),
    ("sweep a number", _with(sweep=123), ("sweep = 123",)),
    ("device a string", _with(device="sim"), ("device = 'sim'",)),
    ("replay without a folder", _with(device={"backend": "replay", "replay_dir": ""}), ("needs device.replay_dir",)),
    (
        "gloo on GPUs",
        _with(device={"backend": "nvml", "dist_backend": "gloo"}),
        ("'gloo' cannot run collectives on GPUs",),
    ),
]


@pytest.mark.parametrize(("data", "needles"), [c[1:] for c in MORE], ids=[c[0] for c in MORE])
def test_bad_config_gives_one_message_naming_field_value_and_scenario(
    data: dict[str, Any], needles: tuple[str, ...]
) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    msg = str(exc.value)
    for needle in needles:
        assert needle in msg, msg
    assert len(problems(msg)) == 1, msg
    assert not re.search(r"scenarios\.\d", msg), msg  # a scenario is named, not numbered
    assert "Traceback" not in msg


def test_a_misspelled_required_key_is_one_problem() -> None:
    """`kk` for `k` would also leave `k` missing: the message says it once, with the suggestion."""
    msg = str(
        pytest.raises(ConfigError, parse_config, _scenario(kernel={"kind": "gemm", "m": 64, "n": 64, "kk": 64})).value
    )
    assert problems(msg) == ["  scenarios['a'].kernel.kk: unknown key (value 64); did you mean 'k'?"], msg


def test_duplicate_name_is_named_not_the_whole_list() -> None:
    data = _with(scenarios=[{"name": f"s{i}", "kernel": GEMM} for i in range(50)] + [{"name": "s7", "kernel": GEMM}])
    msg = str(pytest.raises(ConfigError, parse_config, data).value)
    assert problems(msg) == ["  scenarios: duplicate scenario name 's7' (given 2 times)"], msg


def test_a_long_value_is_never_printed_whole() -> None:
    msg = str(
        pytest.raises(
            ConfigError, parse_config, _with(scenarios=[{"name": f"s{i}", "kernel": GEMM} for i in range(2001)])
        ).value
    )
    assert "a list of 2001 items" in msg and len(msg) < 300, msg


def test_scenario_explicit_mode_takes_runs_from_the_sweep() -> None:
    """A scenario's run_policy is checked once merged with the sweep's: `mode: explicit` there is fine when the
    sweep supplies runs and executions_per_run (each level used to be checked alone, before the merge)."""
    data = _scenario(run_policy={"mode": "explicit"})
    data["run_policy"] = {"runs": 40, "executions_per_run": 12}
    cfg = parse_config(data)
    merged = cfg.policy_for("a")
    assert merged.mode == "explicit" and merged.runs == 40 and merged.executions_per_run == 12
    assert cfg.run_policy.mode == "auto"  # the sweep's own policy is unchanged


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("__use_yte__: true\nsweep: s\n", "__use_yte__ = True: YTE templates are not allowed"),
        ("__use_yte__: false\nsweep: s\n", "YTE templates are not allowed"),  # refused whatever its value
        ("sweep: s\n\tseed: 1\n", "not valid YAML"),  # a tab
        ('{"sweep": "s", "sweep": "t"}\n', "duplicate key 'sweep'"),  # JSON too
        ("", "must be a mapping"),
        ("sweep: !!python/name:os.system\n", "not valid YAML"),
    ],
)
def test_more_bad_files(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(needle)):
        load_config(path)


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_config(tmp_path)  # a folder


def test_the_suite_has_enough_bad_configs() -> None:
    """Issue 11: at least 80 bad configs, each refused with one message (the value cases alone)."""
    assert len(CASES) - 1 + len(MORE) >= 80


# --------------------------------------------------------------------------- through Snakemake: one message, no job
SNAKEMAKE_SAMPLE = [
    ("kernel key", "did you mean 'k'?"),
    ("seed too large", "seed = 18446744073709551616"),
    ("offset inf", "clock_offset_us = inf"),
    ("delay nan", "sensor_delay_ms = nan"),
    ("collective on one GPU", "scenario 'a' runs a collective"),
    ("gemv too big", "GiB of operands"),
    ("scenario explicit, sweep without runs", "scenarios['a'].run_policy"),
    ("bool as a string", "analysis.delay_correction = 'yes'"),
    ("reserved name, other case", "reserved"),
    ("top-level key", "did you mean 'scenarios'?"),
]


def _snakemake_dry_run(tmp_path: Path, config: Path) -> tuple[int, str]:
    argv = ["-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n", "--configfile", str(config)]
    proc = run_snakemake(argv, cwd=ROOT, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def _assert_refused_before_any_job(tmp_path: Path, rc: int, out: str, needle: str) -> None:
    assert rc != 0, out
    assert needle in out, out
    assert "Traceback" not in out and 'File "' not in out, out  # no stack, not even Snakemake's short one
    assert not re.search(r"^(rule|localrule|checkpoint) \w+:", out, re.M), out  # no job planned or started
    assert "Building DAG" not in out, out
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@pytest.mark.parametrize(("case", "needle"), SNAKEMAKE_SAMPLE)
def test_snakemake_dry_run_refuses_a_bad_config(tmp_path: Path, case: str, needle: str) -> None:
    import yaml

    data = {name: d for name, d, _ in MORE}[case]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    rc, out = _snakemake_dry_run(tmp_path, path)
    _assert_refused_before_any_job(tmp_path, rc, out, needle)
    assert len(problems(out[out.index("invalid sweep config:") :])) == 1, out
