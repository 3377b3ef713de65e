"""Stage collect: one scenario's raw data on every GPU of the sweep (METHOD.md steps 1-5).

Writes `raw/gpu<k>/<scenario>/{executions,runs,clock,samples}.parquet` + `plan.json` + `MANIFEST.json`, then the
receipt `COLLECTED.json` and, on the simulator, `truth/gpu<k>/<scenario>.parquet` (`fingrav.layout`). The replay
backend copies the dataset's raw files.

Never loses a measurement: the rule's outputs are the receipts, not the raw files (Snakemake deletes a job's
outputs before it runs and when it fails), and an earlier collection found in the raw folder (complete or not, of
this configuration or another) is moved to `archive/<scenario>-gpu<k>-<UTC time>/` with its plan.json,
provenance and manifest before the GPU measures again (`fingrav.rawio.archive`). A collection that fails halfway
leaves a folder without a receipt, archived by the next run. GPU side: no polars.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.collect.gpu_calibration import calibration_for_gpu
from fingrav.config import CalibrationConfig, DeviceConfig, RunPolicy, Scenario, collection_hash
from fingrav.contracts import FORMAT_VERSION
from fingrav.errors import DataError
from fingrav.gpulock import die_with_parent, gpu_lock
from fingrav.layout import SCENARIO_CALIBRATION, SCENARIO_RAW_FILES, TELEMETRY_FILE, SweepLayout, dataset
from fingrav.preflight import claim_results
from fingrav.stages import typed
from fingrav.stages.calibrate import replay_source

logger = logging.getLogger(__name__)


def run(
    layout: SweepLayout,
    device: DeviceConfig,
    scenario: Scenario,
    policy: RunPolicy,
    seed: int,
    calibration: CalibrationConfig | None = None,
) -> list[Path]:
    """Collect (or, replaying, copy) `scenario` on GPUs 0 .. device.world_size - 1; returns the receipts
    (`SweepLayout.collected`, written last). An earlier collection in the raw folders is moved to the archive
    first, never deleted (module docstring). One GPU: on another GPU than the calibrated one (a scheduler's pick)
    it calibrates this GPU first with `calibration` (`fingrav.collect.gpu_calibration.calibration_for_gpu`)."""
    claim_results(layout, device)  # never into another sweep's results folder
    ranks = range(device.world_size)
    for rank in ranks:  # a receipt stands only for what this run measures
        layout.collected(scenario.name, rank).unlink(missing_ok=True)
    if device.backend == "replay":
        src = dataset(device.replay_dir or "")
        for rank in ranks:
            dst = layout.scenario_dir(scenario.name, rank)
            dst.mkdir(parents=True, exist_ok=True)
            rawio.require_manifest(src.scenario_dir(scenario.name, rank))
            for name in (*SCENARIO_RAW_FILES, rawio.MANIFEST, SCENARIO_CALIBRATION, TELEMETRY_FILE):
                optional = name in (SCENARIO_CALIBRATION, TELEMETRY_FILE)
                if optional and not (src.scenario_dir(scenario.name, rank) / name).exists():
                    continue
                shutil.copyfile(replay_source(device, src.scenario_dir(scenario.name, rank) / name), dst / name)
        return [_write_receipt(layout, scenario.name, rank) for rank in ranks]
    with contextlib.ExitStack() as locks:
        if device.backend != "sim":  # real GPUs: one measurement per GPU at a time, never an orphan
            die_with_parent()
            for k in ranks:
                locks.enter_context(gpu_lock(device.backend, device.index + k))
        want = collection_hash(scenario, policy, seed)
        for rank in ranks:
            d = layout.scenario_dir(scenario.name, rank)
            why = (rawio.collection_state(d, want) if d.is_dir() else None) or MEASURED_AGAIN
            rawio.set_aside(d, layout.archive_dir, layout.archive_name(d, rank), why)
        if device.world_size > 1:
            from fingrav.collect.distributed import collect_distributed

            collect_distributed(device, scenario, policy, seed, layout, calibration=calibration)
        else:
            from fingrav.collect.runner import collect_scenario
            from fingrav.device import open_device

            truth = layout.truth(scenario.name, 0) if device.backend == "sim" else None
            with open_device(device, seed=seed) as dev:
                collect_scenario(
                    dev, scenario, policy, calibration_for_gpu(dev, layout, calibration, seed, scenario.name), seed,
                    layout.scenario_dir(scenario.name, 0), truth,
                    reading_truth_path=layout.reading_truth(scenario.name, 0) if truth is not None else None,
                )  # fmt: skip
    return [_write_receipt(layout, scenario.name, rank) for rank in ranks]


MEASURED_AGAIN = "a complete collection of this configuration, measured again (an input, the code or --forcerun asked)"


def _write_receipt(layout: SweepLayout, name: str, rank: int) -> Path:
    """COLLECTED.json once the raw files and their MANIFEST.json are in place: what the collect rule declares as
    its output (Snakemake deletes a rule's outputs before it reruns it or after it fails; never the raw files)."""
    d = layout.scenario_dir(name, rank)
    if not rawio.verify_manifest(d):
        raise DataError(f"{d}: no {rawio.MANIFEST} after collecting: the collection is incomplete")
    plan = rawio.read_json(d / "plan.json")
    return rawio.write_json(
        layout.collected(name, rank),
        {
            "format_version": FORMAT_VERSION,
            "scenario": name,
            "rank": rank,
            "config_hash": (plan.get("provenance") or {}).get("config_hash"),
            "manifest_sha256": hashlib.sha256((d / rawio.MANIFEST).read_bytes()).hexdigest(),
        },
    )


def from_params(p: dict[str, Any]) -> None:
    """Rule collect: {root, device, scenario, policy, seed, calibration (optional)}."""
    layout = SweepLayout(Path(p["root"]))
    run(
        layout,
        typed(DeviceConfig, p["device"]),
        typed(Scenario, p["scenario"]),
        typed(RunPolicy, p["policy"]),
        p["seed"],
        typed(CalibrationConfig, p["calibration"]) if p.get("calibration") is not None else None,
    )
