"""Collect one scenario on several GPUs at once (device.world_size > 1): one process per GPU, in lockstep.

GPU-side module: stdlib, numpy, pyarrow, pydantic and torch (imported when a collection starts). Needed for
collectives (all-reduce, all-gather), and used for every scenario of a multi-GPU sweep, so that a GEMM
next to the collectives runs on every GPU at once too.

How it works
------------
`collect_distributed` spawns `world_size` processes (torch.multiprocessing, "spawn"), each with
NCCL_NVLS_ENABLE=0, TORCH_SYMM_MEM_DISABLE_MULTICAST=1 and NVSHMEM_DISABLE_NVLS=1 in its environment
(NVLink multicast stays off). Process k:

1. joins a torch.distributed process group (rendezvous through a file): NCCL on GPUs (RCCL in ROCm builds
   of torch), gloo on the simulator (`device.dist_backend` overrides); on GPUs a second, gloo group carries
   the host-side control traffic (barriers, the plan) so that it never puts work on a GPU;
2. opens its own device: index = device.index + k, device seed = `fingrav.ranks.rank_seed(seed, k)` (the
   simulator also mixes the index into its streams), and rank k's calibration (`calibration/gpu<k>.json`);
3. runs `fingrav.collect.runner.collect_scenario` with a `TorchLockstep`: a barrier before every run; rank
   0's timing decides the probe length; rank 0 makes the plan (its timing, the most conservative probe of
   all ranks) and BROADCASTS it (broadcast_object_list), so every rank issues exactly the same executions
   (unequal counts would hang NCCL); delays and the order of SSE/SSP runs come from the sweep seed, the
   same on every rank; at the end the ranks compare their run and execution counts;
4. writes its raw files to raw/gpu<k>/<scenario>/ (`fingrav.layout`), with plan.json recording the rank, its
   own timing and probe (its plan fields are rank 0's).

Every rank's log records are forwarded to the parent's loggers, prefixed with "[rank k]". A rank that
fails makes the whole collection fail (the others are terminated).

On the simulator each rank is an independent SimulatedGPU with its own virtual clocks: a simulated
collective is that GPU's side of the collective from the time and power model alone (nothing makes one rank
wait for another), and the gloo group only keeps the processes in step. It tests the multi-process
machinery; it is not a measurement of a collective.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import logging
import logging.handlers
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.backends import get_backend
from fingrav.collect.gpu_calibration import calibration_for_gpu
from fingrav.config import CalibrationConfig, DeviceConfig, RunPolicy, Scenario, SimOverrides
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.plan import Plan
from fingrav.errors import BackendUnavailableError, DeviceError
from fingrav.layout import SweepLayout
from fingrav.ranks import rank_device_config, rank_seed

logger = logging.getLogger(__name__)

# NVLink multicast (NVLS) off in every rank: NCCL, torch symmetric memory, NVSHMEM
DIST_ENV: dict[str, str] = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}
DEFAULT_TIMEOUT_S = 1800.0


def dist_backend_of(device_cfg: DeviceConfig) -> str:
    """The torch.distributed backend: device.dist_backend, else gloo on the simulator and nccl on GPUs
    (a ROCm build of torch runs RCCL under the name "nccl")."""
    if device_cfg.dist_backend is not None:
        return device_cfg.dist_backend
    reg = get_backend(device_cfg.backend)
    if reg.dist_backend is None:
        raise BackendUnavailableError(f"device.backend = {reg.name!r} runs no torch.distributed group")
    return reg.dist_backend


def import_torch_distributed() -> Any:
    """torch.distributed, or BackendUnavailableError naming what to install."""
    try:
        import torch.distributed as dist
    except ImportError as exc:
        raise BackendUnavailableError(
            f"device.world_size > 1 runs one process per GPU through torch.distributed, and torch is not "
            f"installed ({exc}): on a CPU machine `pip install torch==2.13.0` (the CPU build), on a GPU machine the "
            "torch build of its driver"
        ) from exc
    if not dist.is_available():
        raise BackendUnavailableError("this torch build has no torch.distributed")
    return dist


class TorchLockstep:
    """`fingrav.collect.runner.Lockstep` over torch.distributed (every call is collective).

    group: the process group of the control traffic (gloo); None: the default group."""

    def __init__(self, dist: Any, rank: int, world_size: int, backend: str, group: Any = None) -> None:
        self._dist = dist
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.backend = backend
        self._group = group
        self.barriers = 0

    def barrier(self) -> None:
        """dist.barrier on the control group."""
        self._dist.barrier(group=self._group)
        self.barriers += 1

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` (broadcast_object_list)."""
        box = [obj if self.rank == 0 else None]
        self._dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order (all_gather_object)."""
        out: list[Any] = [None] * self.world_size
        self._dist.all_gather_object(out, obj, group=self._group)
        return out

    def describe(self) -> dict[str, Any]:
        """Rank, world size, backends and the NVLS environment of this process."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "backend": self.backend,
            "control_backend": "gloo",
            "barriers": self.barriers,
            "env": {k: os.environ.get(k) for k in DIST_ENV},
        }


class _RankPrefix(logging.Formatter):
    def __init__(self, rank: int) -> None:
        super().__init__("[rank %(rank)d] %(message)s")
        self.rank = rank

    def format(self, record: logging.LogRecord) -> str:
        record.rank = self.rank
        return super().format(record)


class _Forward(logging.Handler):
    """Parent side: hand a rank's record to the parent's logger of the same name."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger(record.name).handle(record)


def _setup_rank_logging(rank: int, queue: Any, level: int) -> None:
    root = logging.getLogger("fingrav")
    for h in list(root.handlers):
        root.removeHandler(h)
    handler = logging.handlers.QueueHandler(queue)
    handler.setFormatter(_RankPrefix(rank))
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False


def _init_group(dist: Any, backend: str, rank: int, world_size: int, init_file: str, index: int, timeout_s: float):
    """Join the process group; the control group (gloo) for host-side traffic."""
    timeout = _dt.timedelta(seconds=timeout_s)
    kwargs: dict[str, Any] = {}
    if backend == "nccl":
        import torch

        torch.cuda.set_device(index)
        kwargs["device_id"] = torch.device("cuda", index)
    dist.init_process_group(
        backend, init_method=f"file://{init_file}", rank=rank, world_size=world_size, timeout=timeout, **kwargs
    )
    if backend == "gloo":
        return None
    return dist.new_group(backend="gloo", timeout=timeout)


def _rank_main(rank: int, spec: dict[str, Any], init_file: str, queue: Any) -> None:
    """One rank (runs in a spawned process): join the group, open the rank's device, collect in lockstep."""
    os.environ.update(DIST_ENV)
    _setup_rank_logging(rank, queue, int(spec.get("log_level", logging.INFO)))
    log = logging.getLogger(__name__)
    dist = import_torch_distributed()
    from fingrav.collect.runner import collect_scenario
    from fingrav.device import open_device

    world_size = int(spec["world_size"])
    device_cfg = rank_device_config(DeviceConfig.model_validate(spec["device"]), rank)
    sim_override = (spec.get("rank_sim_overrides") or {}).get(rank)
    if sim_override is not None:  # tests / experiments only: a rank with a different simulated GPU
        sim = device_cfg.sim.model_copy(update={"overrides": SimOverrides.model_validate(sim_override)})
        device_cfg = device_cfg.model_copy(update={"sim": sim})
    backend = str(spec["dist_backend"])
    group = _init_group(dist, backend, rank, world_size, init_file, device_cfg.index, float(spec["timeout_s"]))
    sync = TorchLockstep(dist, rank, world_size, backend, group)
    log.info("joined %s group of %d (device index %d)", backend, world_size, device_cfg.index)
    try:
        layout = SweepLayout(Path(spec["root"]))
        name = str(spec["scenario"]["name"])
        truth = layout.truth(name, rank) if get_backend(device_cfg.backend).truth else None
        cal_cfg = CalibrationConfig.model_validate(spec["calibration"]) if spec.get("calibration") else None
        with open_device(device_cfg, seed=rank_seed(int(spec["seed"]), rank)) as dev:
            dev.begin_scenario(name)  # as the one-GPU collect stage does (`GPUDevice.begin_scenario`)
            calibration = calibration_for_gpu(dev, layout, cal_cfg, int(spec["seed"]), name, rank)
            collect_scenario(
                dev,
                Scenario.model_validate(spec["scenario"]),
                RunPolicy.model_validate(spec["policy"]),
                calibration,
                int(spec["seed"]),
                layout.scenario_dir(name, rank),
                truth,
                sync=sync,
                reading_truth_path=layout.reading_truth(name, rank) if truth is not None else None,
            )
        sync.barrier()
    finally:
        dist.destroy_process_group()


def collect_distributed(
    device_cfg: DeviceConfig,
    scenario: Scenario,
    policy: RunPolicy,
    seed: int,
    layout: SweepLayout,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    rank_sim_overrides: Mapping[int, Mapping[str, Any]] | None = None,
    calibration: CalibrationConfig | None = None,
) -> Plan:
    """Collect `scenario` on device.world_size GPUs in lockstep (module docstring) and return rank 0's
    plan.json. Every rank's files follow `layout` (calibration/gpu<k>.json in, raw/gpu<k>/<scenario>/ and
    truth/gpu<k>/<scenario>.parquet out).

    timeout_s: how long a rank waits for the others at any one point (torch.distributed timeout).
    rank_sim_overrides: simulator only, for tests and experiments: {rank: SimOverrides dict} gives that
    rank a differently behaving simulated GPU (e.g. slower executions); the plan is still rank 0's.
    calibration: the sweep's calibration config: a rank that finds itself on another GPU than the one calibrated for
    its rank (a scheduler's pick) calibrates that GPU first (`fingrav.collect.gpu_calibration.calibration_for_gpu`), so
    calibration and collection are always of the same GPU."""
    n = int(device_cfg.world_size)
    if n < 2:
        raise ValueError("collect_distributed needs device.world_size >= 2 (use collect_scenario for one GPU)")
    backend = dist_backend_of(device_cfg)
    import_torch_distributed()
    for rank in range(n):
        cal = layout.calibration_json(rank)
        if not cal.exists():
            raise DeviceError(f"{cal}: missing; calibrate every GPU first (the calibrate stage, world_size {n})")
    spec = {
        "world_size": n,
        "device": device_cfg.model_dump(mode="json"),
        "dist_backend": backend,
        "scenario": scenario.model_dump(mode="json"),
        "policy": policy.model_dump(mode="json"),
        "seed": int(seed),
        "root": str(layout.root),
        "timeout_s": float(timeout_s),
        "rank_sim_overrides": {int(k): dict(v) for k, v in (rank_sim_overrides or {}).items()},
        "calibration": calibration.model_dump(mode="json") if calibration is not None else None,
        "log_level": logging.getLogger("fingrav").getEffectiveLevel(),
    }
    env = ", ".join(f"{k}={v}" for k, v in DIST_ENV.items())
    logger.info("%s: %d ranks over %s (%s)", scenario.name, n, backend, env)
    _spawn_ranks(spec, n, scenario.name)
    return rawio.read_model(layout.plan(scenario.name, 0), Plan)


@contextlib.contextmanager
def _dist_env() -> Iterator[None]:
    """DIST_ENV set in this process while the block runs (spawned processes inherit it from their start)."""
    saved = {k: os.environ.get(k) for k in DIST_ENV}
    os.environ.update(DIST_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _spawn_ranks(spec: dict[str, Any], n: int, name: str) -> None:
    """Run `_rank_main` in `n` spawned processes (their logs forwarded here, a file store to meet in); a rank's
    failure is one DeviceError with its traceback."""
    import torch.multiprocessing as tmp

    ctx = tmp.get_context("spawn")
    queue = ctx.Queue()
    listener = logging.handlers.QueueListener(queue, _Forward(), respect_handler_level=False)
    rendezvous = tempfile.mkdtemp(prefix="fingrav-dist-")
    listener.start()
    try:
        with _dist_env():
            tmp.start_processes(
                _rank_main,
                args=(spec, os.path.join(rendezvous, "store"), queue),
                nprocs=n,
                join=True,
                start_method="spawn",
            )
    except Exception as err:  # ProcessRaisedException / ProcessExitedException: the rank's traceback
        raise DeviceError(f"{name}: multi-GPU collection failed: {err}") from None
    finally:
        listener.stop()
        shutil.rmtree(rendezvous, ignore_errors=True)


def calibrate_ranks(
    device_cfg: DeviceConfig, calibration_cfg: Any, seed: int, layout: SweepLayout
) -> list[Calibration]:
    """Calibrate every rank's GPU, one after the other (the others idle), in this process: rank k's go to
    calibration/gpu<k>.json and raw/gpu<k>/calibration/. No process group is needed. Returns the
    calibrations in rank order."""
    from fingrav.collect.calibrate import calibrate
    from fingrav.device import open_device

    results = []
    for rank in range(int(device_cfg.world_size)):
        cfg = rank_device_config(device_cfg, rank)
        logger.info("calibrating rank %d (device index %d)", rank, cfg.index)
        with open_device(cfg, seed=rank_seed(seed, rank)) as dev:
            result = calibrate(dev, calibration_cfg, seed, layout.calibration_dir(rank))
        rawio.write_json(layout.calibration_json(rank), result)
        results.append(result)
    return results
