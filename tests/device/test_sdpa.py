"""`fingrav.device.sdpa`: attention's shapes and bytes, and which SDPA backend torch ran (the profiler's op names),
probed on the real (CPU) torch."""

from __future__ import annotations

from optional import import_or_skip

from fingrav.config import AttentionKernel
from fingrav.device.sdpa import SDPA_OPS, UNKNOWN, attention_sizes, backend_of_ops, probe_backend


def test_attention_sizes_and_backend_names() -> None:
    k = AttentionKernel(batch=2, heads=4, q_len=8, kv_len=16, head_dim=32)
    sz = attention_sizes(k, 2)
    assert sz["q"] == (2, 4, 8, 32) and sz["kv"] == (2, 4, 16, 32) and sz["out"] == sz["q"]
    assert sz["set_bytes"] == 2 * 2 * 4 * 32 * (8 + 2 * 16) and sz["flops"] == k.work().flop
    assert backend_of_ops(["aten::transpose", "aten::_scaled_dot_product_efficient_attention"]) == (
        "efficient",
        "aten::_scaled_dot_product_efficient_attention",
    )
    assert backend_of_ops(["aten::mm"]) == (UNKNOWN, None)
    assert set(SDPA_OPS.values()) >= {"flash", "efficient", "cudnn", "math"}


def test_probe_names_the_backend_torch_ran_on_cpu_torch() -> None:
    """On the real torch (CPU build): the default SDPA dispatch and a forced math backend are told apart by the
    profiler's op names; a profiler that fails leaves the backend unknown, with the reason, and raises nothing."""
    torch = import_or_skip("torch", "pip install -e '.[test,torch]'")
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sdpa = torch.nn.functional.scaled_dot_product_attention
    q = torch.randn(1, 2, 16, 8)
    k = torch.randn(1, 2, 16, 8)
    got = probe_backend(torch, lambda: sdpa(q, k, k, is_causal=True), q, k, k, True)
    assert got["sdpa_backend"] in SDPA_OPS.values() and got["sdpa_backend"] != "math", got
    assert got["sdpa_op"] in SDPA_OPS

    def forced_math() -> None:
        with sdpa_kernel([SDPBackend.MATH]):
            sdpa(q, k, k)

    assert probe_backend(torch, forced_math, q, k, k, False)["sdpa_backend"] == "math"

    def fails() -> None:
        raise RuntimeError("no profiler here")

    broken = probe_backend(torch, fails, q, k, k, False)
    assert broken["sdpa_backend"] == UNKNOWN and "no profiler here" in broken["sdpa_probe"]
