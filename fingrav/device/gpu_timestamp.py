"""NVIDIA GPU-clock kernels: a ``%globaltimer`` stamp and a full-chip FMA spin of exact GPU duration.

GPU-side module. Triton, CuPy and torch are imported lazily (importing this module needs none of them).
Two implementations of each kernel, chosen by ``impl``:

* ``"triton"``: ``triton.language.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], ...)``;
* ``"cupy"``: the same PTX in CUDA C through ``cupy.RawModule`` (NVRTC), launched on torch's current
  stream through ``cupy.cuda.ExternalStream``;
* ``"auto"`` (default): Triton, and CuPy when Triton fails to import, compile or run.

``%globaltimer`` is a ns counter (32 ns steps on H200) that the driver keeps close to the host's wall
clock; ``to_ns`` is the identity.

Stamp kernel
------------
``stamp(buf, counter)`` enqueues, on torch's current stream, one single-thread kernel that reads
``%globaltimer`` and writes it to ``buf[counter]`` then increments ``counter`` (``atomicAdd``, so the
index lives on the device: no host sync, and a captured CUDA graph can be replayed any number of times,
the stamps landing one after another). ``buf``: int64 CUDA tensor; ``counter``: int32 CUDA tensor of
one element, zeroed by the caller before a series.

Spin kernel
-----------
``launch(t0, duration_ns)`` enqueues ``programs_per_sm`` x SM-count programs (256 threads each) that run
independent FMA chains until ``%globaltimer >= t0[0] + duration_ns``, ``t0`` being a stamp written just
before by the stamp kernel on the same stream. The deadline is thus anchored to the start stamp: the
stamped duration (end stamp - start stamp) exceeds ``duration_ns`` only by the end stamp's launch
latency (a few us), whatever the launch latency of the spin itself. The load is constant (no memory
traffic) and fills every SM; on an H200 it draws ~330 W (shared/H200.md).
"""

from __future__ import annotations

import importlib
import logging
import types
from typing import Any

import numpy as np

from fingrav.errors import BackendUnavailableError, DeviceError

logger = logging.getLogger(__name__)

IMPLS = ("auto", "triton", "cupy")
SPIN_THREADS = 256  # threads per spin program (Triton: 8 warps)
SPIN_BLOCK = 1024  # fp32 lanes per Triton spin program (4 per thread, x2 chains)
SPIN_INNER = 32  # unrolled FMA steps between two reads of the timer
SPIN_A, SPIN_B = 0.9999, 1e-4  # x <- a*x + b converges (to 1): no overflow, no denormals

# set by _triton_kernels(): module globals so that the jit functions below resolve them as globals
triton: Any = None
tl: Any = None
_TRITON: types.SimpleNamespace | None = None

_CUDA_SRC = r"""
extern "C" __global__ void fingrav_stamp(unsigned long long buf_addr, unsigned long long counter_addr) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
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
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while ((long long)now < deadline);
    ((float*)out_addr)[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3;
}
"""


# --------------------------------------------------------------------------- Triton
def _triton_kernels() -> types.SimpleNamespace:
    """Build (once) the Triton stamp and spin kernels; compiled at their first launch."""
    global triton, tl, _TRITON
    if _TRITON is not None:
        return _TRITON
    triton = importlib.import_module("triton")
    tl = importlib.import_module("triton.language")

    @triton.jit
    def fingrav_stamp(buf_ptr, counter_ptr):
        t = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        i = tl.atomic_add(counter_ptr, 1)
        tl.store(buf_ptr + i, t)

    @triton.jit(do_not_specialize=["duration_ns"])
    def fingrav_spin(t0_ptr, duration_ns, a, b, out_ptr, BLOCK: tl.constexpr, INNER: tl.constexpr):  # noqa: N803
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        deadline = tl.load(t0_ptr) + duration_ns
        x = offs.to(tl.float32) * 1e-3 + pid.to(tl.float32)
        y = x + 0.5
        now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False, pack=1)
        while now < deadline:
            for _ in tl.static_range(INNER):
                x = x * a + b
                y = y * a + b
            now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=tl.int64, is_pure=False,
                                            pack=1)
        tl.store(out_ptr + pid * BLOCK + offs, x + y)

    _TRITON = types.SimpleNamespace(stamp=fingrav_stamp, spin=fingrav_spin)
    return _TRITON


class TritonGlobalTimerStamper:
    """`%globaltimer` stamp through a Triton kernel (1 program, 1 warp)."""

    name = "triton-globaltimer"
    impl = "triton"

    def __init__(self, device_index: int) -> None:
        self.device_index = device_index
        self._kernel = _triton_kernels().stamp

    def stamp(self, buf: Any, counter: Any) -> None:
        """Enqueue on torch's current stream: buf[counter] = %globaltimer; counter += 1.

        num_warps must stay 1: Triton executes a scalar atomic once per warp (lane 0 of each), checked
        in the sm_90 PTX with Triton 3.6 (timer read first, one atom.add.u32, result broadcast)."""
        self._kernel[(1,)](buf, counter, num_warps=1)

    @staticmethod
    def to_ns(raw: np.ndarray) -> np.ndarray:
        """%globaltimer already counts ns."""
        return np.asarray(raw, dtype=np.int64)


class TritonFmaSpinner:
    """Constant FMA load on every SM until %globaltimer passes t0 + duration (Triton)."""

    name = "triton-fma-spin"
    impl = "triton"

    def __init__(self, device_index: int, sm_count: int, programs_per_sm: int = 4) -> None:
        import torch

        self.device_index = device_index
        self.programs = max(1, int(sm_count) * int(programs_per_sm))
        self._kernel = _triton_kernels().spin
        self._out = torch.empty(self.programs * SPIN_BLOCK, dtype=torch.float32, device=f"cuda:{device_index}")

    def launch(self, t0: Any, duration_ns: int) -> None:
        """Enqueue on torch's current stream; `t0`: int64 tensor whose element 0 is the start stamp (ns)."""
        self._kernel[(self.programs,)](t0, int(duration_ns), SPIN_A, SPIN_B, self._out, BLOCK=SPIN_BLOCK,
                                       INNER=SPIN_INNER, num_warps=SPIN_THREADS // 32)


# --------------------------------------------------------------------------- CuPy
class _CupyBase:
    def __init__(self, device_index: int, function: str) -> None:
        import cupy
        import torch

        self._cp = cupy
        self._torch = torch
        self.device_index = device_index
        with cupy.cuda.Device(device_index):
            self._kernel = cupy.RawModule(code=_CUDA_SRC).get_function(function)
        self._streams: dict[int, Any] = {}

    def _stream(self) -> Any:
        ptr = int(self._torch.cuda.current_stream(self.device_index).cuda_stream)
        stream = self._streams.get(ptr)
        if stream is None:
            stream = self._streams[ptr] = self._cp.cuda.ExternalStream(ptr)
        return stream


class CupyGlobalTimerStamper(_CupyBase):
    """`%globaltimer` stamp through a CuPy RawKernel (1 block of 32 threads, thread 0 writes)."""

    name = "cupy-globaltimer"
    impl = "cupy"

    def __init__(self, device_index: int) -> None:
        super().__init__(device_index, "fingrav_stamp")

    def stamp(self, buf: Any, counter: Any) -> None:
        """Enqueue on torch's current stream: buf[counter] = %globaltimer; counter += 1."""
        with self._cp.cuda.Device(self.device_index), self._stream():
            self._kernel((1,), (32,), (np.uint64(buf.data_ptr()), np.uint64(counter.data_ptr())))

    @staticmethod
    def to_ns(raw: np.ndarray) -> np.ndarray:
        return np.asarray(raw, dtype=np.int64)


class CupyFmaSpinner(_CupyBase):
    """Constant FMA load on every SM until %globaltimer passes t0 + duration (CuPy)."""

    name = "cupy-fma-spin"
    impl = "cupy"

    def __init__(self, device_index: int, sm_count: int, programs_per_sm: int = 4) -> None:
        super().__init__(device_index, "fingrav_spin")
        self.programs = max(1, int(sm_count) * int(programs_per_sm))
        self._out = self._torch.empty(self.programs * SPIN_THREADS, dtype=self._torch.float32,
                                      device=f"cuda:{device_index}")

    def launch(self, t0: Any, duration_ns: int) -> None:
        with self._cp.cuda.Device(self.device_index), self._stream():
            self._kernel((self.programs,), (SPIN_THREADS,),
                         (np.uint64(t0.data_ptr()), np.int64(duration_ns), np.float32(SPIN_A), np.float32(SPIN_B),
                          np.uint64(self._out.data_ptr())))


# --------------------------------------------------------------------------- factories (with a self-test)
def _check_impl(impl: str) -> None:
    if impl not in IMPLS:
        raise ValueError(f"impl={impl!r}: one of {IMPLS}")


def _self_test_stamper(stamper: Any, device_index: int) -> None:
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


def _self_test_spinner(spinner: Any, stamper: Any, device_index: int, duration_ns: int = 20_000) -> None:
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


def make_stamper(device_index: int, impl: str = "auto") -> Any:
    """A working %globaltimer stamper for CUDA device `device_index` (Triton first, CuPy as fallback).

    Compiles and runs it once (a self-test); BackendUnavailableError when no implementation works."""
    _check_impl(impl)
    errors = []
    for name in (("triton", "cupy") if impl == "auto" else (impl,)):
        try:
            cls = TritonGlobalTimerStamper if name == "triton" else CupyGlobalTimerStamper
            stamper = cls(device_index)
            _self_test_stamper(stamper, device_index)
        except Exception as exc:  # ImportError, compile errors, launch errors: try the next one
            logger.warning("GPU timestamp kernel via %s unavailable: %s: %s", name, type(exc).__name__, exc)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        logger.info("GPU timestamp kernel: %s", stamper.name)
        return stamper
    raise BackendUnavailableError("no working %globaltimer stamp kernel (" + "; ".join(errors) + ")")


def make_spinner(device_index: int, sm_count: int, stamper: Any, impl: str = "auto", programs_per_sm: int = 4) -> Any:
    """A working FMA spinner (Triton first, CuPy as fallback), checked against `stamper`."""
    _check_impl(impl)
    errors = []
    for name in (("triton", "cupy") if impl == "auto" else (impl,)):
        try:
            cls = TritonFmaSpinner if name == "triton" else CupyFmaSpinner
            spinner = cls(device_index, sm_count, programs_per_sm)
            _self_test_spinner(spinner, stamper, device_index)
        except Exception as exc:
            logger.warning("spin kernel via %s unavailable: %s: %s", name, type(exc).__name__, exc)
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
            continue
        logger.info("spin kernel: %s (%d programs)", spinner.name, spinner.programs)
        return spinner
    raise BackendUnavailableError("no working spin kernel (" + "; ".join(errors) + ")")
