"""The whole Snakemake pipeline on a tiny simulated sweep: outputs, accuracy against ground truth,
caching (an analysis parameter never re-measures), config errors before any job, replay, dry runs.
Every test here runs Snakemake: all are marked slow."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SNAKEFILE, run_snakemake, snakemake, tiny_config

from fingrav import rawio
from fingrav.config import load_config
from fingrav.provenance import git_commit
from fingrav.replay_check import replayed_columns

SHIPPED_CONFIGS = sorted(f"config/{p.name}" for p in (ROOT / "config").glob("*.yaml"))

pytestmark = pytest.mark.slow


def write_config(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def read_summary(path: Path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("tiny")
    cfg = write_config(work / "tiny.yaml", tiny_config())
    snakemake(work, "--configfile", str(cfg), "--cores", "2")
    return work


def test_pipeline_writes_every_stage_output(tiny_run: Path) -> None:
    """Every per-GPU file sits under a gpu<k> part (fingrav.layout); one GPU: gpu0 only."""
    res = tiny_run / "results" / "tiny"
    assert (res / "calibration" / "gpu0.json").is_file()
    for f in ("clock.parquet", "steps.parquet", "samples.parquet"):
        assert (res / "raw" / "gpu0" / "calibration" / f).is_file()
    assert (res / "logs" / "calibrate.log").stat().st_size > 0
    for name in ("cb-2k", "cb-8k", "cb-2k-after-mb-4k"):
        for f in ("executions.parquet", "runs.parquet", "clock.parquet", "samples.parquet", "plan.json"):
            assert (res / "raw" / "gpu0" / name / f).is_file()
        assert (res / "truth" / "gpu0" / f"{name}.parquet").is_file()
        assert (res / "binned" / "gpu0" / f"{name}.parquet").is_file()
        for f in ("lois.parquet", "summary.json"):
            assert (res / "profiles" / "gpu0" / name / f).is_file()
        assert (res / "logs" / "collect" / f"{name}.log").stat().st_size > 0
    assert not (res / "raw" / "gpu1").exists() and not (res / "profiles" / "combined").exists()
    assert (res / "summary.csv").is_file() and (res / "metrics.parquet").is_file() and (res / "metrics.csv").is_file()
    html = (res / "report" / "index.html").read_text()
    assert "cb-2k-after-mb-4k" in html
    assert not re.search(r"""<(script|link|img)[^>]+(src|href)=["']https?://""", html)
    assert len(list((res / "report").glob("*.png"))) >= 5


def test_ssp_matches_ground_truth_and_sse_differs(tiny_run: Path) -> None:
    res = tiny_run / "results" / "tiny"
    narrow = {r["scenario"]: r for r in read_summary(res / "summary.csv")}
    assert all(len(r) <= 30 for r in narrow.values())  # the simulator's summary.csv: <= 30 columns with its truths
    rows = replayed_columns(res)  # every number (metrics.csv) and the text cells, by scenario
    assert rows.keys() == narrow.keys()
    for name, row in rows.items():
        assert row["valid"] == "true", (name, row["flags"])
        assert abs(float(row["power_vs_truth_pct"])) <= 2.0, (name, row["power_vs_truth_pct"])
        lo, hi = float(row["power_ci_low_w"]), float(row["power_ci_high_w"])
        assert lo <= float(row["power_w"]) <= hi
    # the paper's pattern: the 2K GEMM's SSE is far below its SSP, the 8K GEMM's is close
    assert abs(float(rows["cb-2k"]["sse_reading_vs_ssp_pct"])) > 30
    assert abs(float(rows["cb-8k"]["sse_reading_vs_ssp_pct"])) < 10


def test_margin_change_reruns_only_analysis(tiny_run: Path) -> None:
    """analysis.margin (the binning margin) is an analysis parameter: changing it reruns bin, differentiate
    and report, never collect or calibrate."""
    data = tiny_config(analysis={"margin": 0.03})
    cfg = write_config(tiny_run / "margin.yaml", data)
    proc = snakemake(tiny_run, "--configfile", str(cfg), "--cores", "1", "-n", "--quiet", "rules")
    out = proc.stdout + proc.stderr
    assert "bin" in out and "differentiate" in out and "report" in out
    assert "collect" not in out and "calibrate" not in out


def _recorded_commits(res: Path) -> dict[str, str]:
    """The git commit every analysis output of a tiny sweep records in its provenance, by file."""
    out = {}
    for f in sorted((res / "binned" / "gpu0").glob("*.parquet")) + sorted((res / "profiles" / "gpu0").glob("*/*")):
        prov = json.loads(f.read_text())["provenance"] if f.suffix == ".json" else rawio.read_metadata(f)["provenance"]
        out[str(f.relative_to(res))] = prov["git_commit"]
    return out


def test_a_margin_change_reruns_the_analysis_and_every_job_records_the_checkout_commit(
    tiny_run: Path, tmp_path: Path
) -> None:
    """A real margin re-analysis (not a dry run) redoes bin, differentiate and report and nothing else; the
    workflow finds the checkout's commit once (rules/common.smk) and hands it to every job: each binned file,
    lois.parquet and summary.json records fingrav's checkout commit (not the sweep folder's, which is no git
    checkout here), and a FINGRAV_GIT_COMMIT already set is kept."""
    work = tmp_path / "w"
    shutil.copytree(tiny_run, work, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    res = work / "results" / "tiny"
    raw_before = {p: p.stat().st_mtime_ns for p in (res / "raw").rglob("*") if p.is_file()}
    env = {k: v for k, v in os.environ.items() if k != "FINGRAV_GIT_COMMIT"}
    for margin, given in ((0.03, "commit-given-by-the-caller"), (0.04, None)):
        cfg = write_config(work / f"m{margin}.yaml", tiny_config(analysis={"margin": margin}))
        run_env = {**env, "FINGRAV_GIT_COMMIT": given} if given else env
        proc = run_snakemake(
            ["-s", str(SNAKEFILE), "-d", str(work), "--configfile", str(cfg), "--cores", "2"], env=run_env
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = proc.stdout + proc.stderr
        assert "rule collect" not in out and "rule calibrate" not in out
        commits = _recorded_commits(res)
        assert len(commits) == 3 * 3  # 3 scenarios: binned, lois.parquet, summary.json
        assert set(commits.values()) == {given or git_commit()}, commits
    assert {p: p.stat().st_mtime_ns for p in (res / "raw").rglob("*") if p.is_file()} == raw_before


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d.update(bogus=1), "bogus: unknown key"),
        (lambda d: d["scenarios"][0]["kernel"].update(m=-8), "scenarios['cb-2k'].kernel.m = -8"),
        (lambda d: d["scenarios"][1].update(name="cb-2k"), "duplicate scenario name 'cb-2k'"),
        (lambda d: d["device"].update(backend="cuda"), "device.backend = 'cuda'"),
        (lambda d: d["analysis"].update(margin=0.9), "analysis.margin = 0.9"),
        (lambda d: d["run_policy"].update(margin=0.03), "run_policy.margin: unknown key"),
    ],
)
def test_bad_config_stops_before_any_job(tmp_path: Path, mutate, expected: str) -> None:
    data = tiny_config()
    mutate(data)
    cfg = write_config(tmp_path / "bad.yaml", data)
    proc = snakemake(tmp_path, "--configfile", str(cfg), "--cores", "1", check=False)
    assert proc.returncode != 0
    assert expected in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_replay_reproduces_summary(tiny_run: Path, tmp_path: Path) -> None:
    """The replay backend re-analyzes recorded raw data on a machine without a GPU and gets the same numbers."""
    src = tiny_run / "results" / "tiny"
    rec = tmp_path / "recorded"
    shutil.copytree(src / "raw", rec / "raw")
    data = tiny_config()
    data["device"] = {"backend": "replay", "replay_dir": str(rec)}
    cfg = write_config(tmp_path / "replay.yaml", data)
    snakemake(tmp_path, "--configfile", str(cfg), "--cores", "2")
    orig = {r["scenario"]: r for r in read_summary(src / "summary.csv")}
    again = {r["scenario"]: r for r in read_summary(tmp_path / "results" / "tiny" / "summary.csv")}
    assert orig.keys() == again.keys()
    for name in orig:
        for col in ("power_w", "sse_reading_w", "energy_per_exec_mj", "exec_time_us"):
            a, b = float(orig[name][col]), float(again[name][col])
            assert b == pytest.approx(a, rel=1e-3), (name, col)


def test_every_shipped_config_is_dry_run() -> None:
    assert {
        "config/config.yaml",
        "config/sim-h200.yaml",
        "config/h200.yaml",
        "config/mi300x.yaml",
        "config/h200-replay.yaml",
        "config/sim-attention.yaml",
    } <= set(SHIPPED_CONFIGS)


@pytest.mark.parametrize("config", SHIPPED_CONFIGS)
def test_dry_run_plans_every_sweep(tmp_path: Path, config: str) -> None:
    """Every shipped sweep plans: one calibrate job, one collect per scenario, bin and differentiate per scenario
    and GPU, combine per scenario when the sweep spans several GPUs in lockstep, one report; a sweep over listed
    GPUs one calibrate per GPU, one collect per scenario (a fleet survey: per scenario and GPU, and a fleet job
    per scenario). What the sweep needs beyond its config is checked when it is planned (fingrav.preflight): a GPU
    sweep on a machine without its vendor library, or a replay of a dataset that does not exist, stops the dry run
    with one message saying so."""
    import importlib.util

    data = yaml.safe_load((ROOT / config).read_text())
    device = data.get("device") or {}
    if device.get("backend") == "replay" and (ROOT / device["replay_dir"]).is_dir():  # the committed dataset
        (tmp_path / device["replay_dir"]).parent.mkdir(parents=True)
        (tmp_path / device["replay_dir"]).symlink_to(ROOT / device["replay_dir"])
    (tmp_path / "examples").symlink_to(ROOT / "examples")  # callable targets are found from the working directory
    module = {"nvml": "pynvml", "amdsmi": "amdsmi"}.get(device.get("backend", "sim"))
    if module is not None and importlib.util.find_spec(module) is None:
        proc = snakemake(tmp_path, "--configfile", str(ROOT / config), "-n", "--cores", "1", check=False)
        assert proc.returncode != 0 and f"needs the {module} module" in proc.stdout + proc.stderr
        return
    # a dataset that is not here, or whose raw data are not (results/h200-db2: in a git tag, restored by its
    # replay.sh), stops the dry run with one message naming device.replay_dir
    if device.get("backend") == "replay" and not (ROOT / device["replay_dir"] / "raw").is_dir():
        proc = snakemake(tmp_path, "--configfile", str(ROOT / config), "-n", "--cores", "1", check=False)
        assert proc.returncode != 0 and "device.replay_dir" in proc.stdout + proc.stderr
        return
    proc = snakemake(tmp_path, "--configfile", str(ROOT / config), "-n", "--cores", "1")
    out = proc.stdout + proc.stderr
    assert "extended by additional config" not in out  # nothing is merged into a sweep config given on the line
    assert max(len(line) for line in out.splitlines()) < 1500, max(out.splitlines(), key=len)[:200]
    n = len(load_config(ROOT / config).scenarios)  # grids expanded
    w = int((data.get("device") or {}).get("world_size") or 1)
    rules = r"^(calibrate|collect|bin|differentiate|combine|fleet|report)\s+(\d+)$"
    counts = dict(re.findall(rules, proc.stdout, re.M))
    want = {"calibrate": "1", "collect": str(n), "bin": str(n * w), "differentiate": str(n * w), "report": "1"}
    if w > 1:
        want["combine"] = str(n)
    gpus = len(device.get("gpus") or [])  # listed GPUs: each calibrated; a fleet survey runs everything on each
    if gpus:
        per = n * gpus if device.get("fleet") else n
        want.update(calibrate=str(gpus), collect=str(per), bin=str(per), differentiate=str(per))
        if device.get("fleet"):
            want["fleet"] = str(n)
    assert counts == want


def test_lint_has_no_errors() -> None:
    """`snakemake --lint` finds nothing (at most the conda-environment/container advice: no conda here)."""
    proc = snakemake(ROOT, "--lint", check=False)
    out = proc.stdout + proc.stderr
    lints = re.findall(r"^\s+\* (.+?):?$", out, re.M)
    assert lints or "your workflow is in a good condition" in out, out  # the linter ran
    assert all(lint.startswith("Specify a conda environment or container") for lint in lints), out


def test_a_damaged_summary_keeps_summary_csv_and_says_how_to_rerun(tiny_run: Path, tmp_path: Path) -> None:
    """A truncated summary.json fails the report with one message naming it and `--forcerun differentiate` (a plain
    rerun would fail again: Snakemake takes the file for done), and the last good summary.csv stays."""
    work = tmp_path / "w"
    shutil.copytree(tiny_run, work, symlinks=True, ignore=shutil.ignore_patterns("*.sock"))
    res = work / "results" / "tiny"
    before = (res / "summary.csv").read_text()
    damaged = res / "profiles" / "gpu0" / "cb-8k" / "summary.json"
    damaged.write_text(damaged.read_text()[:200])
    cfg = write_config(work / "tiny.yaml", tiny_config())
    proc = snakemake(work, "--configfile", str(cfg), "--cores", "1", "--forcerun", "report", check=False)
    assert proc.returncode != 0
    log = (res / "logs" / "report.log").read_text()
    assert f"{damaged.relative_to(work)}: not valid JSON" in log and "snakemake --forcerun differentiate" in log
    assert "Traceback" not in log
    assert (res / "summary.csv").read_text() == before
    snakemake(work, "--configfile", str(cfg), "--cores", "1", "--forcerun", "differentiate")
    assert (res / "summary.csv").is_file() and (res / "report" / "index.html").is_file()


def test_job_parameters_travel_in_files_not_on_the_command_line(tmp_path: Path) -> None:
    """A callable's args of 200 KB (past Linux's 131,072-byte limit on one argument; the report's parameters pass
    it beyond ~1,000 scenarios) reach the collect job through its params file (named by their sha256: Snakemake
    tracks its path)."""
    (tmp_path / "kern.py").write_text("def make(**kw):\n    return lambda: None\n")
    data = tiny_config(sweep="big-args", max_runs=40)
    data["scenarios"] = [
        {
            "name": "c",
            "kernel": {"kind": "callable", "target": "kern.py:make", "flops": 1e9, "args": {"blob": "x" * 200_000}},
        }
    ]
    cfg = write_config(tmp_path / "big.yaml", data)
    layout_root = tmp_path / "results" / "big-args"
    target = str((layout_root / "raw" / "gpu0" / "c" / "COLLECTED.json").relative_to(tmp_path))
    proc = snakemake(tmp_path, "--configfile", str(cfg), "--cores", "1", target)
    files = list((tmp_path / ".snakemake" / "fingrav-params").glob("*.json"))
    collect = [json.loads(f.read_text()) for f in files if f.stat().st_size > 200_000]
    assert any(c.get("scenario", {}).get("kernel", {}).get("args", {}).get("blob") == "x" * 200_000 for c in collect)
    assert "Argument list too long" not in proc.stdout + proc.stderr
