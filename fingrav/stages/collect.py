"""Stage collect: one scenario's raw data on every GPU of the sweep (METHOD.md steps 1-5).

Writes `raw/gpu<k>/<scenario>/{executions,runs,clock,samples}.parquet` + `plan.json` and, on the simulator,
`truth/gpu<k>/<scenario>.parquet` (`fingrav.layout`). The replay backend copies the dataset's raw files.
GPU side: no polars.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.config import DeviceConfig, RunPolicy, Scenario
from fingrav.contracts.calibration import Calibration
from fingrav.gpulock import die_with_parent, gpu_lock
from fingrav.layout import SCENARIO_RAW_FILES, SweepLayout, dataset
from fingrav.stages import typed
from fingrav.stages.calibrate import replay_source

logger = logging.getLogger(__name__)


def run(layout: SweepLayout, device: DeviceConfig, scenario: Scenario, policy: RunPolicy, seed: int) -> list[Path]:
    """Collect (or, replaying, copy) `scenario` on GPUs 0 .. device.world_size - 1; returns the raw files."""
    if device.backend == "replay":
        src = dataset(device.replay_dir or "")
        for rank in range(device.world_size):
            dst = layout.scenario_dir(scenario.name, rank)
            dst.mkdir(parents=True, exist_ok=True)
            rawio.verify_manifest(src.scenario_dir(scenario.name, rank))
            for name in (*SCENARIO_RAW_FILES, rawio.MANIFEST):
                if name == rawio.MANIFEST and not (src.scenario_dir(scenario.name, rank) / name).exists():
                    continue
                shutil.copyfile(replay_source(device, src.scenario_dir(scenario.name, rank) / name), dst / name)
    elif device.world_size > 1:
        from fingrav.collect.distributed import collect_distributed

        with contextlib.ExitStack() as locks:
            if device.backend != "sim":
                die_with_parent()
                for k in range(device.world_size):
                    locks.enter_context(gpu_lock(device.backend, device.index + k))
            collect_distributed(device, scenario, policy, seed, layout)
    else:
        from fingrav.collect.runner import collect_scenario
        from fingrav.device import open_device

        truth = layout.truth(scenario.name, 0) if device.backend == "sim" else None
        lock: contextlib.AbstractContextManager = contextlib.nullcontext()
        if device.backend != "sim":  # real GPUs: one measurement per GPU at a time, never an orphan
            die_with_parent()
            lock = gpu_lock(device.backend, device.index)
        with lock, open_device(device, seed=seed) as dev:
            collect_scenario(
                dev, scenario, policy, rawio.read_model(layout.calibration_json(0), Calibration), seed,
                layout.scenario_dir(scenario.name, 0), truth,
            )  # fmt: skip
    return [f for k in range(device.world_size) for f in layout.scenario_files(scenario.name, k)]


def from_params(p: dict[str, Any]) -> None:
    """Rule collect: {root, device, scenario, policy, seed}."""
    layout = SweepLayout(Path(p["root"]))
    run(
        layout,
        typed(DeviceConfig, p["device"]),
        typed(Scenario, p["scenario"]),
        typed(RunPolicy, p["policy"]),
        p["seed"],
    )
