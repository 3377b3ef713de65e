"""`fingrav.ranks`: each rank of a lockstep group opens device.index + k with its own device seed."""

from __future__ import annotations

from fingrav.config import DeviceConfig
from fingrav.ranks import RANK_SEED_STRIDE, rank_device_config, rank_seed


def test_rank_seed_and_device() -> None:
    assert rank_seed(7, 0) == 7 and rank_seed(7, 2) == 7 + 2 * RANK_SEED_STRIDE
    assert len({rank_seed(1, k) for k in range(8)}) == 8
    cfg = DeviceConfig(index=2, world_size=4)
    assert [rank_device_config(cfg, k).index for k in range(4)] == [2, 3, 4, 5]
    assert rank_device_config(cfg, 1).world_size == 4 and cfg.index == 2  # a copy
