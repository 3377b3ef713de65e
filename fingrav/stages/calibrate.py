"""Stage calibrate: clock synchronization and sensor characterization of every GPU of a sweep.

Writes `calibration/gpu<k>.json` (`fingrav.contracts.calibration.Calibration`) and the raw calibration
data `raw/gpu<k>/calibration/*.parquet` (`fingrav.layout`). The replay backend copies a dataset's raw
calibration data and analyzes it again. The rule declares only the JSON (Snakemake deletes a job's outputs before
it runs and when it fails); an earlier calibration's raw folder is moved to `archive/calibration-gpu<k>-<time>/`
before the GPU is calibrated again (`fingrav.rawio.archive`). GPU side: no polars.

A collect job that finds itself on another GPU than the calibrated one (a scheduler gives every job the GPU it
likes) calibrates the GPU it is on first, once per GPU and calibration config (`collect.gpu_calibration`, cached under
`calibration/by-gpu/<uuid>-<hash>/`): a scenario is always analyzed with the calibration of the GPU that measured it.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.backends import get_backend
from fingrav.config import CalibrationConfig, DeviceConfig
from fingrav.contracts.calibration import Calibration
from fingrav.errors import DataError
from fingrav.gpulock import die_with_parent, gpu_lock
from fingrav.layout import CALIBRATION_RAW_FILES, SweepLayout, dataset
from fingrav.preflight import claim_results
from fingrav.stages.params import CalibrateParams, parse_params

logger = logging.getLogger(__name__)


def replay_source(device: DeviceConfig, path: Path) -> Path:
    """A file of the replayed dataset; DataError when it is missing."""
    if not path.exists():
        raise DataError(f"replay: {path} does not exist (device.replay_dir={device.replay_dir!r})")
    return path


def run(layout: SweepLayout, device: DeviceConfig, calibration: CalibrationConfig, seed: int) -> list[Path]:
    """Calibrate GPUs 0 .. device.world_size - 1; returns the calibration JSON paths."""
    from fingrav.collect.calibrate import analyze_calibration, calibrate

    claim_results(layout, device)  # never into another sweep's results folder
    if not get_backend(device.backend).collects:  # a replay copies the dataset
        src = dataset(device.replay_dir or "")
        out = []
        for rank in range(device.world_size):
            dst = layout.calibration_dir(rank)
            dst.mkdir(parents=True, exist_ok=True)
            rawio.require_manifest(src.calibration_dir(rank))
            for name in (*CALIBRATION_RAW_FILES, rawio.MANIFEST):
                shutil.copyfile(replay_source(device, src.calibration_dir(rank) / name), dst / name)
            out.append(rawio.write_json(layout.calibration_json(rank), analyze_calibration(dst, calibration)))
        return out
    with contextlib.ExitStack() as locks:
        if get_backend(device.backend).real_gpu:  # one measurement per GPU at a time, never an orphan
            die_with_parent()
            for k in range(device.world_size):
                locks.enter_context(gpu_lock(device.backend, device.index + k))
        for k in range(device.world_size):  # an earlier calibration's raw data: to the archive, never deleted
            d = layout.calibration_dir(k)
            rawio.set_aside(d, layout.archive_dir, layout.archive_name(d, k), "calibrated again")
        if device.world_size > 1:
            from fingrav.collect.distributed import calibrate_ranks

            calibrate_ranks(device, calibration, seed, layout)
            return [layout.calibration_json(k) for k in range(device.world_size)]
        from fingrav.device import open_device

        with open_device(device, seed=seed) as dev:
            result: Calibration = calibrate(dev, calibration, seed, layout.calibration_dir(0))
    return [rawio.write_json(layout.calibration_json(0), result)]


def from_params(p: dict[str, Any]) -> None:
    """Rule calibrate (`fingrav.stages.params.CalibrateParams`)."""
    q = parse_params(CalibrateParams, p, "calibrate")
    run(q.layout, q.device, q.calibration, q.seed)
