"""How each GPU (rank) of a multi-GPU sweep opens its device: device index and seed.

GPU-side module (stdlib + pydantic config only). One GPU per rank, rank 0 .. world_size - 1
(`device.world_size`); every rank's files are laid out by `fingrav.layout` (`gpu<k>` folders).
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

RANK_SEED_STRIDE = 1_000_003  # rank k's device seed = seed + k * stride (rank 0: the sweep seed itself)


def rank_seed(seed: int, rank: int) -> int:
    """The device seed of rank k (rank 0: the sweep seed; the simulator also mixes in the device index).
    The collection schedule (delays, run order) always uses the sweep seed, the same on every rank."""
    return int(seed) + int(rank) * RANK_SEED_STRIDE


def rank_device_config(device_cfg: Any, rank: int) -> Any:
    """The `fingrav.config.DeviceConfig` of rank k: device index = device.index + k."""
    return device_cfg.model_copy(update={"index": int(device_cfg.index) + int(rank)})
