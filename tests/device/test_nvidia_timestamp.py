"""fingrav/device/nvidia/timestamp.py: %globaltimer is a ns counter (to_ns the identity, no float rounding of
epoch-sized stamps), read by one PTX instruction in both implementations, Triton first."""

from __future__ import annotations

import numpy as np

from fingrav.device.nvidia import timestamp as T


def test_globaltimer_stamps_are_ns_unchanged() -> None:
    stamps = np.array([1_790_000_000_123_456_789, 1_790_000_000_123_456_821], dtype=np.int64)  # 32 ns apart
    out = T.GLOBALTIMER.to_ns(stamps)
    assert out.dtype == np.int64 and np.array_equal(out, stamps)
    assert T.GLOBALTIMER.ticks_for_ns(1_001) == 1_001


def test_both_implementations_read_the_same_register_triton_first() -> None:
    g = T.GLOBALTIMER
    assert "%globaltimer" in g.asm and "%%globaltimer" in g.cuda_read  # CUDA C escapes the %
    assert g.impls[0] == "triton" and set(g.impls) == {"triton", "cupy"} and set(T.IMPLS) == {"auto", *g.impls}
