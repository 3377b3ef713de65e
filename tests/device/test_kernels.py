"""`fingrav.device.kernels` without a GPU: the vendors' timer specs (ticks <-> ns, implementation order), the CUDA C
of the CuPy kernels, and `make_stamper` / `make_spinner` trying each implementation in turn, one message naming
why each failed (the kernels themselves run on GPUs only)."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.device import kernels as K
from fingrav.device.amd.timestamp import MEMREALTIME
from fingrav.device.nvidia.timestamp import GLOBALTIMER
from fingrav.errors import BackendUnavailableError


def test_timer_ticks_and_ns() -> None:
    assert GLOBALTIMER.hz == 1_000_000_000 and GLOBALTIMER.to_ns([5, 7]).tolist() == [5, 7]
    assert MEMREALTIME.hz == 100_000_000
    assert MEMREALTIME.to_ns(np.array([3])).tolist() == [30] and MEMREALTIME.ticks_for_ns(25) == 3  # rounded up
    odd = K.TimerSpec("odd", "", "", hz=3, warp_size=32, triton_stamp_name="s", triton_spin_name="p")
    assert odd.to_ns([3]).tolist() == [1_000_000_000] and odd.ticks_for_ns(1) == 1
    assert GLOBALTIMER.impls == ("triton", "cupy") and MEMREALTIME.impls == ("triton",)


def test_cuda_source_reads_the_timer() -> None:
    src = K.cuda_source(GLOBALTIMER)
    assert "@READ" not in src and GLOBALTIMER.cuda_read.format(var="now") in src
    with pytest.raises(BackendUnavailableError, match="no CUDA C implementation of the s_memrealtime kernels"):
        K.cuda_source(MEMREALTIME)


def test_impl_choice() -> None:
    assert K._impls(GLOBALTIMER, "auto") == ("triton", "cupy") and K._impls(GLOBALTIMER, "cupy") == ("cupy",)
    with pytest.raises(ValueError, match="impl='cupy': one of"):
        K._impls(MEMREALTIME, "cupy")


class _Fails:
    def __init__(self, *a, **kw) -> None:
        raise ImportError("no triton here")


class _Works:
    name = "works"
    programs = 8

    def __init__(self, *a, **kw) -> None:
        pass


def test_make_stamper_falls_back_and_names_every_failure(monkeypatch) -> None:
    monkeypatch.setattr(K, "_STAMPERS", {"triton": _Fails, "cupy": _Works})
    monkeypatch.setattr(K, "self_test_stamper", lambda s, i: None)
    assert isinstance(K.make_stamper(0, GLOBALTIMER), _Works)  # Triton failed, CuPy works
    monkeypatch.setattr(K, "_STAMPERS", {"triton": _Fails, "cupy": _Fails})
    with pytest.raises(BackendUnavailableError) as err:
        K.make_stamper(0, GLOBALTIMER)
    assert "triton: ImportError: no triton here" in str(err.value) and "cupy: ImportError" in str(err.value)


def test_make_spinner_runs_its_self_test(monkeypatch) -> None:
    monkeypatch.setattr(K, "_SPINNERS", {"triton": _Works})

    def self_test(spinner, stamper, index):
        raise RuntimeError("stamped 10 ns for 20000 ns")

    monkeypatch.setattr(K, "self_test_spinner", self_test)
    with pytest.raises(BackendUnavailableError, match="triton: RuntimeError: stamped 10 ns for 20000 ns"):
        K.make_spinner(0, 132, stamper=None, timer=MEMREALTIME)
    monkeypatch.setattr(K, "self_test_spinner", lambda *a: None)
    assert K.make_spinner(0, 132, stamper=None, timer=MEMREALTIME).programs == 8
