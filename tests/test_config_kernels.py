"""The attention and callable kernel models: labels, work (flop, bytes), and what the config refuses."""

from __future__ import annotations

import copy

import pytest
from conftest import tiny_config

from fingrav.config import AttentionKernel, CallableKernel, GemmKernel, GemvKernel, parse_config
from fingrav.errors import ConfigError

PREFILL = {"kind": "attention", "batch": 2, "heads": 8, "q_len": 1024, "kv_len": 1024, "head_dim": 64, "causal": True}


def _with_kernel(kernel: dict, backend: str = "sim") -> dict:
    data = copy.deepcopy(tiny_config())
    data["scenarios"] = [{"name": "k", "kernel": kernel}]
    if backend != "sim":
        data["device"] = {"backend": backend}
    return data


def test_attention_work_label_and_causal_halving() -> None:
    a = AttentionKernel(batch=2, heads=8, q_len=1024, kv_len=2048, head_dim=64, dtype="fp16")
    assert a.label() == "attention b2 h8 q1024 kv2048 d64 fp16"
    w = a.work()
    assert w.flop == 4 * 2 * 8 * 1024 * 2048 * 64 and w.source == "model"
    assert w.bytes == 2 * 2 * 8 * 64 * (2 * 1024 + 2 * 2048)  # q + out (q_len), k + v (kv_len), 2 bytes each
    causal = AttentionKernel(batch=2, heads=8, q_len=1024, kv_len=1024, head_dim=64, causal=True)
    full = causal.model_copy(update={"causal": False})
    assert causal.work().flop == full.work().flop / 2 and causal.work().bytes == full.work().bytes
    assert causal.label().endswith("d64 causal bf16")


def test_gemm_and_gemv_work_are_the_textbook_counts() -> None:
    assert GemmKernel(m=3, n=5, k=7).work().flop == 2 * 3 * 5 * 7
    assert GemmKernel(m=3, n=5, k=7, dtype="fp32").work().bytes == 4 * (3 * 7 + 7 * 5 + 3 * 5)
    assert GemvKernel(m=3, k=7).work().bytes == 2 * (3 * 7 + 7 + 3) and GemvKernel(m=3, k=7).work().flop == 42


def test_causal_attention_needs_equal_lengths() -> None:
    with pytest.raises(ConfigError, match="causal attention needs q_len == kv_len"):
        parse_config(_with_kernel({**PREFILL, "q_len": 1}))


def test_attention_operands_are_bounded() -> None:
    with pytest.raises(ConfigError, match="GiB of operands"):
        parse_config(_with_kernel({**PREFILL, "batch": 4096, "q_len": 65536, "kv_len": 65536, "head_dim": 256}))


def test_callable_declares_work_and_labels_itself() -> None:
    c = CallableKernel(target="pkg.mod:make", args={"n": 8}, flops=8.0, bytes=96.0)
    assert c.label() == "callable make" and c.work().flop == 8.0 and c.work().source == "declared"
    assert CallableKernel(target="pkg.mod:make", name="add").label() == "callable add"
    assert CallableKernel(target="pkg.mod:make").work() is None
    assert CallableKernel(target="examples/add.py:make").target == "examples/add.py:make"


@pytest.mark.parametrize("target", ["pkg.mod", "pkg.mod:", ":make", "pkg mod:make", "pkg.mod:ma-ke"])
def test_callable_target_must_name_a_factory(target: str) -> None:
    with pytest.raises(ConfigError, match="target"):
        parse_config(_with_kernel({"kind": "callable", "target": target, "bytes": 1.0}))


def test_a_callable_on_the_simulator_needs_its_work() -> None:
    """The simulator models a callable by its declared work: without flops or bytes it has nothing to model;
    a GPU backend needs neither (the columns are then empty)."""
    bare = {"kind": "callable", "target": "pkg.mod:make"}
    with pytest.raises(ConfigError, match=r"scenarios\['k'\].kernel: a callable on the simulated GPU needs flops"):
        parse_config(_with_kernel(bare))
    assert parse_config(_with_kernel(bare, backend="nvml")).scenarios[0].kernel.work() is None
    assert parse_config(_with_kernel({**bare, "bytes": 12.0})).scenarios[0].kernel.work().bytes == 12.0
