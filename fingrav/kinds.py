"""The kernel-kind registry: everything that differs between `kernel.kind` values, in one place.

GPU-side module (stdlib + `fingrav.contracts.work`; no pydantic, no torch). Every member of the config's
discriminated union `fingrav.config.Kernel` has one `KernelKind` entry, keyed by its ``kind`` literal;
`tests/test_kinds.py` checks that each entry is complete and that each of its hooks exists (the config model,
the work model, the torch preparation, the simulator model, the export fields). Every lookup goes through
`kind_of()`, which fails loudly on a kind without an entry (there is no default kind behaviour).

Adding a kernel kind (the drill in docs/ARCHITECTURE.md, "Adding a kernel kind"): a pydantic model in
`fingrav.config` added to the `Kernel` union, an entry here (with its work model), a `TorchGPUDevice` method
named by `torch_prepare` (`fingrav/device/torch_device.py`), its shape in every simulator preset
(`fingrav/device/sim/presets.py`, `Preset.shapes`) and a test in tests/test_config_kernels.py; the registry test
fails until all of them exist.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from fingrav.contracts.work import Work
from fingrav.errors import ConfigError, FingravError

DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}

SimModel = Literal["roofline", "collective"]


# --------------------------------------------------------------------------- work models (flop, bytes per execution)
def gemm_work(k: Any) -> Work:
    """C[m,n] = A[m,k] @ B[k,n]: flop = 2 m n k; bytes = A and B read + C written, once each."""
    m, n, kk = k.m, k.n, k.k
    return Work(flop=2.0 * m * n * kk, bytes=float(DTYPE_BYTES[k.dtype] * (m * kk + kk * n + m * n)), source="model")


def gemv_work(k: Any) -> Work:
    """y[m] = A[m,k] @ x[k]: flop = 2 m k; bytes = A and x read + y written."""
    m, kk = k.m, k.k
    return Work(flop=2.0 * m * kk, bytes=float(DTYPE_BYTES[k.dtype] * (m * kk + kk + m)), source="model")


def attention_work(k: Any) -> Work:
    """flop = 4 b h q kv d (two matmuls), halved when causal; bytes = Q, K, V read + the output written."""
    b, h, q, kv, d = k.batch, k.heads, k.q_len, k.kv_len, k.head_dim
    flop = 4.0 * b * h * q * kv * d * (0.5 if k.causal else 1.0)
    return Work(flop=flop, bytes=float(DTYPE_BYTES[k.dtype] * b * h * d * (2 * q + 2 * kv)), source="model")


def collective_work(k: Any) -> None:
    """No throughput columns for collectives (their bandwidth is a bus bandwidth, not a memory one)."""
    return None


def declared_work(k: Any) -> Work | None:
    """A user kernel's declared work (None when neither flops nor bytes is declared)."""
    if k.flops is None and k.bytes is None:
        return None
    return Work(flop=k.flops, bytes=k.bytes, source="declared")


# --------------------------------------------------------------------------- export fields
def _fields(*names: str) -> Callable[[Mapping[str, Any]], list[tuple[str, Any]]]:
    def shape(kernel: Mapping[str, Any]) -> list[tuple[str, Any]]:
        return [(f, kernel.get(f)) for f in names]

    shape.__doc__ = f"the kernel's {', '.join(names)}"
    return shape


def _args_shape(kernel: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """A user kernel's shape: its factory's keyword arguments, sorted."""
    return sorted((kernel.get("args") or {}).items())


def _matmul_source(kernel: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    return "torch.matmul"


def _sdpa_source(kernel: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    return f"torch.sdpa:{info.get('sdpa_backend') or 'unknown'}"


def _distributed_source(kernel: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    return "torch.distributed"


def _target_source(kernel: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    return str(kernel.get("target"))


@dataclass(frozen=True)
class KernelKind:
    """What one `kernel.kind` means.

    kind: the config discriminator; label: what a figure or table calls it; model: the class name of its
    pydantic model in `fingrav.config` (a member of `Kernel`); collective: it runs across the GPUs of a lockstep
    group (`device.world_size` >= 2);
    work: its work model, the kernel model -> `Work` (flop and bytes per execution; None: no throughput columns);
    torch_prepare: the `TorchGPUDevice` method that allocates and warms it up on a GPU;
    sim_model: how the simulated GPU models it ("roofline": the work at the preset's peak rates,
    `fingrav.device.sim.kernels._roofline`; "collective": ring latency + bus bandwidth, `_build_collective`);
    export_shape: the kernel's dict -> the (name, value) pairs of the export's ``shape`` column;
    export_source: (kernel dict, the prepared kernel's ``describe()``) -> the export's ``kernel_source`` on a GPU;
    example: a minimal valid config of it (tests and docs).
    """

    kind: str
    label: str
    model: str
    collective: bool
    work: Callable[[Any], Work | None]
    torch_prepare: str
    sim_model: SimModel
    export_shape: Callable[[Mapping[str, Any]], list[tuple[str, Any]]]
    export_source: Callable[[Mapping[str, Any], Mapping[str, Any]], str]
    example: Mapping[str, Any]


KINDS: Mapping[str, KernelKind] = {
    k.kind: k
    for k in (
        KernelKind(
            kind="gemm",
            label="GEMM",
            model="GemmKernel",
            collective=False,
            work=gemm_work,
            torch_prepare="_prepare_matmul",
            sim_model="roofline",
            export_shape=_fields("m", "n", "k"),
            export_source=_matmul_source,
            example={"kind": "gemm", "m": 1024, "n": 1024, "k": 1024},
        ),
        KernelKind(
            kind="gemv",
            label="GEMV",
            model="GemvKernel",
            collective=False,
            work=gemv_work,
            torch_prepare="_prepare_matmul",
            sim_model="roofline",
            export_shape=_fields("m", "k"),
            export_source=_matmul_source,
            example={"kind": "gemv", "m": 8192, "k": 8192},
        ),
        KernelKind(
            kind="allreduce",
            label="all-reduce",
            model="AllReduceKernel",
            collective=True,
            work=collective_work,
            torch_prepare="_prepare_collective",
            sim_model="collective",
            export_shape=_fields("size_bytes"),
            export_source=_distributed_source,
            example={"kind": "allreduce", "size_bytes": 1 << 20},
        ),
        KernelKind(
            kind="allgather",
            label="all-gather",
            model="AllGatherKernel",
            collective=True,
            work=collective_work,
            torch_prepare="_prepare_collective",
            sim_model="collective",
            export_shape=_fields("size_bytes"),
            export_source=_distributed_source,
            example={"kind": "allgather", "size_bytes": 1 << 20},
        ),
        KernelKind(
            kind="attention",
            label="attention",
            model="AttentionKernel",
            collective=False,
            work=attention_work,
            torch_prepare="_prepare_attention",
            sim_model="roofline",
            export_shape=_fields("batch", "heads", "q_len", "kv_len", "head_dim", "causal"),
            export_source=_sdpa_source,
            example={"kind": "attention", "batch": 1, "heads": 8, "q_len": 512, "kv_len": 512, "head_dim": 64},
        ),
        KernelKind(
            kind="callable",
            label="user callable",
            model="CallableKernel",
            collective=False,
            work=declared_work,
            torch_prepare="_prepare_callable",
            sim_model="roofline",
            export_shape=_args_shape,
            export_source=_target_source,
            example={"kind": "callable", "target": "json:dumps", "flops": 1e9, "bytes": 1e6},
        ),
    )
}


def kind_of(kernel: Any, error: type[FingravError] = ConfigError) -> KernelKind:
    """The registry entry of a kernel model, its dict, or a kind name; `error` (ConfigError; the device layer asks
    for DeviceError) for a kind without one."""
    if isinstance(kernel, str):
        kind: Any = kernel
    elif isinstance(kernel, Mapping):
        kind = kernel.get("kind")
    else:
        kind = getattr(kernel, "kind", None)
    try:
        return KINDS[kind]
    except (KeyError, TypeError):
        raise error(f"kernel kind {kind!r} has no entry in fingrav.kinds.KINDS (known: {', '.join(KINDS)})") from None


def is_collective(kernel: Any) -> bool:
    """Whether a kernel model (or its dict) is a collective across GPUs."""
    return kind_of(kernel).collective
