"""The calibration of the GPU a collection actually runs on (GPU side): a scheduler may give a collect job another
GPU than the calibrated one; that GPU is then calibrated first, once per GPU and calibration config, and the
scenario is analyzed with it. Used by the one-GPU collect stage and by every rank of a lockstep group."""

from __future__ import annotations

import logging
import re
from typing import Any

from fingrav import rawio
from fingrav.config import CalibrationConfig, config_hash
from fingrav.contracts.calibration import Calibration
from fingrav.layout import SweepLayout
from fingrav.provenance import gpu_uuid

logger = logging.getLogger(__name__)


def calibrated_gpu(calibration: Calibration) -> str | None:
    """The UUID of the GPU a calibration was measured on (None when its provenance does not say)."""
    return calibration.provenance.measured_gpu_uuid


def calibration_for_gpu(
    dev: Any, layout: SweepLayout, calibration: CalibrationConfig | None, seed: int, scenario: str, rank: int = 0
) -> Calibration:
    """The calibration to collect `scenario` with on the open device `dev` (GPU `rank` of `layout`'s sweep: 0, or a
    rank of a lockstep group): the sweep's (calibration/gpu<rank>.json) when it was measured on this GPU or when a
    UUID is unknown; else this GPU's own (`SweepLayout.calibration_cache`: its UUID and the calibration config
    hash), calibrated now on `dev` when there is none yet, and copied to raw/gpu<rank>/<scenario>/calibration.json
    (`SweepLayout.scenario_calibration`), which differentiate reads instead of the sweep's."""
    from fingrav.collect.calibrate import calibrate

    sweep_cal = rawio.read_model(layout.calibration_json(rank), Calibration)
    here, there = gpu_uuid(dev.describe()), calibrated_gpu(sweep_cal)
    if here is None or there is None or here == there or calibration is None:
        return sweep_cal
    cache = layout.calibration_cache(f"{re.sub(r'[^A-Za-z0-9_.-]', '_', here)}-{config_hash(calibration)}")
    if (cache / CACHED_CALIBRATION).exists():
        result = rawio.read_model(cache / CACHED_CALIBRATION, Calibration)
        logger.info("%s: on GPU %s (calibrated: %s); its calibration from %s", scenario, here, there, cache)
    else:
        logger.warning(
            "%s: on GPU %s, not the calibrated %s: calibrating this GPU first (%s)", scenario, here, there, cache
        )
        result = calibrate(dev, calibration, seed, cache / "raw")
        rawio.write_json(cache / CACHED_CALIBRATION, result)
    rawio.write_json(layout.scenario_calibration(scenario, rank), result)
    return result


CACHED_CALIBRATION = "calibration.json"  # in calibration/by-gpu/<key>/, beside raw/ (that GPU's raw calibration)
