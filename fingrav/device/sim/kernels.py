"""Kernel models of the simulated GPU: execution time (roofline) and power levels.

Time (ns) = max(flops / (peak_flops * eff_c), bytes / (peak_bw * eff_m)) + overhead, with flops and bytes
the kernel's work (`fingrav.config`, each kernel's `work()`: GEMM 2 m n k and dtype bytes * (m k + k n + m n)),
eff_c = eff_c_max * s / (s + s_half), s = (m n k) ** (1/3), eff_m = eff_m_max * bytes / (bytes + bytes_half).
Attention (b, h, q, kv, d): flops = 4 b h q kv d (halved when causal), bytes = Q, K, V and the output; s is
the size of the GEMM of the same shape, (b h q * kv * d) ** (1/3), and eff_c is further multiplied by the
preset's `attention_efficiency` (softmax and masking keep a fused attention below a GEMM's rate).
A callable declares its flops and bytes; its efficiencies are its own (`CallableKernel.sim`: fractions of
peak), not the size-dependent curves.

Power: per component, plateau excess over idle (mW) = floor + compute * u_c ** gamma_c
+ memory * u_m ** gamma_m, with u_c = flops / (time * peak_flops) and u_m = bytes / (time * peak_bw);
gamma_c = 0.3 makes compute power strongly sublinear in utilization (no power proportionality).
A kernel whose steady cycle-mean total power would exceed the preset's cap target is "heavy": the
limiter pulls it down to `limiter_level` (fraction L of its clock-sensitive excess) after a while.

Collectives (all-reduce, all-gather over `world_size` GPUs): latency + bandwidth time model and
traffic-driven power (`presets.CollectiveSpec`); u_compute = 0, u_memory = the bus utilization. Each
simulated GPU models its own side of the collective from that model alone: the ranks' virtual clocks are
independent (nothing makes one rank wait for another).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fingrav.device.base import KernelHandle
from fingrav.device.sim.presets import MS, US, KernelShape, Preset, W
from fingrav.errors import DeviceError
from fingrav.kinds import kind_of

logger = logging.getLogger(__name__)

DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}


@dataclass(eq=False)
class SimKernel(KernelHandle):
    """A prepared simulated kernel: everything the simulator needs per execution.

    base_ns: nominal execution time (no jitter, warm-up, outlier or throttling), ns.
    plateau_mw: plateau excess over idle per preset component (mW), unthrottled, clock ramped up.
    limiter_level: L the limiter settles at (1.0 for kernels below the cap): the sustained level.
    burst_level: L the fast limiter holds before a limit cycle starts (the preset's cap_burst_mw; = limiter_level
    without a cycle).
    """

    label: str
    preset: str
    kind: str
    flops: float
    bytes: float
    base_ns: float
    u_compute: float
    u_memory: float
    plateau_mw: np.ndarray
    shape: KernelShape
    heavy: bool
    limiter_level: float
    burst_level: float = 1.0
    placement: np.ndarray = field(default_factory=lambda: np.ones(1))  # time factor per input set (set j: exec j mod)

    def __repr__(self) -> str:
        return f"SimKernel({self.label!r}, {self.base_ns / US:.1f} us)"

    def describe(self) -> dict[str, Any]:
        """The label and the input sets the kernel rotates through (as a torch device's handle reports them)."""
        return {"label": self.label, "input_sets": int(self.placement.size)}


def collective_time_ns(preset: Preset, kind: str, size_bytes: float, world_size: int) -> tuple[float, float]:
    """(nominal time ns, bus-transfer time ns) of a ring collective of `size_bytes` over `world_size` GPUs:
    latency + step latency x steps + factor x size / bus bandwidth (`presets.CollectiveSpec`)."""
    n = int(world_size)
    if n < 2:
        raise DeviceError(f"a {kind} needs at least 2 GPUs (world_size={n})")
    spec = preset.collective
    if kind == "allreduce":
        factor, steps = 2.0 * (n - 1) / n, 2 * (n - 1)
    elif kind == "allgather":
        factor, steps = (n - 1) / n, n - 1
    else:
        raise DeviceError(f"not a collective: {kind!r}")
    transfer = factor * float(size_bytes) / spec.bus_bw_bytes_s(n) * 1e9
    return spec.latency_ns + spec.step_latency_ns * steps + transfer, transfer


def _build_collective(preset: Preset, kernel: Any, world_size: int) -> SimKernel:
    kind, size, dtype = str(kernel.kind), int(kernel.size_bytes), str(kernel.dtype)
    if dtype not in DTYPE_BYTES:
        raise DeviceError(f"the simulated {preset.name} has no dtype {dtype!r}")
    base_ns, transfer_ns = collective_time_ns(preset, kind, size, world_size)
    u_bus = transfer_ns / base_ns
    spec = preset.collective
    plateau = np.asarray(spec.base_mw, dtype=np.float64) + np.asarray(spec.traffic_mw, dtype=np.float64) * u_bus
    n = int(world_size)
    elements = size / DTYPE_BYTES[dtype]
    if kind == "allreduce":
        plateau = plateau + np.asarray(spec.reduce_mw, dtype=np.float64) * u_bus
        flops, nbytes = elements * (n - 1) / n, 2.0 * (n - 1) / n * size
    else:
        flops, nbytes = 0.0, (n - 1) / n * size
    label = kernel.label() if hasattr(kernel, "label") else f"{kind} {size}B {dtype}"
    sk = SimKernel(
        label=label,
        preset=preset.name,
        kind=kind,
        flops=flops,
        bytes=nbytes,
        base_ns=base_ns,
        u_compute=0.0,
        u_memory=u_bus,
        plateau_mw=plateau,
        shape=preset.shapes[kind],
        heavy=False,
        limiter_level=1.0,
        burst_level=1.0,
    )
    idle_total = sum(c.idle_mw for c in preset.components)
    logger.debug(
        "sim %s: %s over %d GPUs %.2f us, u_bus %.3f, plateau %.0f W",
        preset.name,
        label,
        n,
        base_ns / US,
        u_bus,
        (plateau.sum() + idle_total) / W,
    )
    return sk


def _roofline(preset: Preset, kernel: Any) -> tuple[str, float, float, str, float, float]:
    """(kind, flops, bytes, dtype, eff_c, eff_m) of a GEMM / GEMV / attention / callable kernel model."""
    kind = getattr(kernel, "kind", None)
    if kind_of(kernel, DeviceError).sim_model != "roofline":
        raise DeviceError(f"the simulated GPU cannot run kernel {kernel!r} (kind {kind!r}) as a roofline")
    work = kernel.work()
    flops = float(work.flop or 0.0) if work is not None else 0.0
    nbytes = float(work.bytes or 0.0) if work is not None else 0.0
    if kind == "callable":
        dtype = str(kernel.dtype or "fp32")
        if flops <= 0 and nbytes <= 0:
            raise DeviceError(f"{kernel.label()}: the simulated GPU needs its flops and/or bytes (none declared)")
        return kind, flops, nbytes, dtype, float(kernel.sim.compute_efficiency), float(kernel.sim.memory_efficiency)
    dtype = str(kernel.dtype)
    if kind == "attention":
        size = float(kernel.batch * kernel.heads * kernel.q_len * kernel.kv_len * kernel.head_dim) ** (1.0 / 3.0)
        scale = preset.attention_efficiency
    else:
        n = int(kernel.n) if kind == "gemm" else 1
        size = float(int(kernel.m) * n * int(kernel.k)) ** (1.0 / 3.0)
        scale = 1.0
    eff_c = preset.eff_compute_max * size / (size + preset.eff_compute_half_size) * scale
    eff_m = preset.eff_memory_max * nbytes / (nbytes + preset.eff_memory_half_bytes)
    return kind, flops, nbytes, dtype, eff_c, eff_m


def cycle_mean_excess(
    preset: Preset, plateau_mw: np.ndarray, shape: KernelShape, dur_ns: float, gap_ns: float, level: float
) -> np.ndarray:
    """Mean excess power (mW) per component over one back-to-back cycle (execution + launch gap) at
    limiter level `level`, clock fully ramped up."""
    sens = np.array([c.clock_sensitivity for c in preset.components])
    gap = np.array([c.gap_mw for c in preset.components])
    x = plateau_mw * (1.0 - sens * (1.0 - level))
    r = shape.ramp_frac * dur_ns
    tl = shape.tail_frac * dur_ns
    energy = (gap + x) / 2 * r + x * (dur_ns - r - tl) + x * (1 + shape.tail_level) / 2 * tl + gap * gap_ns
    return energy / (dur_ns + gap_ns)


def build_kernel(preset: Preset, kernel: Any, world_size: int = 1) -> SimKernel:
    """Model a `fingrav.config` kernel (GemmKernel / GemvKernel / AttentionKernel / CallableKernel, or
    AllReduceKernel / AllGatherKernel over `world_size` GPUs) on `preset`."""
    if kind_of(kernel, DeviceError).sim_model == "collective":  # the kind's simulator model (fingrav.kinds)
        return _build_collective(preset, kernel, world_size)
    kind, flops, nbytes, dtype, eff_c, eff_m = _roofline(preset, kernel)
    if dtype not in DTYPE_BYTES or dtype not in preset.peak_flops:
        raise DeviceError(f"the simulated {preset.name} has no dtype {dtype!r}")
    peak = preset.peak_flops[dtype]
    t_c = flops / (peak * eff_c) * 1e9
    t_m = nbytes / (preset.peak_bw_bytes_s * eff_m) * 1e9 if nbytes > 0 else 0.0
    base_ns = max(t_c, t_m) + preset.overhead_ns
    u_c = flops / (base_ns * 1e-9 * peak)
    u_m = nbytes / (base_ns * 1e-9 * preset.peak_bw_bytes_s)
    plateau = np.array(
        [
            c.floor_mw + c.compute_mw * u_c**preset.gamma_compute + c.memory_mw * u_m**preset.gamma_memory
            for c in preset.components
        ]
    )
    shape = preset.shapes[kind]
    idle_total = sum(c.idle_mw for c in preset.components)
    target_excess = preset.cap_target_mw - idle_total
    gap = preset.launch_gap_ns
    heavy = float(cycle_mean_excess(preset, plateau, shape, base_ns, gap, 1.0).sum()) > target_excess

    def level_for(excess_mw: float) -> float:
        # the cycle-mean total is linear in L for a given duration; the duration depends on L through
        # the limiter slowdown: a few fixed-point iterations
        level = 1.0
        for _ in range(6):
            dur = base_ns * (1.0 + preset.limiter_slowdown * (1.0 - level))
            a = float(cycle_mean_excess(preset, plateau, shape, dur, gap, 0.0).sum())
            b = float(cycle_mean_excess(preset, plateau, shape, dur, gap, 1.0).sum()) - a
            level = float(np.clip((excess_mw - a) / b, 0.2, 1.0))
        return level

    level = level_for(target_excess) if heavy else 1.0
    burst = level_for(max(preset.cap_burst_mw, preset.cap_target_mw) - idle_total) if heavy else 1.0
    label = kernel.label() if hasattr(kernel, "label") else f"{kind} {dtype}"
    sk = SimKernel(
        label=label,
        preset=preset.name,
        kind=kind,
        flops=flops,
        bytes=nbytes,
        base_ns=base_ns,
        u_compute=u_c,
        u_memory=u_m,
        plateau_mw=plateau,
        shape=shape,
        heavy=heavy,
        limiter_level=level,
        burst_level=max(burst, level),
    )
    logger.debug(
        "sim %s: %s %.2f us, u_c %.3f, u_m %.3f, plateau %.0f W, heavy %s (L=%.3f)",
        preset.name,
        label,
        base_ns / US,
        u_c,
        u_m,
        (plateau.sum() + idle_total) / W,
        heavy,
        level,
    )
    return sk


def kernel_summary(preset: Preset, k: SimKernel) -> dict[str, Any]:
    """Nominal numbers of a prepared kernel (JSON-able): time, utilization, steady cycle-mean power
    per component and total (W), before jitter and without the start-up transient: unstamped (what a user's
    back-to-back loop draws, `steady_cycle_w`) and with the stamps' overhead in every gap (`steady_cycle_stamped_w`)."""
    idle = np.array([c.idle_mw for c in preset.components])
    dur = k.base_ns * (1.0 + preset.limiter_slowdown * (1.0 - k.limiter_level))
    steady = cycle_mean_excess(preset, k.plateau_mw, k.shape, dur, preset.launch_gap_ns, k.limiter_level) + idle
    free = cycle_mean_excess(preset, k.plateau_mw, k.shape, k.base_ns, preset.launch_gap_ns, 1.0) + idle
    stamped_gap = preset.launch_gap_ns + preset.stamp_overhead_ns
    stamped = cycle_mean_excess(preset, k.plateau_mw, k.shape, dur, stamped_gap, k.limiter_level) + idle
    return {
        "label": k.label,
        "base_us": k.base_ns / US,
        "steady_us": dur / US,
        "u_compute": k.u_compute,
        "u_memory": k.u_memory,
        "heavy": k.heavy,
        "limiter_level": k.limiter_level,
        "burst_level": k.burst_level,
        "steady_cycle_w": {c.name: float(v) / W for c, v in zip(preset.components, steady, strict=True)}
        | {"total": float(steady.sum()) / W},
        "steady_cycle_stamped_w": {c.name: float(v) / W for c, v in zip(preset.components, stamped, strict=True)}
        | {"total": float(stamped.sum()) / W},
        "unthrottled_cycle_w": float(free.sum()) / W,
        "limiter_settle_ms": (preset.limiter_start_ns + 20 * preset.limiter_tau_ns) / MS if k.heavy else 0.0,
    }
