"""Committed datasets are never written, by any entry point, in a git clone or without git (`fingrav.guard`)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

from fingrav.cli import main
from fingrav.config import parse_config
from fingrav.errors import ConfigError
from fingrav.guard import DATASET_JSON, check_write, dataset_of, seal_dataset, verify_dataset
from fingrav.preflight import check_sweep

COMMITTED = sorted(p.parent.name for p in (ROOT / "results").glob(f"*/{DATASET_JSON}"))
KERNEL = {"kind": "gemm", "m": 64, "n": 64, "k": 64}


def sweep(name: str, **device: object) -> dict:
    return {"sweep": name, "device": {"backend": "sim", **device}, "scenarios": [{"name": "a", "kernel": KERNEL}]}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A working directory that is no git checkout (a tarball's), with a sealed dataset results/ds/."""
    ds = tmp_path / "results" / "ds"
    (ds / "gpu" / "raw" / "gpu0" / "calibration").mkdir(parents=True)
    (ds / "gpu" / "raw" / "gpu0" / "calibration" / "clock.parquet").write_bytes(b"measured")
    (ds / "summary.csv").write_text("scenario\na\n")
    seal_dataset(ds)
    return tmp_path


def test_the_shipped_datasets_are_sealed_and_intact() -> None:
    assert {"h200", "h200-sustained", "h200-adaptive", "h200-check"} <= set(COMMITTED)
    for name in COMMITTED:
        files = json.loads((ROOT / "results" / name / DATASET_JSON).read_text())["files"]
        assert "summary.csv" in files and any(f.startswith("gpu/") for f in files), name
        assert not any(f.startswith("report/") for f in files), name  # generated: rebuilt by replay.sh
        assert verify_dataset(ROOT / "results" / name) == [], name


def test_a_changed_or_missing_file_is_found_by_its_content(tree: Path) -> None:
    ds = tree / "results" / "ds"
    (ds / "summary.csv").write_text("scenario\nb\n")
    assert verify_dataset(ds) == [f"{ds / 'summary.csv'}: changed (its sha256 differs from {ds / DATASET_JSON})"]
    (ds / "gpu" / "raw" / "gpu0" / "calibration" / "clock.parquet").unlink()
    assert any("missing" in p for p in verify_dataset(ds, under=ds / "gpu"))
    replay = parse_config(sweep("r", backend="replay", replay_dir="results/ds/gpu"))
    with pytest.raises(ConfigError, match="the dataset changed: .*clock.parquet: missing"):
        check_sweep(replay, tree)


@pytest.mark.parametrize("device", [{}, {"backend": "replay", "replay_dir": "results/ds/gpu"}])
def test_a_sweep_named_like_a_dataset_is_refused_without_git(tree: Path, device: dict) -> None:
    with pytest.raises(ConfigError, match=r"sweep = 'ds': .* committed dataset 'ds' \(.*DATASET.json\)"):
        check_sweep(parse_config(sweep("ds", **device)), tree)
    check_sweep(parse_config(sweep("ds-replay", **device)), tree)  # a folder of its own: fine


def test_a_link_or_a_path_into_a_dataset_is_the_dataset(tree: Path) -> None:
    ds = tree / "results" / "ds"
    (tree / "elsewhere").symlink_to(ds)
    assert dataset_of(tree / "elsewhere" / "export" / "x.csv") == ds
    for path in (ds, ds / "report", ds / "summary.csv", tree / "elsewhere"):
        with pytest.raises(ConfigError, match="--out: .* committed dataset 'ds'"):
            check_write(path, "--out")
    check_write(tree / "results" / "other", "--out")


def test_every_committed_dataset_is_refused_in_a_tree_without_git(tmp_path: Path) -> None:
    """What a `git archive` tarball holds (DATASET.json, no .git): every committed dataset's name is refused."""
    for name in COMMITTED:
        (tmp_path / "results" / name).mkdir(parents=True)
        shutil.copyfile(ROOT / "results" / name / DATASET_JSON, tmp_path / "results" / name / DATASET_JSON)
        with pytest.raises(ConfigError, match=f"committed dataset {name!r}"):
            check_sweep(parse_config(sweep(name)), tmp_path)


def test_the_cli_never_writes_a_dataset(tree: Path, monkeypatch, caplog) -> None:
    monkeypatch.chdir(tree)
    cfg = tree / "ds.yaml"
    cfg.write_text(yaml.safe_dump(sweep("ds")))
    before = {p: p.read_bytes() for p in (tree / "results" / "ds").rglob("*") if p.is_file()}
    for argv in (
        ["gpu-sweep", "--config", str(cfg)],
        ["calibrate", "--config", str(cfg)],
        ["collect", "--config", str(cfg)],
        ["gpu-sweep", "--config", str(cfg), "--out", "results/ds/gpu"],
        ["export", "--results", "results/ds", "--format", "json", "--out", "results/ds/summary.csv"],
        ["export", "--results", "results/ds"],
    ):
        caplog.clear()
        assert main(argv) == 2, argv
        assert "committed dataset 'ds'" in caplog.text, argv
    assert {p: p.read_bytes() for p in (tree / "results" / "ds").rglob("*") if p.is_file()} == before


def test_the_api_never_writes_a_dataset(tree: Path) -> None:
    import fingrav

    with pytest.raises(ConfigError, match="results: .* committed dataset 'ds'"):
        fingrav.profile({"kind": "gemm", "m": 64, "n": 64, "k": 64}, results=tree / "results" / "ds")
    assert not (tree / "results" / "ds" / "raw").exists()


def test_a_stage_job_never_writes_a_dataset(tree: Path) -> None:
    from fingrav.stages.job import run_stage

    params = tree / "p.json"
    params.write_text(json.dumps({"root": str(tree / "results" / "ds"), "scenario": "a", "rank": 0}))
    log = tree / "bin.log"
    assert run_stage(["bin", "--log", str(log), "--params-file", str(params)]) == 1
    assert "committed dataset 'ds'" in log.read_text()


def _slimmed() -> tuple[str, ...]:
    """The dataset folders `benchmarks/device_tree.sh slim` keeps from travelling to a GPU machine (its SLIM list)."""
    text = (ROOT / "benchmarks" / "device_tree.sh").read_text()
    m = re.search(r"^SLIM=\(([^)]*)\)", text, re.M)
    assert m, "benchmarks/device_tree.sh has no SLIM=(...) list"
    return tuple(m.group(1).split())


def test_the_tracked_tree_stays_shippable() -> None:
    """Generated reports are not tracked, and what travels to a GPU machine (the tracked tree without the datasets
    `benchmarks/device_tree.sh slim` holds back) stays under 60 MiB: 64 MiB with room for the carried wheels."""
    import subprocess

    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout (a tarball holds only what was committed)")
    files = [f for f in out.stdout.decode().split("\0") if f]
    assert not [f for f in files if re.match(r"results/[^/]+/report/", f)]
    slim = _slimmed()
    assert slim and all((ROOT / p / "DATASET.json").is_file() for p in slim)  # datasets, nothing else held back
    travels = [f for f in files if not any(f.startswith(p + "/") for p in slim)]
    size = sum((ROOT / f).stat().st_size for f in travels if (ROOT / f).is_file())
    assert size < 60 << 20, f"{size / 2**20:.1f} MiB would travel after device_tree.sh slim"


def test_dataset_seal_and_verify_from_the_command_line(tree: Path, caplog) -> None:
    ds = tree / "results" / "ds"
    assert main(["dataset", "verify", str(ds)]) == 0
    (ds / "notes.md").write_text("added later\n")
    assert main(["dataset", "verify", str(ds)]) == 0  # an unlisted file is not the dataset's
    assert main(["dataset", "seal", str(ds), "--description", "a test"]) == 0
    assert "notes.md" in json.loads((ds / DATASET_JSON).read_text())["files"]
    (ds / "notes.md").write_text("changed\n")
    assert main(["dataset", "verify", str(ds)]) == 1 and "notes.md: changed" in caplog.text
