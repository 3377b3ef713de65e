"""A vendor-neutral GPU device on PyTorch (CUDA and ROCm builds): kernels, GPU stamps, spin, clocks.

GPU-side module: standard library + numpy at import; torch is imported when a device is created
(`BackendUnavailableError` when it is missing or sees no GPU). The power side (channels, sampling,
energy, identity) is a vendor *power source* that `PoweredTorchGPUDevice` composes with the torch device:
`fingrav.device.nvidia.NVMLDevice` (NVMLPower) for NVIDIA, `fingrav.device.amd.AMDSMIDevice` (AMDSMIPower)
for AMD.

How executions are stamped
--------------------------
Every execution is bracketed, on one stream, by two launches of a *stamp kernel* that writes the GPU
clock into a preallocated int64 device buffer at a device-side index (an int32 counter that the kernel
increments, so no host sync and no host-side index are needed). ``execute`` enqueues all segments back
to back, copies the stamps (and the counter, as a check) to pinned host memory, and synchronizes ONCE.

Launch modes
------------
* ``"graph"`` (default on CUDA): each kernel's executions are replayed from CUDA graphs captured once
  and cached per kernel: a chunk of ``chunk`` executions (a multiple of the number of input sets, ~256)
  replayed as often as needed, then binary pieces (1, 2, 4, ...) for the rest, each captured for its
  input-set offset. Because stamps land at the device counter, a graph is position-independent. Replays
  cost the host ~10 us per graph instead of ~10-30 us per *execution*, so even a 3 us GEMV runs back to
  back instead of waiting for the CPU; between two executions the GPU runs exactly what stream mode
  would (two stamp kernels). Capture itself synchronizes, so graphs are captured *before* a call's work
  is enqueued (the first call with a new count takes a few ms longer on the host, never on the GPU).
* ``"stream"``: plain launches from Python. Used when capture fails (logged), and selectable.

Attention and user kernels
--------------------------
``prepare`` of an AttentionKernel allocates random q, k, v input sets (rotated like a GEMM's) and launches
``torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)``; the warm-up execution runs once
under the profiler to record which SDPA backend torch chose (`fingrav.device.sdpa`; the handle's ``describe()``,
which the collect stage writes into the plan's provenance). A CallableKernel's factory (`fingrav.device.callables`)
is called with this device current and this device's stream current; the function it returns is launched like
any kernel (graph-captured when it can be). A capture failure switches the device to stream launches and is
recorded (``describe()``: ``launch_mode`` "stream", ``graph_capture_error``).

Input sets
----------
``prepare`` allocates random inputs (``torch.randn``, seeded; never zeros) in the kernel's dtype and a
preallocated output (``torch.matmul(..., out=...)``). When one input set is smaller than
``l2_rotation_factor`` x the L2 size (``get_device_properties().L2_cache_size``), several sets are
allocated (enough to cover that footprint, within a quarter of free memory, at most 64) and executions
rotate through them, so that no execution finds its inputs in L2 left by the previous one. Every kernel gets at
least ``min_input_sets`` (`fingrav.device.base.PLACEMENT_SETS`, 4) sets: where its inputs sit in memory moves a
memory-bound kernel's execution time, by 0.3-0.6 % (sd) from one preparation to the next on an H200 and up to
1.2 %, reproducibly within a preparation; rotating through four separately allocated sets averages four placements
and halved that spread without moving the mean (results/h200-card-state), as a model's layers, each with its own
weights, do. The sets a kernel got are in its provenance (``describe()["input_sets"]``); the analysis measures the
spread between them (`fingrav.analysis.placement`).

Collectives (all-reduce, all-gather across GPUs; one process per GPU)
--------------------------------------------------------------------
``prepare`` of a ``fingrav.config`` AllReduceKernel / AllGatherKernel needs ``torch.distributed`` already
initialized by the caller (``fingrav.collect.distributed``: NCCL, RCCL on ROCm) with this device as the
process's current device, and must be called on every rank in the same order (it runs one warm-up
collective). All-reduce: in place on a random ``size_bytes`` buffer (``ReduceOp.AVG`` on NCCL so that
repeated executions stay finite, SUM elsewhere); all-gather: ``all_gather_into_tensor`` of a random
``size_bytes / world_size`` input into a ``size_bytes`` output. Each execution is bracketed by the same
two stamps as a GEMM, on this device's stream: the NCCL kernel runs on NCCL's internal stream, which waits
for the first stamp, and the second stamp waits for the collective's end (the work is synchronous,
``async_op=False``), so an execution's duration includes the two cross-stream event waits (a few us).
Collectives are launched as plain stream launches unless ``collective_graphs`` (env
``FINGRAV_COLLECTIVE_GRAPHS=1``) asks to capture them in CUDA graphs too: a latency-bound collective is
then limited by the host's launch rate (~10-20 us per collective call), noted in ``describe()``.
THIS PATH HAS NOT RUN ON GPUS YET (written without GPU access; tested only against a fake torch).

Vendor hooks (override in a subclass: NVIDIA plugs ``%globaltimer`` in here, AMD ``s_memrealtime``)
-------------------------------------------------------------------------------------------------
``_make_stamper`` and ``_make_spinner`` are called from ``TorchGPUDevice.__init__`` (torch is set up,
``self.index`` / ``self.device`` / ``self.props`` exist): set whatever else they need before calling
``super().__init__``.

* ``_make_stamper() -> Stamper``: an object with ``name: str``, ``stamp(buf, counter)`` (enqueue on
  torch's *current* stream one kernel that writes the raw GPU clock to ``buf[counter]`` (int64) and
  increments ``counter`` (int32, one element) atomically, without host sync; it must be capturable in a
  CUDA/HIP graph) and ``to_ns(raw: np.ndarray) -> np.ndarray`` (raw ticks -> ns, e.g. x10 for a 100 MHz
  ``s_memrealtime``). Built by `fingrav.device.kernels` from the vendor's `TimerSpec`
  (``fingrav.device.nvidia.timestamp`` / ``fingrav.device.amd.timestamp``); the default raises
  BackendUnavailableError.
* ``_make_spinner() -> Spinner``: ``name: str``, ``launch(t0, duration_ns)`` (enqueue a full-chip
  constant load that runs until the GPU clock passes ``t0[0] + duration`` where ``t0[0]`` is a raw
  stamp the stamper wrote just before on the same stream). The default raises BackendUnavailableError.
* ``host_time_ns()``: the host clock the power samples are stamped with (CLOCK_MONOTONIC, `fingrav.device.hostclock`;
  not the wall clock, which an NTP step can move under a collection).
* the power side: a `PowerSource` set as ``self.power`` in a `PoweredTorchGPUDevice` subclass, which
  delegates ``channels``, ``describe`` (torch part + power part), ``start_sampling`` / ``drain_samples`` /
  ``stop_sampling``, ``energy_mj`` and ``close`` to it.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from fingrav.device.base import (
    PLACEMENT_SETS,
    ClockReads,
    ClockTelemetry,
    ExecRecords,
    GPUDevice,
    KernelHandle,
    PowerSamples,
)
from fingrav.device.hostclock import host_ns
from fingrav.errors import BackendUnavailableError, DeviceError
from fingrav.kinds import DTYPE_BYTES, kind_of

logger = logging.getLogger(__name__)

DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
ELEMENT_BYTES = DTYPE_BYTES  # one home: fingrav.kinds
MAX_INPUT_SETS = 64
GRAPH_CHUNK = 256  # target executions per chunk graph
SLEEP_SPIN_NS = 200_000  # sleep_ns busy-waits the last 200 us for accuracy
TORCH_HINT = (
    "install the PyTorch build for your GPU (CUDA or ROCm) following pytorch.org; fingrav does not pin "
    "a GPU torch (an unpinned 'pip install torch' pulls a multi-GB CUDA build)"
)


def import_torch() -> Any:
    """Import torch; BackendUnavailableError (with the install hint) when it is missing."""
    try:
        import torch
    except ImportError as exc:
        raise BackendUnavailableError(
            f"GPU backends need PyTorch, which is not installed ({exc}); {TORCH_HINT}"
        ) from exc
    return torch


# --------------------------------------------------------------------------- pure helpers (tested without torch)
def input_sets_needed(
    set_bytes: int,
    l2_bytes: int,
    factor: float = 2.0,
    max_sets: int = MAX_INPUT_SETS,
    budget_bytes: int | None = None,
    min_sets: int = 1,
) -> int:
    """Input sets to rotate through so that their footprint covers `factor` x L2 (1 when one set does), and at
    least `min_sets` (placements averaged over: module docstring, "Input sets").

    `budget_bytes`: memory the sets may take in all (the count is cut to fit, never below 1)."""
    n = max(1, int(min_sets))
    if set_bytes > 0 and l2_bytes > 0 and factor > 0 and set_bytes < factor * l2_bytes:
        n = max(n, int(math.ceil(factor * l2_bytes / set_bytes)))
    n = min(n, max_sets)
    if budget_bytes is not None and set_bytes > 0:
        n = min(n, max(1, int(budget_bytes // set_bytes)))
    return max(1, n)


def chunk_size(n_sets: int, target: int = GRAPH_CHUNK) -> int:
    """Executions per chunk graph: a multiple of `n_sets` near `target`, so rotation stays seamless."""
    n_sets = max(1, n_sets)
    return n_sets * max(1, int(math.ceil(target / n_sets)))


def plan_pieces(count: int, chunk: int, n_sets: int) -> list[tuple[int, int]]:
    """Split `count` executions into graph pieces (size, input-set offset): full chunks first, then the
    binary decomposition of the rest, largest first. Execution j of the segment uses set j % n_sets."""
    if count < 0 or chunk <= 0:
        raise ValueError(f"count={count}, chunk={chunk}")
    n_sets = max(1, n_sets)
    q, r = divmod(count, chunk)
    pieces = [(chunk, (i * chunk) % n_sets) for i in range(q)]
    done = q * chunk
    bit = 1 << max(r.bit_length() - 1, 0)
    while r:
        if r & bit:
            pieces.append((bit, done % n_sets))
            done += bit
            r -= bit
        bit >>= 1
    return pieces


def _part_size(h: Any, count: int, part: int | None, adaptive: bool) -> int:
    """Executions per part of an unstamped run of `count` (`TorchGPUDevice.run_unstamped`): `part` (else all of
    them), at most half of `count` when the run is adaptive, rounded up to whole graph chunks (every part replays the
    same cached graphs) or, for a part shorter than one chunk (a long kernel), to whole rounds of the input sets, so
    that the rotation stays seamless across parts."""
    size = count if part is None else max(1, int(part))
    if adaptive:
        size = min(size, max(1, -(-count // 2)))
    if adaptive or part is not None:
        unit = h.chunk if size >= h.chunk else max(1, h.n_sets)
        size = -(-size // unit) * unit
    return size


def _torch_with_gpu(index: int) -> Any:
    """torch, when it sees GPU `index` (else BackendUnavailableError saying why not)."""
    torch = import_torch()
    if not torch.cuda.is_available():
        raise BackendUnavailableError(
            f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False: a CPU-only build, no "
            "driver, or CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES hides every GPU)"
        )
    count = torch.cuda.device_count()
    if not 0 <= index < count:
        raise BackendUnavailableError(f"GPU index {index} does not exist (torch sees {count} GPU(s))")
    return torch


def kernel_sizes(kernel: Any) -> dict[str, Any]:
    """Shapes, bytes and flops of a `fingrav.config` GEMM/GEMV kernel model (duck-typed on `.kind`)."""
    kind = getattr(kernel, "kind", None)
    dtype = getattr(kernel, "dtype", "bf16")
    if dtype not in ELEMENT_BYTES:
        raise DeviceError(f"unsupported dtype {dtype!r} (one of {sorted(ELEMENT_BYTES)})")
    e = ELEMENT_BYTES[dtype]
    if kind == "gemm":
        m, n, k = int(kernel.m), int(kernel.n), int(kernel.k)
        return {
            "kind": kind,
            "dtype": dtype,
            "a": (m, k),
            "b": (k, n),
            "out": (m, n),
            "flops": int(kernel.work().flop),  # the work model's (fingrav.config.GemmKernel.work): one formula
            "set_bytes": (m * k + k * n) * e,
            "bytes": int(kernel.work().bytes),
        }
    if kind == "gemv":
        m, k = int(kernel.m), int(kernel.k)
        return {
            "kind": kind,
            "dtype": dtype,
            "a": (m, k),
            "b": (k,),
            "out": (m,),
            "flops": int(kernel.work().flop),  # fingrav.config.GemvKernel.work
            "set_bytes": (m * k + k) * e,
            "bytes": int(kernel.work().bytes),
        }
    if kind_of(kernel, DeviceError).collective:
        return collective_sizes(kernel, 1)
    if kind == "attention":
        from fingrav.device.sdpa import attention_sizes

        return attention_sizes(kernel, e)
    raise DeviceError(
        f"the torch backend cannot run kernel kind {kind!r} (gemm, gemv, attention, callable, allreduce, allgather)"
    )


def collective_sizes(kernel: Any, world_size: int) -> dict[str, Any]:
    """Buffer shapes (elements) and bytes of a `fingrav.config` AllReduceKernel / AllGatherKernel on a group
    of `world_size` GPUs: all-reduce reduces a `size_bytes` buffer in place; all-gather gathers
    size_bytes / world_size bytes from every rank into a `size_bytes` output."""
    kind = getattr(kernel, "kind", None)
    dtype = getattr(kernel, "dtype", "bf16")
    if not kind_of(kernel, DeviceError).collective:
        raise DeviceError(f"not a collective: kind {kind!r}")
    if dtype not in ELEMENT_BYTES:
        raise DeviceError(f"unsupported dtype {dtype!r} (one of {sorted(ELEMENT_BYTES)})")
    e = ELEMENT_BYTES[dtype]
    size = int(kernel.size_bytes)
    n = max(1, int(world_size))
    if size % e:
        raise DeviceError(f"{kind}: size_bytes={size} is not a whole number of {dtype} elements")
    elements = size // e
    if kind == "allreduce":
        return {
            "kind": kind,
            "dtype": dtype,
            "a": (elements,),
            "b": None,
            "out": (elements,),
            "flops": 0,
            "set_bytes": size,
            "bytes": size,
            "world_size": n,
        }
    if elements % n:
        raise DeviceError(f"allgather: {elements} elements do not split into {n} equal parts")
    return {
        "kind": kind,
        "dtype": dtype,
        "a": (elements // n,),
        "b": None,
        "out": (elements,),
        "flops": 0,
        "set_bytes": size // n,
        "bytes": size,
        "world_size": n,
    }


def _collective_call(dist: Any, kind: str, backend: str) -> Callable[[Any, Any], None]:
    """One execution of a collective on (input, output): an in-place all-reduce (AVG on NCCL, so that repeated
    executions stay finite; SUM elsewhere) or an all-gather into the output."""
    if kind == "allreduce":
        op = dist.ReduceOp.AVG if backend == "nccl" else dist.ReduceOp.SUM

        def all_reduce(a: Any, _out: Any) -> None:
            dist.all_reduce(a, op=op)

        return all_reduce

    def all_gather(a: Any, o: Any) -> None:
        dist.all_gather_into_tensor(o, a)

    return all_gather


# --------------------------------------------------------------------------- hooks' protocols
class Stamper(Protocol):
    name: str

    def stamp(self, buf: Any, counter: Any) -> None: ...

    def to_ns(self, raw: np.ndarray) -> np.ndarray: ...


class Spinner(Protocol):
    name: str

    def launch(self, t0: Any, duration_ns: int) -> None: ...


class PowerSource(Protocol):
    """The power side of a GPU (NVMLPower, AMDSMIPower): no torch. Units: ns, mW, mJ."""

    @property
    def channels(self) -> tuple[str, ...]: ...

    def describe(self) -> dict[str, Any]: ...

    def start_sampling(self) -> None: ...

    def drain_samples(self) -> PowerSamples: ...

    def stop_sampling(self) -> PowerSamples: ...

    def energy_mj(self) -> float | None: ...

    def close(self) -> None: ...


@dataclass(eq=False)
class TorchKernel(KernelHandle):
    """A prepared GEMM/GEMV: input sets on the GPU, the output, and its cached CUDA graphs."""

    label: str
    kernel: Any
    sizes: dict[str, Any]
    sets: list[tuple[Any, Any]]
    out: Any
    chunk: int
    owner: int
    matmul: Any
    graphs: dict[tuple[int, int, bool, int], Any] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_sets(self) -> int:
        return len(self.sets)

    def describe(self) -> dict[str, Any]:
        """The label, input sets and what `prepare` found out (e.g. the SDPA backend), for provenance."""
        return {"label": self.label, "input_sets": self.n_sets, **self.info}

    def launch(self, i: int) -> None:
        """Enqueue execution `i` (input set i % n_sets) on the current stream."""
        a, b = self.sets[i % len(self.sets)]
        self.matmul(a, b, out=self.out)


@dataclass(eq=False)
class TorchAttention(TorchKernel):
    """A prepared attention: input sets (q, k, v) rotated like a GEMM's; `sdpa` is
    torch.nn.functional.scaled_dot_product_attention (the output is allocated by each call: SDPA has no out=)."""

    causal: bool = False

    def launch(self, i: int) -> None:
        """Enqueue execution `i` (input set i % n_sets) on the current stream."""
        q, k, v = self.sets[i % len(self.sets)]
        self.matmul(q, k, v, is_causal=self.causal)


@dataclass(eq=False)
class TorchCallable(TorchKernel):
    """A prepared user kernel: `fn()` (the factory's launch function) enqueues one execution on the current
    stream; one "input set" (the factory owns its inputs)."""

    fn: Any = None

    def launch(self, i: int) -> None:
        """Enqueue one execution (the factory's launch function)."""
        self.fn()


@dataclass(eq=False)
class TorchCollective(TorchKernel):
    """A prepared all-reduce / all-gather over torch.distributed: one buffer set (`sets[0]` = (input,
    None); `out` = the all-gather output, the input itself for all-reduce). `collective(input, out)`
    enqueues one collective on the current stream (synchronous work: the stream waits for its end)."""

    collective: Any = None

    def launch(self, i: int) -> None:
        """Enqueue one collective (every execution uses the same buffers)."""
        self.collective(self.sets[0][0], self.out)


class TorchGPUDevice(GPUDevice):
    """GPU work through PyTorch on one device (CUDA or ROCm); the power side is left to subclasses.

    index: torch device index; launch_mode: "graph" or "stream" (module docstring); seed: of the random
    inputs; l2_rotation_factor: input sets cover this x L2; min_input_sets: at least this many input sets (placements
    averaged over, module docstring "Input sets"); timestamp_impl: "auto" | "triton" | "cupy"
    for the NVIDIA kernels; stamp_capacity: initial size of the stamp buffer (grows as needed).

    Hooks for vendor subclasses (see the module docstring for their contracts): `_make_stamper`,
    `_make_spinner`, `host_time_ns`, and the power side (`channels`, `describe` via super,
    `start_sampling`, `drain_samples`, `stop_sampling`, `energy_mj`, `close` via super).
    """

    unstamped_runs = True

    backend = "torch"

    def __init__(
        self,
        index: int = 0,
        *,
        launch_mode: Literal["graph", "stream"] = "graph",
        seed: int = 0,
        l2_rotation_factor: float = 2.0,
        timestamp_impl: str = "auto",
        stamp_capacity: int = 1 << 16,
        min_input_sets: int = PLACEMENT_SETS,
    ) -> None:
        if launch_mode not in ("graph", "stream"):
            raise ValueError(f"launch_mode={launch_mode!r}: 'graph' or 'stream'")
        torch = _torch_with_gpu(index)
        self._torch = torch
        self.index = int(index)
        self.device = torch.device("cuda", self.index)
        self.props = torch.cuda.get_device_properties(self.index)
        self.launch_mode = launch_mode
        self.seed = int(seed)
        self.l2_rotation_factor = float(l2_rotation_factor)
        self.min_input_sets = max(1, int(min_input_sets))
        self.timestamp_impl = timestamp_impl
        self._generation = 0
        self._n_prepared = 0
        self._opened_launch_mode = launch_mode  # what `reset_for_next_scenario` goes back to
        self.graph_capture_error: str | None = None  # why capture failed, when it did (launch_mode -> "stream")
        self._closed = False
        self._prepared: weakref.WeakSet[TorchKernel] = weakref.WeakSet()  # live handles (`release_kernels`)
        with torch.cuda.device(self.index):
            self._stream = torch.cuda.Stream(device=self.device)
            self._capacity = 0
            self._ensure_capacity(int(stamp_capacity))
            self._counter = torch.zeros(1, dtype=torch.int32, device=self.device)
            self._host_counter = torch.zeros(1, dtype=torch.int32, pin_memory=True)
            self._stamper: Stamper = self._make_stamper()
            self._spinner: Spinner = self._make_spinner()
        self._series_graphs: dict[tuple[int, int], Any] = {}
        self.collective_graphs = os.environ.get("FINGRAV_COLLECTIVE_GRAPHS", "0") == "1"
        logger.info(
            "torch device %d: %s, %d SMs, L2 %.0f MB, stamps by %s, %s launches",
            self.index,
            self.props.name,
            self.props.multi_processor_count,
            self.l2_bytes / 2**20,
            self._stamper.name,
            self.launch_mode,
        )

    # -- hooks ------------------------------------------------------------------------------
    @property
    def is_rocm(self) -> bool:
        return getattr(self._torch.version, "hip", None) is not None

    def _make_stamper(self) -> Stamper:
        """The GPU-timestamp kernel (hook): vendor subclasses provide it (NVIDIA %globaltimer,
        AMD s_memrealtime)."""
        raise BackendUnavailableError(f"{type(self).__name__} needs a vendor subclass that provides _make_stamper()")

    def _make_spinner(self) -> Spinner:
        """The constant-load kernel (hook): vendor subclasses provide it."""
        raise BackendUnavailableError(f"{type(self).__name__} needs a vendor subclass that provides _make_spinner()")

    @property
    def stamper(self) -> Stamper:
        return self._stamper

    @stamper.setter
    def stamper(self, stamper: Stamper) -> None:
        """Swap the stamp kernel (benchmarks compare implementations); cached graphs are dropped."""
        self._stamper = stamper
        self._invalidate_graphs()

    @property
    def spinner(self) -> Spinner:
        return self._spinner

    def host_time_ns(self) -> int:
        """The host clock (`fingrav.device.hostclock.host_ns`: CLOCK_MONOTONIC, never stepped); the power sources
        stamp their samples on it (NVML's wall-clock stamps are converted, `fingrav.device.hostclock.WallClock`)."""
        return host_ns()

    # -- identity ---------------------------------------------------------------------------
    @property
    def l2_bytes(self) -> int:
        return int(getattr(self.props, "L2_cache_size", 0) or 0)

    def gpu_uuid(self) -> str | None:
        """The device's UUID as torch reports it ('xxxxxxxx-xxxx-...'), or None."""
        raw = getattr(self.props, "uuid", None)
        if raw is None:
            return None
        data = getattr(raw, "bytes", None)
        if data is not None and len(bytes(data)) == 16:
            import uuid as _uuid

            return str(_uuid.UUID(bytes=bytes(data)))
        text = str(raw).strip()
        return text or None

    def describe(self) -> dict[str, Any]:
        """Torch-side identity: versions, device properties, stamping and launch settings."""
        torch = self._torch
        p = self.props
        return {
            "torch_index": self.index,
            "torch_name": p.name,
            "torch_version": torch.__version__,
            "torch_cuda": getattr(torch.version, "cuda", None),
            "torch_hip": getattr(torch.version, "hip", None),
            "compute_capability": f"{getattr(p, 'major', '?')}.{getattr(p, 'minor', '?')}",
            "sm_count": int(p.multi_processor_count),
            "l2_bytes": self.l2_bytes,
            "total_memory_bytes": int(p.total_memory),
            "gpu_uuid_torch": self.gpu_uuid(),
            "stamp_kernel": self._stamper.name,
            "spin_kernel": self._spinner.name,
            "launch_mode": self.launch_mode,
            "graph_capture_error": self.graph_capture_error,
            "l2_rotation_factor": self.l2_rotation_factor,
            "collective_launch_mode": "graph" if self.collective_graphs and self.launch_mode == "graph" else "stream",
            "allow_tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        }

    # -- buffers and streams ----------------------------------------------------------------
    @contextlib.contextmanager
    def _on_stream(self) -> Iterator[None]:
        torch = self._torch
        with torch.cuda.device(self.index), torch.cuda.stream(self._stream):
            yield

    def _ensure_capacity(self, slots: int) -> None:
        """Make the stamp buffers hold `slots` stamps (power-of-two growth; drops cached graphs)."""
        if slots <= self._capacity:
            return
        torch = self._torch
        cap = 1 << max(10, int(slots - 1).bit_length())
        self._stream.synchronize()
        self._buf = torch.zeros(cap, dtype=torch.int64, device=self.device)
        self._host_buf = torch.zeros(cap, dtype=torch.int64, pin_memory=True)
        self._capacity = cap
        self._invalidate_graphs()

    def _invalidate_graphs(self) -> None:
        self._generation += 1
        if hasattr(self, "_series_graphs"):
            self._series_graphs.clear()

    def _fetch(self, n: int) -> np.ndarray:
        """Enqueue the copy of `n` stamps and of the counter to pinned memory, synchronize once, check
        that exactly `n` stamps were written, and return them in ns."""
        with self._on_stream():
            self._host_counter.copy_(self._counter, non_blocking=True)
            if n:
                self._host_buf[:n].copy_(self._buf[:n], non_blocking=True)
        self._stream.synchronize()
        written = int(self._host_counter[0])
        if written != n:
            raise DeviceError(f"GPU stamps: {written} written where {n} were expected")
        return self._stamper.to_ns(self._host_buf[:n].numpy().copy())

    # -- work -------------------------------------------------------------------------------
    def prepare(self, kernel: Any) -> TorchKernel:
        """Allocate and warm up a `fingrav.config` kernel model with the method its kind's registry entry names
        (`fingrav.kinds.KernelKind.torch_prepare`)."""
        prepare: Callable[[Any], TorchKernel] = getattr(self, kind_of(kernel, DeviceError).torch_prepare)
        handle = prepare(kernel)
        if isinstance(handle, TorchKernel):  # every kind's handle is one (`release_kernels` frees them)
            self._prepared.add(handle)
        return handle

    def release_kernels(self) -> None:
        """Free every kernel prepared on this device (`GPUDevice.release_kernels`): wait for the stream, drop each
        live handle's input sets, output, CUDA graphs and launch function (a handle still referenced somewhere holds
        no GPU memory any more, and `_check_handle` refuses it), collect the garbage and hand torch's cached blocks
        back to the driver (``torch.cuda.empty_cache``), so that the next scenario finds the free memory
        (``mem_get_info``: its number of input sets, `_n_sets`) of a newly opened device."""
        if self._closed:
            return
        self._stream.synchronize()
        handles = list(self._prepared)
        freed = sum(int(h.sizes.get("set_bytes") or 0) * h.n_sets for h in handles)
        for h in handles:
            h.graphs.clear()
            h.sets, h.out, h.owner = [], None, 0  # owner 0: no device's (an id is never 0)
            if isinstance(h, TorchCallable):
                h.fn = None  # the factory's closure owns its inputs
        self._prepared.clear()
        del handles
        gc.collect()
        empty_cache = getattr(self._torch.cuda, "empty_cache", None)
        if empty_cache is not None:
            empty_cache()
        logger.info("released the prepared kernels (%.1f MB of input sets)", freed / 2**20)

    def reset_for_next_scenario(self) -> None:
        """As newly opened (`GPUDevice.reset_for_next_scenario`): the kernels released, the seeds of the next
        kernels' random inputs counted from 0 again (each scenario's kernels get the inputs they would get on a new
        device, `_generator`), the launch mode as opened (a capture failure in one scenario does not leave the next
        one on stream launches) and the idle bookkeeping forgotten."""
        super().reset_for_next_scenario()
        self._n_prepared = 0
        self.launch_mode = self._opened_launch_mode
        self.graph_capture_error = None

    def _prepare_matmul(self, kernel: Any) -> TorchKernel:
        """Allocate a GEMM/GEMV (fingrav.config.GemmKernel / GemvKernel) in its dtype: random inputs,
        rotated input sets when one set would sit in L2, a preallocated output; warm it up (cuBLAS
        heuristics, workspaces) with one execution per set."""
        torch = self._torch
        sz = kernel_sizes(kernel)
        dtype = getattr(torch, DTYPES[sz["dtype"]])
        n_sets = self._n_sets(sz["set_bytes"])
        gen = self._generator()
        with self._on_stream():
            sets = []
            for _ in range(n_sets):
                a = torch.randn(sz["a"], generator=gen, device=self.device, dtype=torch.float32).to(dtype)
                b = torch.randn(sz["b"], generator=gen, device=self.device, dtype=torch.float32).to(dtype)
                sets.append((a, b))
            out = torch.empty(sz["out"], device=self.device, dtype=dtype)
        label = kernel.label() if callable(getattr(kernel, "label", None)) else str(sz["kind"])
        handle = TorchKernel(
            label=label,
            kernel=kernel,
            sizes=sz,
            sets=sets,
            out=out,
            chunk=chunk_size(n_sets),
            owner=id(self),
            matmul=torch.matmul,
        )
        with self._on_stream():
            for i in range(n_sets):
                handle.launch(i)
        self._stream.synchronize()
        logger.info(
            "prepared %s: %d input set(s) of %.1f MB (L2 %.0f MB), graph chunk %d",
            label,
            n_sets,
            sz["set_bytes"] / 2**20,
            self.l2_bytes / 2**20,
            handle.chunk,
        )
        return handle

    def _n_sets(self, set_bytes: int) -> int:
        """Input sets to rotate through for one set of `set_bytes` (L2 rotation, a quarter of free memory)."""
        free, _total = self._torch.cuda.mem_get_info(self.index)
        budget = int(free * 0.25)
        return input_sets_needed(
            set_bytes, self.l2_bytes, self.l2_rotation_factor, budget_bytes=budget, min_sets=self.min_input_sets
        )

    def _generator(self) -> Any:
        """The seeded generator of the next prepared kernel's random inputs (seed, kernel count)."""
        gen = self._torch.Generator(device=self.device)
        gen.manual_seed(self.seed * 1_000_003 + self._n_prepared)
        self._n_prepared += 1
        return gen

    def _prepare_attention(self, kernel: Any) -> TorchAttention:
        """Allocate an attention (module docstring, "Attention and user kernels"): random q, k, v input sets,
        one warm-up execution per set, the first one under the profiler (which SDPA backend ran)."""
        from fingrav.device.sdpa import probe_backend

        torch = self._torch
        sz = kernel_sizes(kernel)
        dtype = getattr(torch, DTYPES[sz["dtype"]])
        n_sets = self._n_sets(sz["set_bytes"])
        gen = self._generator()
        sdpa = torch.nn.functional.scaled_dot_product_attention
        with self._on_stream():
            sets = []
            for _ in range(n_sets):
                q, k, v = (
                    torch.randn(shape, generator=gen, device=self.device, dtype=torch.float32).to(dtype)
                    for shape in (sz["q"], sz["kv"], sz["kv"])
                )
                sets.append((q, k, v))
        handle = TorchAttention(
            label=kernel.label(), kernel=kernel, sizes=sz, sets=sets, out=None, chunk=chunk_size(n_sets),
            owner=id(self), matmul=sdpa, causal=sz["causal"],
        )  # fmt: skip
        with self._on_stream():
            q, k, v = sets[0]
            handle.info.update(probe_backend(torch, lambda: handle.launch(0), q, k, v, sz["causal"]))
            for i in range(n_sets):
                handle.launch(i)
        self._stream.synchronize()
        logger.info(
            "prepared %s: SDPA backend %s (%s), %d input set(s) of %.1f MB, graph chunk %d",
            handle.label,
            handle.info.get("sdpa_backend"),
            handle.info.get("sdpa_op") or handle.info.get("sdpa_probe"),
            n_sets,
            sz["set_bytes"] / 2**20,
            handle.chunk,
        )
        return handle

    def _prepare_callable(self, kernel: Any) -> TorchCallable:
        """Call the user's factory with this device and its stream current; run the function it returns once
        (its warm-up: compilation, autotuning). Errors name the target in one message (`fingrav.device.callables`)."""
        from fingrav.device.callables import build_launcher, call_launcher

        with self._on_stream():
            fn = build_launcher(kernel.target, kernel.args)
            call_launcher(kernel.target, fn)
        self._stream.synchronize()
        handle = TorchCallable(
            label=kernel.label(), kernel=kernel, sizes={"kind": "callable"}, sets=[(None, None)], out=None,
            chunk=GRAPH_CHUNK, owner=id(self), matmul=None, fn=fn,
        )  # fmt: skip
        handle.info["target"] = kernel.target
        logger.info("prepared %s (%s): graph chunk %d", handle.label, kernel.target, handle.chunk)
        return handle

    def _prepare_collective(self, kernel: Any) -> TorchCollective:
        """Allocate an all-reduce / all-gather over the initialized default process group (module
        docstring, "Collectives"); run one warm-up collective (every rank must call this in the same
        order). NOT RUN ON GPUS YET."""
        torch = self._torch
        dist = getattr(torch, "distributed", None)
        if dist is None or not dist.is_available() or not dist.is_initialized():
            raise DeviceError(
                f"{kernel.label()}: a collective needs torch.distributed initialized with one process per GPU "
                "(device.world_size >= 2 runs it through fingrav.collect.distributed)"
            )
        world = int(dist.get_world_size())
        if world < 2:
            raise DeviceError(f"{kernel.label()}: a collective needs at least 2 ranks (world size {world})")
        backend = str(dist.get_backend())
        sz = collective_sizes(kernel, world)
        dtype = getattr(torch, DTYPES[sz["dtype"]])
        gen = self._generator()
        with self._on_stream():
            inp = torch.randn(sz["a"], generator=gen, device=self.device, dtype=torch.float32).to(dtype)
            out = inp if sz["kind"] == "allreduce" else torch.empty(sz["out"], device=self.device, dtype=dtype)
        handle = TorchCollective(
            label=kernel.label(),
            kernel=kernel,
            sizes=sz,
            sets=[(inp, None)],
            out=out,
            chunk=GRAPH_CHUNK,
            owner=id(self),
            matmul=None,
            collective=_collective_call(dist, str(sz["kind"]), backend),
        )
        with self._on_stream():
            handle.launch(0)
        self._stream.synchronize()
        logger.info(
            "prepared %s over %d ranks (%s): %.1f MB per rank in, %.1f MB out",
            handle.label,
            world,
            backend,
            sz["set_bytes"] / 2**20,
            sz["bytes"] / 2**20,
        )
        return handle

    def _check_handle(self, handle: Any) -> TorchKernel:
        if not isinstance(handle, TorchKernel) or handle.owner != id(self):
            raise DeviceError(f"{handle!r} was not prepared by this device (or was released since: release_kernels)")
        return handle

    def _enqueue(self, handle: TorchKernel, size: int, offset: int, stamped: bool) -> None:
        """Launch `size` executions (input sets from `offset`) on the current stream."""
        stamp = self._stamper.stamp
        buf, counter = self._buf, self._counter
        for j in range(size):
            if stamped:
                stamp(buf, counter)
            handle.launch(offset + j)
            if stamped:
                stamp(buf, counter)

    def _graph(self, handle: TorchKernel, size: int, offset: int, stamped: bool) -> Any | None:
        """The cached graph of a piece, captured now if missing; None (and stream mode from now on)
        when capture fails."""
        key = (size, offset, stamped, self._generation)
        g = handle.graphs.get(key)
        if g is not None:
            return g
        for k in [k for k in handle.graphs if k[3] != self._generation]:
            del handle.graphs[k]
        torch = self._torch
        try:
            g = torch.cuda.CUDAGraph()
            # each graph gets its own (empty) private pool: nothing is allocated inside, and graphs that
            # share no pool may be replayed in any order
            with torch.cuda.device(self.index), torch.cuda.graph(g, stream=self._stream):
                self._enqueue(handle, size, offset, stamped)
        except Exception as exc:
            logger.warning(
                "CUDA graph capture of %s failed (%s: %s): using stream launches from now on",
                handle.label,
                type(exc).__name__,
                exc,
            )
            self.launch_mode = "stream"
            self.graph_capture_error = f"{handle.label}: {type(exc).__name__}: {str(exc).strip()[:300]}"
            with contextlib.suppress(Exception):
                torch.cuda.synchronize(self.device)
            return None
        handle.graphs[key] = g
        return g

    def _work(self, segments: Sequence[tuple[KernelHandle, int]], stamped: bool) -> list[tuple[Any, ...]]:
        """The launch plan: (handle, size, offset, graph or None) per piece; graphs captured here."""
        plan = []
        for h, count in segments:
            handle = self._check_handle(h)
            if int(count) < 0:
                raise DeviceError(f"negative execution count {count}")
            for size, offset in plan_pieces(int(count), handle.chunk, handle.n_sets):
                plan.append([handle, size, offset, None])
        if self.launch_mode == "graph":
            for piece in plan:
                if isinstance(piece[0], TorchCollective) and not self.collective_graphs:
                    continue  # collectives: stream launches unless asked (module docstring)
                piece[3] = self._graph(piece[0], piece[1], piece[2], stamped)
                if self.launch_mode != "graph":
                    for p in plan:
                        p[3] = None
                    break
        return [tuple(p) for p in plan]

    def _launch_plan(self, plan: list[tuple[Any, ...]], stamped: bool) -> None:
        for handle, size, offset, graph in plan:
            if graph is not None:
                graph.replay()
            else:
                self._enqueue(handle, size, offset, stamped)

    def execute(self, segments: Sequence[tuple[KernelHandle, int]]) -> ExecRecords:
        """Run the segments back to back on one stream, every execution bracketed by two GPU stamps;
        one synchronize and one copy at the end. Blocks until done."""
        counts = [int(c) for _, c in segments]
        total = sum(counts)
        if total == 0:
            z32, z64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
            return ExecRecords(z32, z32.copy(), z64, z64.copy())
        self._ensure_capacity(2 * total)
        plan = self._work(segments, stamped=True)
        with self._on_stream():
            self._counter.zero_()
            self._launch_plan(plan, stamped=True)
        t = self._fetch(2 * total)
        seg = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
        idx = np.concatenate([np.arange(c, dtype=np.int32) for c in counts])
        start, end = t[0::2].astype(np.int64), t[1::2].astype(np.int64)
        if np.any(end < start):
            raise DeviceError("GPU stamps: an execution ends before it starts (clock went backwards?)")
        return ExecRecords(seg, idx, start, end)

    def run_unstamped(
        self,
        handle: KernelHandle,
        count: int,
        more: Callable[[int], int] | None = None,
        part: int | None = None,
    ) -> ExecRecords:
        """`count` back-to-back executions with NO per-execution stamps, bracketed by one stamp before and one
        after: one record spanning them all (exec_index = executions - 1); how users launch a kernel, and what
        stamping costs.

        more / part (`GPUDevice.run_unstamped`): the run is launched in parts of `part` executions (rounded up to
        whole graph chunks, or whole rounds of the input sets when shorter; at least two parts when `more` is
        given), each followed by a CUDA event. Two parts are queued ahead; when the last planned part is the only
        one left on the GPU, `more(done)` is asked and its answer (rounded up to whole parts) queued behind it, so
        the GPU never waits for the host. Every graph the parts need is captured before the first stamp (capture
        synchronizes the device)."""
        if count <= 0:
            raise ValueError("count must be > 0")
        h = self._check_handle(handle)
        count = int(count)
        size = _part_size(h, count, part, adaptive=more is not None)
        todo = [min(size, count - k) for k in range(0, count, size)]
        self._ensure_capacity(2)
        plans = {n: self._work([(h, n)], stamped=False) for n in {*todo, size}}
        with self._on_stream():
            self._counter.zero_()
            self._stamper.stamp(self._buf, self._counter)
            done = self._launch_parts(plans, todo, size, more)
            self._stamper.stamp(self._buf, self._counter)
        t = self._fetch(2)
        return ExecRecords(
            np.zeros(1, np.int32), np.full(1, done - 1, np.int32), t[:1].astype(np.int64), t[1:].astype(np.int64)
        )

    def _launch_parts(
        self, plans: dict[int, Any], todo: list[int], size: int, more: Callable[[int], int] | None
    ) -> int:
        """Launch the parts `todo` (executions each; their launch plans in `plans`), two queued ahead, each followed
        by a CUDA event; when the last planned part is the only one left on the GPU, ask `more(done)` and queue its
        answer in parts of `size`. Returns the executions done. On the device's stream."""
        torch = self._torch
        queued: list[tuple[Any, int]] = []
        done = 0
        asking = more is not None

        def enqueue(n: int) -> None:
            self._launch_plan(plans[n], stamped=False)
            ev = torch.cuda.Event()
            ev.record(self._stream)
            queued.append((ev, n))

        enqueue(todo.pop(0))
        if todo:
            enqueue(todo.pop(0))
        while queued:
            ev, n = queued.pop(0)
            ev.synchronize()
            done += n
            if asking and not todo and len(queued) == 1:  # the last planned part is running: ask now
                k = int(more(done)) if more is not None else 0
                asking = k > 0
                todo = [size] * -(-k // size) if k > 0 else []
            if todo:
                enqueue(todo.pop(0))
        return done

    def stamp_series(self, n: int, use_graph: bool | None = None) -> np.ndarray:
        """`n` stamps back to back (nothing between them), in ns: their spacing is the GPU cost of one
        stamp. `use_graph`: replay a captured graph (default: the device's launch mode)."""
        if n <= 0:
            raise ValueError("n must be > 0")
        self._ensure_capacity(n)
        use_graph = self.launch_mode == "graph" if use_graph is None else use_graph
        torch = self._torch
        g = None
        if use_graph:
            key = (n, self._generation)
            g = self._series_graphs.get(key)
            if g is None:
                g = torch.cuda.CUDAGraph()
                with torch.cuda.device(self.index), torch.cuda.graph(g, stream=self._stream):
                    for _ in range(n):
                        self._stamper.stamp(self._buf, self._counter)
                self._series_graphs[key] = g
        with self._on_stream():
            self._counter.zero_()
            if g is not None:
                g.replay()
            else:
                for _ in range(n):
                    self._stamper.stamp(self._buf, self._counter)
        return self._fetch(n)

    def spin(self, duration_ns: int) -> ExecRecords:
        """A full-chip FMA load for `duration_ns` of GPU time: stamp, spin until stamp + duration, stamp."""
        duration_ns = int(duration_ns)
        if duration_ns <= 0:
            raise ValueError("duration_ns must be > 0")
        self._ensure_capacity(2)
        with self._on_stream():
            self._counter.zero_()
            self._stamper.stamp(self._buf, self._counter)
            self._spinner.launch(self._buf, duration_ns)
            self._stamper.stamp(self._buf, self._counter)
        t = self._fetch(2)
        return ExecRecords(np.zeros(1, np.int32), np.zeros(1, np.int32), t[:1].astype(np.int64), t[1:].astype(np.int64))

    # -- time -------------------------------------------------------------------------------
    def sleep_ns(self, duration_ns: int) -> None:
        """Idle host and GPU for `duration_ns` (sleep, then busy-wait the last 200 us for accuracy)."""
        duration_ns = int(duration_ns)
        if duration_ns <= 0:
            return
        end = time.perf_counter_ns() + duration_ns
        coarse = duration_ns - SLEEP_SPIN_NS
        if coarse > 0:
            time.sleep(coarse / 1e9)
        while time.perf_counter_ns() < end:
            pass

    def read_gpu_clock(self, n: int) -> ClockReads:
        """`n` reads: host clock, one stamp-kernel launch + stream synchronize, host clock; the stamps are
        copied back once at the end."""
        n = int(n)
        if n <= 0:
            raise ValueError("n must be > 0")
        self._ensure_capacity(n)
        before = np.empty(n, np.int64)
        after = np.empty(n, np.int64)
        clock = self.host_time_ns
        stamp, buf, counter, stream = self._stamper.stamp, self._buf, self._counter, self._stream
        with self._on_stream():
            counter.zero_()
            stream.synchronize()
            for i in range(n):
                before[i] = clock()
                stamp(buf, counter)
                stream.synchronize()
                after[i] = clock()
        gpu = self._fetch(n).astype(np.int64)
        return ClockReads(before, gpu, after)

    # -- teardown ---------------------------------------------------------------------------
    def close(self) -> None:
        """Drop graphs and buffers (torch frees the memory)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._stream.synchronize()
        self._series_graphs.clear()


class PoweredTorchGPUDevice(TorchGPUDevice):
    """The torch device composed with a vendor power source (`self.power`, a `PowerSource`).

    Subclasses set ``self.power`` before or after ``TorchGPUDevice.__init__`` (NVIDIA needs torch's GPU
    UUID to open NVML on the same GPU; AMD opens amdsmi first) and provide the clock hooks. The power side
    of `GPUDevice` (channels, sampling, energy, identity, close) is delegated here, once for all vendors.
    """

    power: PowerSource

    @property
    def channels(self) -> tuple[str, ...]:
        return self.power.channels

    def describe(self) -> dict[str, Any]:
        """Backend and torch index, the torch side's identity, then the power source's (whose keys win)."""
        return {"backend": self.backend, "index": self.index, **super().describe(), **self.power.describe()}

    def energy_mj(self) -> float | None:
        return self.power.energy_mj()

    def read_telemetry(self) -> ClockTelemetry | None:
        """The power source's clock / clock-event telemetry (NVMLPower, AMDSMIPower), None when it reads none."""
        read = getattr(self.power, "read_telemetry", None)
        return read() if read is not None else None

    def start_sampling(self) -> None:
        self.power.start_sampling()

    def drain_samples(self) -> PowerSamples:
        return self.power.drain_samples()

    def stop_sampling(self) -> PowerSamples:
        return self.power.stop_sampling()

    def close(self) -> None:
        """Close the power source (when one was opened), then the torch side."""
        power = getattr(self, "power", None)
        try:
            if power is not None:
                power.close()
        finally:
            super().close()
