"""The GPU-clock kernels, written once: a stamp and a full-chip FMA spin of exact GPU duration.

GPU-side module. Triton, CuPy and torch are imported lazily (importing this module needs none of them).
The kernels are parameterized by the vendor's timer read, a `TimerSpec` (the inline asm that reads the
GPU clock, its constraint, its rate, the warp width): ``fingrav.device.nvidia.timestamp.GLOBALTIMER``
(PTX ``%globaltimer``, ns) and ``fingrav.device.amd.timestamp.MEMREALTIME`` (``s_memrealtime``, 100 MHz).

Implementations
---------------
* Triton (both vendors): ``tl.inline_asm_elementwise(timer.asm, timer.constraint, [], ...)``, the asm
  and constraint passed to the jit kernels as ``tl.constexpr`` arguments (Triton kernels read no
  non-constexpr globals), so each timer compiles its own specialization of the same kernel;
* CuPy (NVIDIA only, ``timer.cuda_read`` set): the same kernels in CUDA C through ``cupy.RawModule``
  (NVRTC), launched on torch's current stream through ``cupy.cuda.ExternalStream``.

Stamp kernel
------------
``stamp(buf, counter)`` enqueues, on torch's current stream, one single-thread kernel that reads the GPU
clock and writes it to ``buf[counter]`` then increments ``counter`` (atomic add, so the index lives on the
device: no host sync, and a captured CUDA graph can be replayed any number of times, the stamps landing
one after another). ``buf``: int64 device tensor; ``counter``: int32 device tensor of one element, zeroed
by the caller before a series. ``to_ns(raw)``: timer ticks -> ns.

Spin kernel
-----------
``launch(t0, duration_ns)`` enqueues ``programs_per_sm`` x SM-count programs (256 threads each) that run
independent FMA chains (x <- a*x + b) until the clock passes ``t0[0] + duration`` (in timer ticks, rounded
up), ``t0`` being a stamp written just before by the stamp kernel on the same stream. The deadline is thus
anchored to the start stamp: the stamped duration exceeds ``duration_ns`` only by the end stamp's launch
latency (a few us), whatever the launch latency of the spin itself. The load is constant (no memory
traffic) and fills every SM / CU.
"""

from __future__ import annotations

import importlib
import logging
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fingrav.errors import BackendUnavailableError, DeviceError

logger = logging.getLogger(__name__)

SPIN_THREADS = 256  # threads per spin program (8 warps of 32 on NVIDIA, 4 wavefronts of 64 on AMD)
SPIN_BLOCK = 1024  # fp32 lanes per Triton spin program (4 per thread, x2 chains)
SPIN_INNER = 32  # unrolled FMA steps between two reads of the timer
SPIN_A, SPIN_B = 0.9999, 1e-4  # x <- a*x + b converges (to 1): no overflow, no denormals

# set by _triton_kernels(): module globals so that the jit functions below resolve them as globals
triton: Any = None
tl: Any = None
_TRITON: types.SimpleNamespace | None = None


@dataclass(frozen=True)
class TimerSpec:
    """How one vendor's GPU clock is read by the kernels.

    name: the clock ("%globaltimer", "s_memrealtime"); asm / constraint: Triton inline asm that reads it
    into one int64 ("mov.u64 $0, %globaltimer;", "=l"); hz: its rate (ticks per second);
    warp_size: threads per warp / wavefront (num_warps of the spin = SPIN_THREADS / warp_size);
    triton_stamp_name / triton_spin_name: the kernels' names in provenance; cuda_read: the CUDA C
    statement reading the clock into the ``unsigned long long`` variable ``{var}`` for the CuPy kernels
    (None: no CuPy implementation)."""

    name: str
    asm: str
    constraint: str
    hz: int
    warp_size: int
    triton_stamp_name: str
    triton_spin_name: str
    cuda_read: str | None = None
    cupy_stamp_name: str = "cupy-stamp"
    cupy_spin_name: str = "cupy-fma-spin"

    def to_ns(self, ticks: Any) -> np.ndarray:
        """Timer ticks -> ns (int64; exact integer arithmetic when 1e9 is a multiple of the rate)."""
        if 1_000_000_000 % self.hz == 0:
            return np.asarray(ticks, dtype=np.int64) * (1_000_000_000 // self.hz)
        return (np.asarray(ticks, dtype=np.float64) * (1e9 / self.hz)).astype(np.int64)

    def ticks_for_ns(self, duration_ns: int) -> int:
        """The whole number of ticks covering `duration_ns` (rounded up)."""
        return -(-int(duration_ns) * self.hz // 1_000_000_000)

    @property
    def impls(self) -> tuple[str, ...]:
        """Implementations in the order "auto" tries them."""
        return ("triton", "cupy") if self.cuda_read is not None else ("triton",)


# --------------------------------------------------------------------------- Triton
def _triton_kernels() -> types.SimpleNamespace:
    """Build (once) the Triton stamp and spin kernels; compiled at their first launch, per timer."""
    global triton, tl, _TRITON
    if _TRITON is not None:
        return _TRITON
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def fingrav_stamp(buf_ptr, counter_ptr, TIMER_ASM: tl.constexpr, TIMER_CONSTRAINT: tl.constexpr):  # noqa: N803
        t = tl.inline_asm_elementwise(TIMER_ASM, TIMER_CONSTRAINT, [], dtype=tl.int64, is_pure=False, pack=1)
        i = tl.atomic_add(counter_ptr, 1)
        tl.store(buf_ptr + i, t)

    @triton.jit(do_not_specialize=["duration"])
    def fingrav_spin(
        t0_ptr,
        duration,
        a,
        b,
        out_ptr,
        BLOCK: tl.constexpr,  # noqa: N803
        INNER: tl.constexpr,  # noqa: N803
        TIMER_ASM: tl.constexpr,  # noqa: N803
        TIMER_CONSTRAINT: tl.constexpr,  # noqa: N803
    ):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        deadline = tl.load(t0_ptr) + duration
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        y = x + 0.5
        now = tl.inline_asm_elementwise(TIMER_ASM, TIMER_CONSTRAINT, [], dtype=tl.int64, is_pure=False, pack=1)
        while now < deadline:
            for _ in tl.static_range(INNER):
                x = x * a + b
                y = y * a + b
            now = tl.inline_asm_elementwise(TIMER_ASM, TIMER_CONSTRAINT, [], dtype=tl.int64, is_pure=False, pack=1)
        tl.store(out_ptr + pid * BLOCK + offs, x + y)

    _TRITON = types.SimpleNamespace(stamp=fingrav_stamp, spin=fingrav_spin)
    return _TRITON


class TritonStamper:
    """Stamp kernel through Triton (1 program, 1 warp)."""

    impl = "triton"

    def __init__(self, device_index: int, timer: TimerSpec) -> None:
        self.device_index = device_index
        self.timer = timer
        self.hz = timer.hz
        self.name = timer.triton_stamp_name
        self._kernel = _triton_kernels().stamp

    def stamp(self, buf: Any, counter: Any) -> None:
        """Enqueue on torch's current stream: buf[counter] = clock; counter += 1.

        num_warps must stay 1: Triton executes a scalar atomic once per warp (lane 0 of each), checked
        in the sm_90 PTX with Triton 3.6 (timer read first, one atom.add.u32, result broadcast)."""
        self._kernel[(1,)](buf, counter, TIMER_ASM=self.timer.asm, TIMER_CONSTRAINT=self.timer.constraint, num_warps=1)

    def to_ns(self, raw: Any) -> np.ndarray:
        return self.timer.to_ns(raw)


class TritonSpinner:
    """Constant FMA load on every SM / CU until the clock passes t0 + duration (Triton)."""

    impl = "triton"

    def __init__(self, device_index: int, sm_count: int, timer: TimerSpec, programs_per_sm: int = 4) -> None:
        import torch

        self.device_index = device_index
        self.timer = timer
        self.hz = timer.hz
        self.name = timer.triton_spin_name
        self.programs = max(1, int(sm_count) * int(programs_per_sm))
        self._kernel = _triton_kernels().spin
        self._out = torch.empty(self.programs * SPIN_BLOCK, dtype=torch.float32, device=f"cuda:{device_index}")

    def launch(self, t0: Any, duration_ns: int) -> None:
        """Enqueue on torch's current stream; `t0`: int64 tensor whose element 0 is the start stamp (ticks)."""
        self._kernel[(self.programs,)](
            t0,
            self.timer.ticks_for_ns(duration_ns),
            SPIN_A,
            SPIN_B,
            self._out,
            BLOCK=SPIN_BLOCK,
            INNER=SPIN_INNER,
            TIMER_ASM=self.timer.asm,
            TIMER_CONSTRAINT=self.timer.constraint,
            num_warps=SPIN_THREADS // self.timer.warp_size,
        )


# --------------------------------------------------------------------------- CuPy (CUDA C)
# `duration_ns` of fingrav_spin is in timer ticks: ns for %globaltimer, the only timer with a CUDA C read.
_CUDA_TEMPLATE = r"""
extern "C" __global__ void fingrav_stamp(unsigned long long buf_addr, unsigned long long counter_addr) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long t;
    @READ(t)@
    int i = atomicAdd((int*)counter_addr, 1);
    ((long long*)buf_addr)[i] = (long long)t;
}

extern "C" __global__ void fingrav_spin(unsigned long long t0_addr, long long duration_ns, float a, float b,
                                        unsigned long long out_addr) {
    const long long deadline = *((volatile long long*)t0_addr) + duration_ns;
    float x0 = threadIdx.x * 1e-3f + blockIdx.x, x1 = x0 + 0.25f, x2 = x0 + 0.5f, x3 = x0 + 0.75f;
    unsigned long long now;
    do {
#pragma unroll
        for (int k = 0; k < 32; ++k) {
            x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);
        }
        @READ(now)@
    } while ((long long)now < deadline);
    ((float*)out_addr)[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3;
}
"""


def cuda_source(timer: TimerSpec) -> str:
    """The CUDA C of the CuPy kernels for `timer` (which must have a `cuda_read`)."""
    if timer.cuda_read is None:
        raise BackendUnavailableError(f"no CUDA C implementation of the {timer.name} kernels")
    return _CUDA_TEMPLATE.replace("@READ(t)@", timer.cuda_read.format(var="t")).replace(
        "@READ(now)@", timer.cuda_read.format(var="now")
    )


class _CupyBase:
    def __init__(self, device_index: int, timer: TimerSpec, function: str) -> None:
        import cupy
        import torch

        self._cp = cupy
        self._torch = torch
        self.device_index = device_index
        self.timer = timer
        self.hz = timer.hz
        with cupy.cuda.Device(device_index):
            self._kernel = cupy.RawModule(code=cuda_source(timer)).get_function(function)
        self._streams: dict[int, Any] = {}

    def _stream(self) -> Any:
        ptr = int(self._torch.cuda.current_stream(self.device_index).cuda_stream)
        stream = self._streams.get(ptr)
        if stream is None:
            stream = self._streams[ptr] = self._cp.cuda.ExternalStream(ptr)
        return stream


class CupyStamper(_CupyBase):
    """Stamp kernel through a CuPy RawKernel (1 block of 32 threads, thread 0 writes)."""

    impl = "cupy"

    def __init__(self, device_index: int, timer: TimerSpec) -> None:
        super().__init__(device_index, timer, "fingrav_stamp")
        self.name = timer.cupy_stamp_name

    def stamp(self, buf: Any, counter: Any) -> None:
        """Enqueue on torch's current stream: buf[counter] = clock; counter += 1."""
        with self._cp.cuda.Device(self.device_index), self._stream():
            self._kernel((1,), (32,), (np.uint64(buf.data_ptr()), np.uint64(counter.data_ptr())))

    def to_ns(self, raw: Any) -> np.ndarray:
        return self.timer.to_ns(raw)


class CupySpinner(_CupyBase):
    """Constant FMA load on every SM until the clock passes t0 + duration (CuPy)."""

    impl = "cupy"

    def __init__(self, device_index: int, sm_count: int, timer: TimerSpec, programs_per_sm: int = 4) -> None:
        super().__init__(device_index, timer, "fingrav_spin")
        self.name = timer.cupy_spin_name
        self.programs = max(1, int(sm_count) * int(programs_per_sm))
        self._out = self._torch.empty(
            self.programs * SPIN_THREADS, dtype=self._torch.float32, device=f"cuda:{device_index}"
        )

    def launch(self, t0: Any, duration_ns: int) -> None:
        with self._cp.cuda.Device(self.device_index), self._stream():
            self._kernel(
                (self.programs,),
                (SPIN_THREADS,),
                (
                    np.uint64(t0.data_ptr()),
                    np.int64(self.timer.ticks_for_ns(duration_ns)),
                    np.float32(SPIN_A),
                    np.float32(SPIN_B),
                    np.uint64(self._out.data_ptr()),
                ),
            )


# --------------------------------------------------------------------------- factories (with a self-test)
_STAMPERS = {"triton": TritonStamper, "cupy": CupyStamper}
_SPINNERS = {"triton": TritonSpinner, "cupy": CupySpinner}


def _impls(timer: TimerSpec, impl: str) -> Sequence[str]:
    allowed = ("auto", *timer.impls)
    if impl not in allowed:
        raise ValueError(f"impl={impl!r}: one of {allowed}")
    return timer.impls if impl == "auto" else (impl,)


def self_test_stamper(stamper: Any, device_index: int) -> None:
    """Two stamps on a side stream: both written, non-zero, in order."""
    import torch

    dev = torch.device("cuda", device_index)
    buf = torch.zeros(4, dtype=torch.int64, device=dev)
    counter = torch.zeros(1, dtype=torch.int32, device=dev)
    stream = torch.cuda.Stream(device=dev)
    with torch.cuda.device(device_index), torch.cuda.stream(stream):
        stamper.stamp(buf, counter)
        stamper.stamp(buf, counter)
    stream.synchronize()
    n = int(counter.item())
    t = buf.cpu().numpy()
    if n != 2 or t[0] <= 0 or t[1] < t[0]:
        raise DeviceError(f"{stamper.name}: self-test failed (counter {n}, stamps {t[:2].tolist()})")


def self_test_spinner(spinner: Any, stamper: Any, device_index: int, duration_ns: int = 20_000) -> None:
    """Stamp, spin `duration_ns`, stamp: the stamped interval must cover the requested duration."""
    import torch

    dev = torch.device("cuda", device_index)
    buf = torch.zeros(4, dtype=torch.int64, device=dev)
    counter = torch.zeros(1, dtype=torch.int32, device=dev)
    stream = torch.cuda.Stream(device=dev)
    with torch.cuda.device(device_index), torch.cuda.stream(stream):
        stamper.stamp(buf, counter)
        spinner.launch(buf, duration_ns)
        stamper.stamp(buf, counter)
    stream.synchronize()
    t = stamper.to_ns(buf.cpu().numpy())
    if int(counter.item()) != 2 or t[1] - t[0] < duration_ns:
        raise DeviceError(f"{spinner.name}: self-test failed (stamped {t[1] - t[0]} ns for {duration_ns} ns)")


def make_stamper(device_index: int, timer: TimerSpec, impl: str = "auto") -> Any:
    """A working stamper of `timer` for GPU `device_index` ("auto": Triton first, CuPy as fallback).

    Compiles and runs it once (a self-test); BackendUnavailableError when no implementation works."""
    errors = []
    for name in _impls(timer, impl):
        try:
            stamper = _STAMPERS[name](device_index, timer)
            self_test_stamper(stamper, device_index)
        except Exception as exc:  # ImportError, compile errors, launch errors: try the next one
            logger.warning("GPU timestamp kernel via %s unavailable: %s: %s", name, type(exc).__name__, exc)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        logger.info("GPU timestamp kernel: %s (%s, %d Hz)", stamper.name, timer.name, timer.hz)
        return stamper
    raise BackendUnavailableError(f"no working {timer.name} stamp kernel (" + "; ".join(errors) + ")")


def make_spinner(
    device_index: int, sm_count: int, stamper: Any, timer: TimerSpec, impl: str = "auto", programs_per_sm: int = 4
) -> Any:
    """A working FMA spinner of `timer` ("auto": Triton first, CuPy as fallback), checked against `stamper`."""
    errors = []
    for name in _impls(timer, impl):
        try:
            spinner = _SPINNERS[name](device_index, sm_count, timer, programs_per_sm)
            self_test_spinner(spinner, stamper, device_index)
        except Exception as exc:
            logger.warning("spin kernel via %s unavailable: %s: %s", name, type(exc).__name__, exc)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        logger.info("spin kernel: %s (%d programs)", spinner.name, spinner.programs)
        return spinner
    raise BackendUnavailableError("no working spin kernel (" + "; ".join(errors) + ")")
