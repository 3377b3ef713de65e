"""Stage entry points shared by the Snakemake rules (`rules/*.smk`) and the CLI (`fingrav.cli`).

Each takes only its part of the config as plain JSON-able dicts, so that Snakemake reruns exactly the
stages whose parameters changed. calibrate/collect are GPU-side (no polars import at module level);
bin/differentiate/report import the analysis lazily.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.config import CalibrationConfig, DeviceConfig, RunPolicy, Scenario
from fingrav.errors import DataError

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def logging_to(log_path: str | Path | None, level: int = logging.INFO) -> Iterator[None]:
    """Send fingrav's log records to `log_path` (and stderr) while a stage runs."""
    root = logging.getLogger("fingrav")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    old_level = root.level
    root.setLevel(level)
    for h in handlers:
        h.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()
        root.setLevel(old_level)


def _replay_source(device: DeviceConfig, *parts: str) -> Path:
    src = Path(device.replay_dir or "").joinpath(*parts)
    if not src.exists():
        raise DataError(f"replay: {src} does not exist (device.replay_dir={device.replay_dir!r})")
    return src


def run_calibrate(
    device_params: dict[str, Any],
    calibration_params: dict[str, Any],
    seed: int,
    out_json: str | Path,
    raw_dir: str | Path,
) -> dict[str, Any]:
    """Clock sync + sensor characterization; writes calibration.json and raw/calibration/*.parquet.
    With the replay backend, copies the recorded raw calibration data and re-analyzes it."""
    from fingrav.collect.calibrate import analyze_calibration, calibrate

    device_cfg = DeviceConfig.model_validate(device_params)
    cal_cfg = CalibrationConfig.model_validate(calibration_params)
    raw_dir = Path(raw_dir)
    if device_cfg.world_size > 1:
        return _calibrate_ranks(device_cfg, cal_cfg, seed, Path(out_json), raw_dir)
    if device_cfg.backend == "replay":
        src = _replay_source(device_cfg, "raw", "calibration")
        raw_dir.mkdir(parents=True, exist_ok=True)
        for name in rawio.CALIBRATION_RAW_FILES:
            shutil.copyfile(src / name, raw_dir / name)
        result = analyze_calibration(raw_dir, cal_cfg)
    else:
        from fingrav.device.common import open_device

        with open_device(device_cfg, seed=seed) as dev:
            result = calibrate(dev, cal_cfg, seed, raw_dir)
    rawio.write_json(out_json, result)
    return result


def _calibrate_ranks(
    device_cfg: DeviceConfig, cal_cfg: CalibrationConfig, seed: int, out_json: Path, raw_dir: Path
) -> dict[str, Any]:
    """Every rank's calibration (`fingrav.ranks` layout); returns rank 0's."""
    from fingrav.collect.calibrate import analyze_calibration
    from fingrav.ranks import rank_calibration_json, rank_name, rank_raw_dir

    if device_cfg.backend != "replay":
        from fingrav.collect.distributed import calibrate_ranks

        return calibrate_ranks(device_cfg, cal_cfg, seed, out_json, raw_dir)[0]
    results = []
    for rank in range(device_cfg.world_size):
        parts = ("raw", "calibration") + ((rank_name(rank),) if rank else ())
        src = _replay_source(device_cfg, *parts)
        dst = rank_raw_dir(raw_dir, rank)
        dst.mkdir(parents=True, exist_ok=True)
        for name in rawio.CALIBRATION_RAW_FILES:
            shutil.copyfile(src / name, dst / name)
        result = analyze_calibration(dst, cal_cfg)
        rawio.write_json(rank_calibration_json(out_json, rank), result)
        results.append(result)
    return results[0]


def run_collect(
    device_params: dict[str, Any],
    scenario_params: dict[str, Any],
    policy_params: dict[str, Any],
    seed: int,
    calibration_json: str | Path,
    raw_dir: str | Path,
    truth_path: str | Path | None = None,
) -> None:
    """Collect one scenario's raw data (or copy it, with the replay backend)."""
    from fingrav.collect.runner import collect_scenario

    device_cfg = DeviceConfig.model_validate(device_params)
    scenario = Scenario.model_validate(scenario_params)
    raw_dir = Path(raw_dir)
    if device_cfg.backend == "replay":
        from fingrav.ranks import rank_name, rank_raw_dir

        for rank in range(device_cfg.world_size):  # rank k >= 1: raw/<scenario>/rank<k>/
            src = _replay_source(device_cfg, "raw", scenario.name, *((rank_name(rank),) if rank else ()))
            dst = rank_raw_dir(raw_dir, rank)
            dst.mkdir(parents=True, exist_ok=True)
            for name in rawio.SCENARIO_FILES:
                shutil.copyfile(src / name, dst / name)
        return
    policy = RunPolicy.model_validate(policy_params)
    if device_cfg.world_size > 1:
        from fingrav.collect.distributed import collect_distributed

        collect_distributed(device_cfg, scenario, policy, calibration_json, seed, raw_dir, truth_path)
        return
    calibration = rawio.read_json(calibration_json)
    from fingrav.device.common import open_device

    with open_device(device_cfg, seed=seed) as dev:
        collect_scenario(dev, scenario, policy, calibration, seed, raw_dir, truth_path)
