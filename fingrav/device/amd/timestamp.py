"""AMD GPU time: ``s_memrealtime``, read by the shared kernels of `fingrav.device.kernels`.

GPU-side module (Triton and torch are imported when a kernel is made). ``s_memrealtime`` reads the 64-bit
"REFCLK" real-time counter, a constant 100 MHz clock on gfx9 parts (MI300X is gfx942) that does not follow
the shader clock; ticks x 10 = ns. One wave reads the counter into an SGPR pair ("=s") and waits for the
scalar-memory result (lgkmcnt) before using it. The kernels have NOT been run on hardware yet
(docs/AMD.md); clock sync measures their offset and drift against the host clock, so a wrong rate would
show up as a huge drift (flag ``clock_drift``). Triton only (no CuPy on ROCm); spin programs are 256
threads = 4 wavefronts of 64.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

from fingrav.device.kernels import TimerSpec
from fingrav.device.kernels import make_spinner as _make_spinner
from fingrav.device.kernels import make_stamper as _make_stamper

logger = logging.getLogger(__name__)

REALTIME_HZ = 100_000_000  # s_memrealtime on gfx9 (MI300X): constant 100 MHz
MEMREALTIME_ASM = "s_memrealtime $0\ns_waitcnt lgkmcnt(0)"

MEMREALTIME = TimerSpec(
    name="s_memrealtime",
    asm=MEMREALTIME_ASM,
    constraint="=s",
    hz=REALTIME_HZ,
    warp_size=64,
    triton_stamp_name="triton-memrealtime",
    triton_spin_name="triton-memrealtime-fma-spin",
)


def realtime_ticks_to_ns(ticks: Any, hz: int = REALTIME_HZ) -> np.ndarray:
    """s_memrealtime ticks -> ns (int64; exact integer arithmetic for 100 MHz: x 10)."""
    return _spec(hz).to_ns(ticks)


def realtime_ticks_for_ns(duration_ns: int, hz: int = REALTIME_HZ) -> int:
    """The whole number of s_memrealtime ticks covering `duration_ns` (rounded up)."""
    return _spec(hz).ticks_for_ns(duration_ns)


def _spec(hz: int) -> TimerSpec:
    """MEMREALTIME, at another rate when `hz` differs."""
    return MEMREALTIME if hz == REALTIME_HZ else dataclasses.replace(MEMREALTIME, hz=int(hz))


def make_memrealtime_stamper(device_index: int, hz: int = REALTIME_HZ) -> Any:
    """An s_memrealtime stamper (Triton) that compiled and passed the self-test (two ordered stamps).
    UNVERIFIED on hardware."""
    return _make_stamper(device_index, _spec(hz), "triton")


def make_memrealtime_spinner(device_index: int, sm_count: int, stamper: Any, programs_per_sm: int = 4) -> Any:
    """An FMA spinner on s_memrealtime (Triton) that passed the self-test against `stamper`."""
    return _make_spinner(
        device_index, sm_count, stamper, _spec(getattr(stamper, "hz", REALTIME_HZ)), "triton", programs_per_sm
    )
