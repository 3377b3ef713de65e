"""A scenario is analyzed with the calibration of the GPU that measured it: a collect job that a scheduler put on
another GPU than the calibrated one calibrates its GPU first, once per GPU (calibration/by-gpu/<uuid>-<hash>/),
records it in the scenario's raw folder, and differentiate uses it (fingrav.stages.calibrate.calibration_for_gpu).
Simulated cards a few % apart stand for the GPUs; calibrating and collecting take seconds, so these are slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import tiny_config

from fingrav import rawio
from fingrav.collect.gpu_calibration import calibrated_gpu, calibration_for_gpu
from fingrav.config import SweepConfig, config_hash, parse_config
from fingrav.contracts.calibration import Calibration
from fingrav.device import open_device
from fingrav.layout import SweepLayout
from fingrav.stages import bin as bin_stage
from fingrav.stages import calibrate, collect, differentiate

pytestmark = pytest.mark.slow

NAME = "cb-2k"


def _config() -> SweepConfig:
    data = tiny_config(sweep="pergpu", max_runs=60)
    data["device"]["sim"]["card_spread_pct"] = 3.0
    data["scenarios"] = data["scenarios"][:1]
    return parse_config(data)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[SweepLayout, SweepConfig]:
    """A sweep whose calibrate job ran on simulated card 0."""
    cfg = _config()
    layout = SweepLayout(tmp_path_factory.mktemp("pergpu") / "pergpu")
    calibrate.run(layout, cfg.device, cfg.calibration, cfg.seed)
    return layout, cfg


def test_another_gpu_is_calibrated_once_and_recorded(calibrated: tuple[SweepLayout, SweepConfig]) -> None:
    layout, cfg = calibrated
    sweep_cal = rawio.read_model(layout.calibration_json(0), Calibration)
    card0 = calibrated_gpu(sweep_cal)
    with open_device(cfg.device, seed=cfg.seed) as dev:  # the calibrated GPU: its calibration, nothing written
        assert calibration_for_gpu(dev, layout, cfg.calibration, cfg.seed, "other") == sweep_cal
    assert not layout.scenario_calibration("other", 0).exists()

    other = cfg.device.model_copy(update={"index": 1})  # the GPU a scheduler gave the collect job
    with open_device(other, seed=cfg.seed) as dev:
        uuid = dev.describe()["uuid"]
        own = calibration_for_gpu(dev, layout, cfg.calibration, cfg.seed, NAME)
    assert card0 != uuid and calibrated_gpu(own) == uuid
    assert own.sensor["total"].delay_ns != sweep_cal.sensor["total"].delay_ns  # a card of its own
    cache = layout.calibration_cache(f"{uuid}-{config_hash(cfg.calibration)}")
    assert rawio.read_model(cache / "calibration.json", Calibration) == own
    assert rawio.verify_manifest(cache / "raw")  # its raw calibration data is kept, with a manifest
    assert rawio.read_model(layout.scenario_calibration(NAME, 0), Calibration) == own
    stamp = (cache / "calibration.json").stat().st_mtime_ns
    with open_device(other, seed=cfg.seed) as dev:  # the same GPU again: the cached calibration, not a new one
        assert calibration_for_gpu(dev, layout, cfg.calibration, cfg.seed, "cb-8k") == own
    assert (cache / "calibration.json").stat().st_mtime_ns == stamp


def test_differentiate_uses_the_measuring_gpus_calibration(
    calibrated: tuple[SweepLayout, SweepConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The collect stage on another GPU than the calibrated one (the config's index is the same: the scheduler
    chose): the scenario's folder holds that GPU's calibration, in its manifest, and differentiate reads it."""
    import shutil

    import fingrav.device

    layout = SweepLayout(tmp_path / "pergpu")
    shutil.copytree(calibrated[0].root, layout.root)
    cfg = calibrated[1]
    real_open = fingrav.device.open_device
    monkeypatch.setattr(
        fingrav.device, "open_device", lambda device, seed=0: real_open(device.model_copy(update={"index": 1}), seed)
    )
    collect.run(layout, cfg.device, cfg.scenario(NAME), cfg.policy_for(NAME), cfg.seed, cfg.calibration)
    raw = layout.scenario_dir(NAME, 0)
    assert "calibration.json" in json.loads((raw / rawio.MANIFEST).read_text())["files"]
    own = rawio.read_model(layout.scenario_calibration(NAME, 0), Calibration)
    plan = json.loads((raw / "plan.json").read_text())
    assert plan["provenance"]["gpu_uuid"] == calibrated_gpu(own)
    analysis = cfg.analysis
    bin_stage.run(layout, NAME, 0, analysis)
    differentiate.run(layout, NAME, 0, analysis, cfg.calibration.max_clock_residual_us, with_truth=True)
    summary = json.loads(layout.summary_json(NAME, 0).read_text())
    sweep_cal = rawio.read_model(layout.calibration_json(0), Calibration)
    used = summary["sensor"]["delay_correction_ns"]
    assert used == pytest.approx(own.sensor["total"].delay_ns)
    assert used != pytest.approx(sweep_cal.sensor["total"].delay_ns, rel=1e-3)
