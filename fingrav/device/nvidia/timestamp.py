"""NVIDIA GPU time: ``%globaltimer``, read by the shared kernels of `fingrav.device.kernels`.

GPU-side module (Triton, CuPy and torch are imported when a kernel is made). ``%globaltimer`` is a ns
counter (32 ns steps on H200) that the driver keeps close to the host's wall clock, so ``to_ns`` is the
identity. Implementations: ``"triton"`` (inline PTX ``mov.u64 $0, %globaltimer;``), ``"cupy"`` (the same
PTX in CUDA C through NVRTC), ``"auto"`` (Triton, and CuPy when Triton fails to import, compile or run).
The spin kernel draws ~330 W on an H200 (shared/H200.md).
"""

from __future__ import annotations

import logging
from typing import Any

from fingrav.device.kernels import TimerSpec
from fingrav.device.kernels import make_spinner as _make_spinner
from fingrav.device.kernels import make_stamper as _make_stamper

logger = logging.getLogger(__name__)

IMPLS = ("auto", "triton", "cupy")

GLOBALTIMER = TimerSpec(
    name="%globaltimer",
    asm="mov.u64 $0, %globaltimer;",
    constraint="=l",
    hz=1_000_000_000,
    warp_size=32,
    triton_stamp_name="triton-globaltimer",
    triton_spin_name="triton-fma-spin",
    cuda_read='asm volatile("mov.u64 %0, %%globaltimer;" : "=l"({var}));',
    cupy_stamp_name="cupy-globaltimer",
    cupy_spin_name="cupy-fma-spin",
)


def make_stamper(device_index: int, impl: str = "auto") -> Any:
    """A working %globaltimer stamper for CUDA device `device_index` (Triton first, CuPy as fallback).

    Compiles and runs it once (a self-test); BackendUnavailableError when no implementation works."""
    return _make_stamper(device_index, GLOBALTIMER, impl)


def make_spinner(device_index: int, sm_count: int, stamper: Any, impl: str = "auto", programs_per_sm: int = 4) -> Any:
    """A working FMA spinner on %globaltimer (Triton first, CuPy as fallback), checked against `stamper`."""
    return _make_spinner(device_index, sm_count, stamper, GLOBALTIMER, impl, programs_per_sm)
