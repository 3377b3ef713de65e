"""Attention through torch.nn.functional.scaled_dot_product_attention (SDPA): operand shapes, and which backend
torch chose.

GPU-side module (standard library only; torch is passed in by the caller). torch picks an SDPA backend per call
from the shapes, dtype, mask and device (FlashAttention, memory-efficient, cuDNN, math; on a CPU its own flash
kernel). fingrav records the one that ran: the warm-up execution is run once under `torch.profiler`, and the aten
op that `aten::scaled_dot_product_attention` dispatched to names the backend (`SDPA_OPS`; public API, works on
CPU and GPU builds alike); the GPU kernels the profiler saw and torch's own choice function
(`torch._fused_sdp_choice`, private: recorded only as a cross-check when it exists) are recorded beside it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any

logger = logging.getLogger(__name__)

# the aten op scaled_dot_product_attention dispatches to -> the backend's name
SDPA_OPS: dict[str, str] = {
    "aten::_scaled_dot_product_flash_attention": "flash",
    "aten::_scaled_dot_product_flash_attention_for_cpu": "flash-cpu",
    "aten::_scaled_dot_product_efficient_attention": "efficient",
    "aten::_scaled_dot_product_cudnn_attention": "cudnn",
    "aten::_scaled_dot_product_attention_math": "math",
    "aten::_scaled_dot_product_fused_attention_overrideable": "overrideable",
}
UNKNOWN = "unknown"
MAX_KERNEL_NAMES = 8


def attention_sizes(kernel: Any, element_bytes: int) -> dict[str, Any]:
    """Shapes (elements), bytes and flop of a `fingrav.config.AttentionKernel`: q and the output [b, h, q_len, d],
    k and v [b, h, kv_len, d]; set_bytes: one input set (q, k, v)."""
    b, h, q, kv, d = (int(kernel.batch), int(kernel.heads), int(kernel.q_len), int(kernel.kv_len), int(kernel.head_dim))
    work = kernel.work()
    return {
        "kind": "attention",
        "dtype": str(kernel.dtype),
        "q": (b, h, q, d),
        "kv": (b, h, kv, d),
        "out": (b, h, q, d),
        "causal": bool(kernel.causal),
        "flops": work.flop,
        "set_bytes": element_bytes * b * h * d * (q + 2 * kv),
        "bytes": work.bytes,
    }


def backend_of_ops(names: Iterable[str]) -> tuple[str, str | None]:
    """(backend, aten op) from the op names a profiler saw during one SDPA call; (UNKNOWN, None) when none of
    `SDPA_OPS` is among them."""
    seen = set(names)
    for op, backend in SDPA_OPS.items():
        if op in seen:
            return backend, op
    return UNKNOWN, None


def _choice(torch: Any, q: Any, k: Any, v: Any, causal: bool) -> str | None:
    """torch's own backend choice for these inputs (`torch._fused_sdp_choice`, private), or None."""
    fn = getattr(torch, "_fused_sdp_choice", None)
    if fn is None:
        return None
    try:
        index = int(fn(q, k, v, None, 0.0, causal))
        from torch.nn.attention import SDPBackend

        return str(SDPBackend(index).name)
    except Exception as exc:  # a private function: its signature may change
        logger.debug("torch._fused_sdp_choice failed: %s: %s", type(exc).__name__, exc)
        return None


def probe_backend(torch: Any, launch: Callable[[], Any], q: Any, k: Any, v: Any, causal: bool) -> dict[str, Any]:
    """Run `launch()` (one SDPA execution) once under torch.profiler and say which backend ran: {"sdpa_backend",
    "sdpa_op", "sdpa_gpu_kernels", "sdpa_choice", "sdpa_probe"}. Never raises: a profiler that fails gives
    backend UNKNOWN and the reason in "sdpa_probe"."""
    out: dict[str, Any] = {"sdpa_backend": UNKNOWN, "sdpa_op": None, "sdpa_gpu_kernels": [], "sdpa_probe": None}
    out["sdpa_choice"] = _choice(torch, q, k, v, causal)
    try:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        on_gpu = bool(getattr(q, "is_cuda", False))
        if on_gpu:
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities) as prof:
            launch()
            if on_gpu:
                torch.cuda.synchronize()
        events = list(prof.events())
        out["sdpa_backend"], out["sdpa_op"] = backend_of_ops(e.name for e in events)
        gpu = [e.name for e in events if str(getattr(e, "device_type", "")).upper().endswith(("CUDA", "PRIVATEUSE1"))]
        out["sdpa_gpu_kernels"] = sorted(set(gpu))[:MAX_KERNEL_NAMES]
        out["sdpa_probe"] = (
            "torch.profiler: the aten op scaled_dot_product_attention dispatched to"
            if out["sdpa_op"] is not None
            else f"torch.profiler saw none of the SDPA backend ops ({len(events)} events)"
        )
    except Exception as exc:
        out["sdpa_probe"] = f"torch.profiler failed ({type(exc).__name__}: {exc})"
        logger.warning("SDPA backend unknown: %s", out["sdpa_probe"])
    if out["sdpa_backend"] == UNKNOWN and out["sdpa_choice"] is not None:
        logger.info("SDPA backend from torch._fused_sdp_choice only: %s", out["sdpa_choice"])
    return out
