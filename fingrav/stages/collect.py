"""Stage collect: one scenario's raw data on every GPU of the sweep (METHOD.md steps 1-5).

Writes `raw/gpu<k>/<scenario>/{executions,runs,clock,samples}.parquet` + `plan.json` + `MANIFEST.json`, then the
receipt `COLLECTED.json` and, on the simulator, `truth/gpu<k>/<scenario>.parquet` (`fingrav.layout`). The replay
backend copies the dataset's raw files.

Never loses a measurement: the rule's outputs are the receipts, not the raw files (Snakemake deletes a job's
outputs before it runs and when it fails), and an earlier collection found in the raw folder (complete or not, of
this configuration or another) is moved to `archive/<scenario>-gpu<k>-<UTC time>/` with its plan.json,
provenance and manifest before the GPU measures again (`fingrav.rawio.archive`). A collection that fails halfway
leaves a folder without a receipt, archived by the next run. GPU side: no polars.

One device for many scenarios: the Snakemake rule opens the device for its one scenario; `fingrav gpu-sweep` (one
GPU) keeps it open across the sweep's scenarios (`KeptDevice`: on an H200 opening took 1.1-1.3 s of wall time per
scenario, mostly starting the NVML sampler process: results/h200-db3/gpu/sweep.log). Each scenario is measured as
on a newly opened device all the same: the lock, the archive, the calibration check, the collection and the receipt
stay per scenario, and after each one the device releases its kernels and resets its per-open state
(`GPUDevice.reset_for_next_scenario`; the simulator all of it: the same raw data, bit for bit); a scenario that
fails closes the device.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fingrav import rawio
from fingrav.backends import get_backend
from fingrav.collect.gpu_calibration import calibration_for_gpu
from fingrav.config import CalibrationConfig, DeviceConfig, RunPolicy, Scenario, collection_hash
from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.plan import Plan
from fingrav.errors import DataError
from fingrav.gpulock import die_with_parent, gpu_lock
from fingrav.layout import SCENARIO_CALIBRATION, SCENARIO_RAW_FILES, TELEMETRY_FILE, SweepLayout, dataset
from fingrav.preflight import claim_results
from fingrav.stages.calibrate import replay_source
from fingrav.stages.params import CollectParams, parse_params

if TYPE_CHECKING:
    from fingrav.device.base import GPUDevice

logger = logging.getLogger(__name__)


class KeptDevice:
    """One GPU device kept open across the scenarios that one process collects in turn (`fingrav gpu-sweep`), so
    that opening it (torch, the vendor library, the sampler process: 1.1-1.3 s of wall time on an H200) is paid once,
    not per scenario. Opened on first use, inside the first scenario's GPU lock (so its set-up is in that scenario's
    log); between two scenarios it stays open without the lock, sampling stopped, its kernels released. Use it as a
    context manager (closed at the end); `scenario` gives the device for one scenario.

    Only one GPU (device.world_size 1: a lockstep group opens its devices in its own processes,
    `fingrav.collect.distributed`); another device config or seed than the open device's closes it and opens anew.
    `opened`: devices opened so far."""

    def __init__(self) -> None:
        self._dev: GPUDevice | None = None
        self._key: tuple[DeviceConfig, int] | None = None
        self._first: str = ""  # the scenario the open device was opened for
        self.opened = 0

    @contextlib.contextmanager
    def scenario(self, device: DeviceConfig, seed: int, name: str) -> Iterator[GPUDevice]:
        """The device to collect scenario `name` on: the open one (as newly opened, after the previous scenario's
        `GPUDevice.reset_for_next_scenario`), else one opened now. When the scenario ends, the device releases its
        kernels and resets (a failure to do so closes it: the next scenario opens a new one); when the scenario
        fails, the device is closed (it may still be sampling or hold the scenario's kernels) and the error goes
        on, as it would from a device opened for the scenario alone."""
        dev = self._device(device, seed, name)
        dev.begin_scenario(name)
        try:
            yield dev
        except BaseException:
            logger.info("%s failed: closing the device kept open since %s", name, self._first)
            self.close()
            raise
        try:
            dev.reset_for_next_scenario()
        except Exception:
            logger.exception("%s: the device failed to release its kernels and reset: closed (opened anew next)", name)
            self.close()

    def _device(self, device: DeviceConfig, seed: int, name: str) -> GPUDevice:
        """The open device when it is the one `device` and `seed` name, else a newly opened one."""
        from fingrav.device import open_device

        if self._dev is not None and self._key == (device, int(seed)):
            logger.info("%s: on the device kept open since %s (released and reset since)", name, self._first)
            return self._dev
        self.close()
        self._dev = open_device(device, seed=seed)
        self._key, self._first = (device, int(seed)), name
        self.opened += 1
        return self._dev

    def close(self) -> None:
        """Close the open device, if any (idempotent)."""
        dev, self._dev, self._key = self._dev, None, None
        if dev is not None:
            dev.close()

    def __enter__(self) -> KeptDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run(
    layout: SweepLayout,
    device: DeviceConfig,
    scenario: Scenario,
    policy: RunPolicy,
    seed: int,
    calibration: CalibrationConfig | None = None,
    keep: KeptDevice | None = None,
) -> list[Path]:
    """Collect (or, replaying, copy) `scenario` on GPUs 0 .. device.world_size - 1; returns the receipts
    (`SweepLayout.collected`, written last). An earlier collection in the raw folders is moved to the archive
    first, never deleted (module docstring). One GPU: on another GPU than the calibrated one (a scheduler's pick)
    it calibrates this GPU first with `calibration` (`fingrav.collect.gpu_calibration.calibration_for_gpu`);
    `keep`: collect on the device it keeps open across scenarios (`KeptDevice`) instead of opening one for this
    scenario alone (a lockstep group ignores it)."""
    claim_results(layout, device)  # never into another sweep's results folder
    ranks = range(device.world_size)
    for rank in ranks:  # a receipt stands only for what this run measures
        layout.collected(scenario.name, rank).unlink(missing_ok=True)
    if not get_backend(device.backend).collects:
        _copy_dataset(layout, device, scenario.name)
        return [_write_receipt(layout, scenario.name, rank) for rank in ranks]
    with contextlib.ExitStack() as locks:
        if get_backend(device.backend).real_gpu:  # one measurement per GPU at a time, never an orphan
            die_with_parent()
            for k in ranks:
                locks.enter_context(gpu_lock(device.backend, device.index + k))
        _archive_earlier(layout, scenario, policy, seed, ranks)
        _measure(layout, device, scenario, policy, seed, calibration, keep)
    return [_write_receipt(layout, scenario.name, rank) for rank in ranks]


def _copy_dataset(layout: SweepLayout, device: DeviceConfig, name: str) -> None:
    """A replay: the dataset's raw files of `name` (and its manifest, the measuring GPU's calibration and the
    telemetry where there are any) copied into the sweep's raw folders, each verified first."""
    src = dataset(device.replay_dir or "")
    for rank in range(device.world_size):
        dst = layout.scenario_dir(name, rank)
        dst.mkdir(parents=True, exist_ok=True)
        rawio.require_manifest(src.scenario_dir(name, rank))
        for file in (*SCENARIO_RAW_FILES, rawio.MANIFEST, SCENARIO_CALIBRATION, TELEMETRY_FILE):
            optional = file in (SCENARIO_CALIBRATION, TELEMETRY_FILE)
            if optional and not (src.scenario_dir(name, rank) / file).exists():
                continue
            shutil.copyfile(replay_source(device, src.scenario_dir(name, rank) / file), dst / file)


def _archive_earlier(layout: SweepLayout, scenario: Scenario, policy: RunPolicy, seed: int, ranks: range) -> None:
    """An earlier collection in the raw folders goes to the archive (why: `rawio.collection_state`), never lost."""
    want = collection_hash(scenario, policy, seed)
    for rank in ranks:
        d = layout.scenario_dir(scenario.name, rank)
        why = (rawio.collection_state(d, want) if d.is_dir() else None) or MEASURED_AGAIN
        rawio.set_aside(d, layout.archive_dir, layout.archive_name(d, rank), why)


def _measure(
    layout: SweepLayout,
    device: DeviceConfig,
    scenario: Scenario,
    policy: RunPolicy,
    seed: int,
    calibration: CalibrationConfig | None,
    keep: KeptDevice | None = None,
) -> None:
    """Collect on the GPU(s): in lockstep over device.world_size GPUs, else on the one GPU (opened for this
    scenario, or the one `keep` keeps open), calibrating it first when it is not the calibrated one
    (`calibration_for_gpu`)."""
    if device.world_size > 1:
        from fingrav.collect.distributed import collect_distributed

        collect_distributed(device, scenario, policy, seed, layout, calibration=calibration)
        return
    from fingrav.collect.runner import collect_scenario
    from fingrav.device import open_device

    truth = layout.truth(scenario.name, 0) if get_backend(device.backend).truth else None
    opened = keep.scenario(device, seed, scenario.name) if keep is not None else open_device(device, seed=seed)
    with opened as dev:
        if keep is None:  # the kept device began it (`KeptDevice.scenario`)
            dev.begin_scenario(scenario.name)
        collect_scenario(
            dev, scenario, policy, calibration_for_gpu(dev, layout, calibration, seed, scenario.name), seed,
            layout.scenario_dir(scenario.name, 0), truth,
            reading_truth_path=layout.reading_truth(scenario.name, 0) if truth is not None else None,
        )  # fmt: skip


MEASURED_AGAIN = "a complete collection of this configuration, measured again (an input, the code or --forcerun asked)"


def _write_receipt(layout: SweepLayout, name: str, rank: int) -> Path:
    """COLLECTED.json once the raw files and their MANIFEST.json are in place: what the collect rule declares as
    its output (Snakemake deletes a rule's outputs before it reruns it or after it fails; never the raw files)."""
    d = layout.scenario_dir(name, rank)
    if not rawio.verify_manifest(d):
        raise DataError(f"{d}: no {rawio.MANIFEST} after collecting: the collection is incomplete")
    plan = rawio.read_model(d / "plan.json", Plan)
    return rawio.write_json(
        layout.collected(name, rank),
        {
            "format_version": FORMAT_VERSION,
            "scenario": name,
            "rank": rank,
            "config_hash": plan.provenance.config_hash,
            "manifest_sha256": hashlib.sha256((d / rawio.MANIFEST).read_bytes()).hexdigest(),
        },
    )


def from_params(p: dict[str, Any]) -> None:
    """Rule collect (`fingrav.stages.params.CollectParams`)."""
    q = parse_params(CollectParams, p, "collect")
    run(q.layout, q.device, q.scenario, q.policy, q.seed, q.calibration)
