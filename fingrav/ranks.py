"""Where the files of each GPU (rank) of a multi-GPU sweep go, and how each rank's device is opened.

GPU-side module (stdlib + pydantic config only). One GPU per rank, rank 0 .. world_size - 1
(`device.world_size`). Rank 0 keeps the single-GPU layout, so that every stage works on it unchanged;
rank k >= 1 writes the same files one level down:

| what | rank 0 | rank k >= 1 |
|---|---|---|
| calibration | `calibration.json` | `calibration.rank<k>.json` |
| raw calibration | `raw/calibration/*.parquet` | `raw/calibration/rank<k>/*.parquet` |
| raw data | `raw/<scenario>/*` | `raw/<scenario>/rank<k>/*` |
| truth (sim) | `truth/<scenario>.parquet` | `truth/rank<k>/<scenario>.parquet` |
| binned | `binned/<scenario>.parquet` | `binned/rank<k>/<scenario>.parquet` |
| profiles | `profiles/<scenario>/{lois.parquet,summary.json}` | `profiles/<scenario>/rank<k>/{...}` |

`profiles/<scenario>/combined.json` (fingrav.analysis.combine) holds the per-GPU and combined numbers.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

RANK_SEED_STRIDE = 1_000_003  # rank k's device seed = seed + k * stride (rank 0: the sweep seed itself)


def rank_name(rank: int) -> str:
    """"rank<k>" (the folder / suffix of rank k's files)."""
    return f"rank{int(rank)}"


def ranks(world_size: int) -> list[int]:
    """0 .. world_size - 1."""
    return list(range(max(1, int(world_size))))


def rank_raw_dir(raw_dir: str | Path, rank: int) -> Path:
    """raw/<scenario>/ for rank 0, raw/<scenario>/rank<k>/ for rank k (also raw/calibration/)."""
    raw_dir = Path(raw_dir)
    return raw_dir if rank == 0 else raw_dir / rank_name(rank)


def rank_truth_path(truth_path: str | Path | None, rank: int) -> Path | None:
    """truth/<scenario>.parquet for rank 0, truth/rank<k>/<scenario>.parquet for rank k (None stays None)."""
    if truth_path is None:
        return None
    p = Path(truth_path)
    return p if rank == 0 else p.parent / rank_name(rank) / p.name


def rank_calibration_json(calibration_json: str | Path, rank: int) -> Path:
    """calibration.json for rank 0, calibration.rank<k>.json next to it for rank k."""
    p = Path(calibration_json)
    return p if rank == 0 else p.with_name(f"{p.stem}.{rank_name(rank)}{p.suffix}")


def rank_seed(seed: int, rank: int) -> int:
    """The device seed of rank k (rank 0: the sweep seed; the simulator also mixes in the device index).
    The collection schedule (delays, run order) always uses the sweep seed, the same on every rank."""
    return int(seed) + int(rank) * RANK_SEED_STRIDE


def rank_device_config(device_cfg: Any, rank: int) -> Any:
    """The `fingrav.config.DeviceConfig` of rank k: device index = device.index + k."""
    return device_cfg.model_copy(update={"index": int(device_cfg.index) + int(rank)})
