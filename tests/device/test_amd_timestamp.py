"""fingrav/device/amd/timestamp.py: s_memrealtime ticks (100 MHz on gfx9) to ns in exact integer arithmetic, and
the ticks that cover a duration."""

from __future__ import annotations

import numpy as np

from fingrav.device.amd import timestamp as T


def test_ticks_become_ns_exactly_even_for_64_bit_counters() -> None:
    ticks = np.array([0, 1, 2**62 // 10 - 1], dtype=np.int64)
    ns = T.realtime_ticks_to_ns(ticks)
    assert ns.dtype == np.int64 and ns.tolist() == [0, 10, (2**62 // 10 - 1) * 10]  # no float64 rounding


def test_another_rate_goes_through_float_and_keeps_the_rate() -> None:
    assert T.realtime_ticks_to_ns([3], hz=25_000_000).tolist() == [120]
    assert T.realtime_ticks_to_ns([3], hz=30_000_000).tolist() == [100]  # 1e9 / 3e7 is not whole
    assert T.MEMREALTIME.hz == T.REALTIME_HZ  # the other rate is a copy, the module's spec is unchanged


def test_the_ticks_covering_a_duration_round_up() -> None:
    assert T.realtime_ticks_for_ns(1_000) == 100
    assert T.realtime_ticks_for_ns(1_001) == 101
    assert T.realtime_ticks_for_ns(0) == 0
    assert T.realtime_ticks_for_ns(7, hz=1_000_000_000) == 7


def test_only_triton_reads_it_and_a_wave_is_64_threads() -> None:
    assert T.MEMREALTIME.impls == ("triton",) and T.MEMREALTIME.warp_size == 64
    assert T.MEMREALTIME.asm.startswith("s_memrealtime") and "lgkmcnt(0)" in T.MEMREALTIME.asm  # waits for the read
