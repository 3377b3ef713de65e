"""Stage collect never loses a measurement: measuring again moves the earlier raw folder (plan.json with its
provenance, MANIFEST.json) to archive/, a collection that fails halfway leaves the earlier one archived and its
own partial folder without a receipt, and Snakemake (which deletes a job's outputs before it runs and when it
fails) only ever sees the receipts. Simulated GPU; calibrating takes a few seconds, so these are slow."""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import snakemake, tiny_config

from fingrav import rawio
from fingrav.config import SweepConfig, collection_hash, parse_config
from fingrav.errors import DataError, DeviceError
from fingrav.layout import COLLECTED, SweepLayout
from fingrav.stages import calibrate, collect

pytestmark = pytest.mark.slow

NAME = "cb-2k"


def _config(**policy: object) -> SweepConfig:
    data = tiny_config(sweep="arch", **{"max_runs": 40, **policy})
    data["scenarios"] = data["scenarios"][:1]
    return parse_config(data)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory) -> SweepLayout:
    layout = SweepLayout(tmp_path_factory.mktemp("cal") / "arch")
    cfg = _config()
    calibrate.run(layout, cfg.device, cfg.calibration, cfg.seed)
    return layout


@pytest.fixture
def layout(calibrated: SweepLayout, tmp_path: Path) -> SweepLayout:
    """A fresh results folder with the module's calibration."""
    dst = SweepLayout(tmp_path / "arch")
    shutil.copytree(calibrated.root, dst.root)
    return dst


def _collect(layout: SweepLayout, cfg: SweepConfig) -> list[Path]:
    return collect.run(layout, cfg.device, cfg.scenario(NAME), cfg.policy_for(NAME), cfg.seed)


def _archived(layout: SweepLayout) -> list[Path]:
    return sorted(layout.archive_dir.glob(f"{NAME}-gpu0-*"))


def test_measuring_again_archives_the_earlier_collection(layout: SweepLayout, caplog) -> None:
    cfg = _config()
    (receipt,) = _collect(layout, cfg)
    assert receipt == layout.collected(NAME, 0) and receipt.name == COLLECTED
    first = json.loads(layout.plan(NAME, 0).read_text())
    assert json.loads(receipt.read_text())["config_hash"] == collection_hash(
        cfg.scenario(NAME), cfg.policy_for(NAME), 3
    )
    # a changed collection parameter: measured again, the earlier collection moved (never deleted)
    other = _config(max_runs=30)
    _collect(layout, other)
    (old,) = _archived(layout)
    assert json.loads((old / "plan.json").read_text()) == first  # with its provenance
    assert rawio.verify_manifest(old)  # and its manifest: the archive is checkable
    assert "collected with another configuration" in caplog.text
    assert layout.collected(NAME, 0).exists()
    # the same config measured again (Snakemake asked: an input or the code changed): archived as well
    _collect(layout, other)
    assert len(_archived(layout)) == 2 and "measured again" in caplog.text


@pytest.mark.parametrize("where", ["runs", "writing"])
def test_a_collection_failing_halfway_loses_nothing(layout: SweepLayout, monkeypatch, where: str) -> None:
    """A fault in the middle of the runs or between two raw files: the earlier collection is in the archive, the
    failed one left no receipt (nothing looks complete), and the next run archives its partial folder too."""
    from fingrav.collect import runner

    cfg = _config()
    _collect(layout, cfg)
    before = json.loads(layout.plan(NAME, 0).read_text())
    calls = {"n": 0}
    if where == "runs":
        target, attr = runner._Recorder, "run"
    else:
        target, attr = rawio, "write_table"
    real = getattr(target, attr)

    def faulty(*args, **kwargs):  # the 2nd run (the reference run, after the timing run) or the 3rd raw file
        calls["n"] += 1
        if calls["n"] == (2 if where == "runs" else 3):
            raise DeviceError("injected fault: the GPU fell off the bus")
        return real(*args, **kwargs)

    monkeypatch.setattr(target, attr, faulty)
    with pytest.raises(DeviceError, match="injected fault"):
        _collect(layout, _config(max_runs=30))
    monkeypatch.undo()
    (old,) = _archived(layout)
    assert json.loads((old / "plan.json").read_text()) == before and rawio.verify_manifest(old)
    d = layout.scenario_dir(NAME, 0)
    assert not layout.collected(NAME, 0).exists()
    assert not (d / rawio.MANIFEST).exists()
    if where == "writing":  # two raw files were written: a partial folder, which the next run archives too
        assert sorted(p.name for p in d.iterdir()) == ["executions.parquet", "runs.parquet"]
    _collect(layout, _config(max_runs=30))
    assert len(_archived(layout)) == (2 if where == "writing" else 1)
    assert rawio.verify_manifest(d) and layout.collected(NAME, 0).exists()


def test_a_receipt_needs_a_complete_collection(layout: SweepLayout) -> None:
    _collect(layout, _config())
    (layout.scenario_dir(NAME, 0) / rawio.MANIFEST).unlink()
    with pytest.raises(DataError, match="incomplete"):
        collect._write_receipt(layout, NAME, 0)


def test_another_sweeps_results_folder_is_refused_by_the_stages(layout: SweepLayout) -> None:
    """raw/OWNER.json says who measured here: a sweep with another backend or GPU neither writes nor archives."""
    from fingrav.errors import ConfigError

    cfg = _config()
    _collect(layout, cfg)
    layout.owner_json.write_text(json.dumps({"backend": "nvml", "index": 0}))
    with pytest.raises(ConfigError, match="belongs to another sweep"):
        _collect(layout, cfg)
    with pytest.raises(ConfigError, match="belongs to another sweep"):
        calibrate.run(layout, cfg.device, cfg.calibration, cfg.seed)
    assert not layout.archive_dir.exists()  # nothing of the other sweep's was moved


# Imported by every Python process of the failing Snakemake run (PYTHONPATH): the collect stage dies halfway.
FAULT = textwrap.dedent(
    """
    from fingrav import rawio
    from fingrav.errors import DeviceError
    _real, _n = rawio.write_table, [0]
    def _faulty(*a, **k):
        _n[0] += 1
        if _n[0] == 3:
            raise DeviceError("injected fault: collect dies halfway")
        return _real(*a, **k)
    rawio.write_table = _faulty
    """
)


def test_snakemake_rerun_and_failed_job_never_delete_raw_data(tmp_path: Path, monkeypatch) -> None:
    """Through Snakemake: a changed collection parameter reruns collect, which fails halfway; Snakemake removes
    the failed job's outputs (the receipt), the earlier raw data is in the archive with its plan.json and
    manifest, and the next run measures again without touching the archive."""
    data = tiny_config(sweep="arch", max_runs=40)
    data["scenarios"] = data["scenarios"][:1]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    layout = SweepLayout(tmp_path / "results" / "arch")
    target = str(layout.collected(NAME, 0).relative_to(tmp_path))
    snakemake(tmp_path, "--configfile", str(cfg), "--cores", "1", target)
    before = json.loads(layout.plan(NAME, 0).read_text())
    data["run_policy"]["max_runs"] = 30  # a collection parameter: collect reruns
    cfg.write_text(yaml.safe_dump(data))
    fault = tmp_path / "fault"
    fault.mkdir()
    (fault / "sitecustomize.py").write_text(FAULT)
    # the fault first; the checkout under test (PYTHONPATH of a worktree) stays importable after it
    orig = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(fault), orig) if p))
    monkeypatch.setenv("FINGRAV_NO_WORKER", "1")
    proc = snakemake(tmp_path, "--configfile", str(cfg), "--cores", "1", target, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "injected fault" in (layout.log("collect", NAME)).read_text(), out
    (old,) = _archived(layout)
    assert json.loads((old / "plan.json").read_text()) == before and rawio.verify_manifest(old)
    assert not layout.collected(NAME, 0).exists()
    if orig:
        monkeypatch.setenv("PYTHONPATH", orig)
    else:
        monkeypatch.delenv("PYTHONPATH")
    snakemake(tmp_path, "--configfile", str(cfg), "--cores", "1", target)
    assert len(_archived(layout)) == 2  # + the failed run's partial folder; the first one untouched
    assert json.loads((old / "plan.json").read_text()) == before and rawio.verify_manifest(old)
    assert rawio.verify_manifest(layout.scenario_dir(NAME, 0))
