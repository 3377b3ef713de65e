"""Attention and user kernels on the torch device: the device's bookkeeping (input sets, graph capture, the
stream-mode fallback, provenance) on the fake torch (`fingrav.testing.fakes.fake_torch`). The SDPA shapes and
backend probe: tests/device/test_sdpa.py."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import numpy as np
import pytest

from fingrav.config import AttentionKernel, CallableKernel
from fingrav.device.sdpa import UNKNOWN
from fingrav.errors import DeviceError
from fingrav.testing.fakes.fake_torch import FakeGPUClock, device_class, fake_torch_module

HERE = Path(__file__).resolve().parent
_CLOCK = None  # the fake GPU clock the user factory below advances (set by the tests)


def make_fake_kernel(ns: int = 5000):
    """A user factory for the fake GPU: its launch function advances the fake clock by `ns` (recorded into a
    graph while one is being captured, like a real kernel launch)."""
    clock = _CLOCK

    def launch() -> None:
        def op() -> None:
            clock.t += ns

        if clock.capturing is not None:
            clock.capturing.append(op)
        else:
            op()

    return launch


# --------------------------------------------------------------------------- the torch device on a fake torch
@pytest.fixture
def fake(monkeypatch):
    global _CLOCK
    clock = FakeGPUClock()
    torch = fake_torch_module(clock, l2_bytes=1 << 20)
    calls: list[tuple] = []

    def sdpa(q, k, v, is_causal=False):
        def op() -> None:
            calls.append((id(q), is_causal))
            clock.t += 3000

        if clock.capturing is not None:
            clock.capturing.append(op)
        else:
            op()

    torch.nn = types.SimpleNamespace(functional=types.SimpleNamespace(scaled_dot_product_attention=sdpa))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.syspath_prepend(str(HERE))
    _CLOCK = clock
    yield types.SimpleNamespace(clock=clock, calls=calls, device=device_class(clock))
    _CLOCK = None


def test_attention_on_the_torch_device(fake) -> None:
    dev = fake.device()
    h = dev.prepare(AttentionKernel(batch=1, heads=2, q_len=16, kv_len=16, head_dim=8, causal=True))
    assert h.n_sets > 1  # 3 KB a set against a 1 MB L2: rotated like a GEMM's inputs
    assert all(s.a.shape == (1, 2, 16, 8) for s in h.sets[0])
    info = h.describe()
    assert info["label"] == "attention b1 h2 q16 kv16 d8 causal bf16" and info["input_sets"] == h.n_sets
    assert info["sdpa_backend"] == UNKNOWN and info["sdpa_probe"]  # the fake's SDPA is no aten op: not named
    fake.calls.clear()
    rec = dev.execute([(h, 10)])
    assert np.all(rec.duration_ns == 3010) and fake.clock.captures > 0  # kernel + one stamp, from graphs
    assert [c[0] for c in fake.calls] == [id(h.sets[j % h.n_sets][0]) for j in range(10)]
    assert all(causal for _, causal in fake.calls)


def test_callable_on_the_torch_device_and_the_recorded_fallback(fake) -> None:
    dev = fake.device()
    kernel = CallableKernel(target="test_torch_kernels:make_fake_kernel", args={"ns": 7000}, bytes=64.0)
    h = dev.prepare(kernel)
    assert h.describe() == {"label": "callable make_fake_kernel", "input_sets": 1, "target": kernel.target}
    assert np.all(dev.execute([(h, 5)]).duration_ns == 7010) and dev.launch_mode == "graph"
    assert dev.describe()["graph_capture_error"] is None
    fake.clock.fail_capture = True
    rec = dev.execute([(h, 3)])  # a count never captured: capture fails -> stream launches, recorded
    assert np.all(rec.duration_ns == 7010) and dev.launch_mode == "stream"
    d = dev.describe()
    assert d["launch_mode"] == "stream" and "callable make_fake_kernel: RuntimeError" in d["graph_capture_error"]


def test_a_failing_factory_stops_prepare_with_one_message(fake) -> None:
    dev = fake.device()
    with pytest.raises(DeviceError, match=r"'test_torch_kernels:make_fake_kernel': the factory raised TypeError"):
        dev.prepare(CallableKernel(target="test_torch_kernels:make_fake_kernel", args={"bogus": 1}))
