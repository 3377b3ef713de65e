"""Synthetic raw data with known answers, for tests and the scale benchmark (numpy + polars only).

The "sensor" is ideal except for a reporting delay: a sample stamped t_ns reports the instantaneous
power at t_ns - delay_ns, so after delay correction every LOI's power equals the level of the role
of its execution exactly. Executions run back to back after an idle and a random delay; GPU stamps
come from the host timeline through the inverse of host = gpu + offset + drift * (gpu - gpu_ref).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

logger = logging.getLogger(__name__)


@dataclass
class SynthSpec:
    """What to generate. Times ns, power mW; drift as a fraction."""

    runs: int = 60
    exec_time_ns: int = 200_000
    exec_jitter: float = 0.002  # relative sd of the run's execution time
    outlier_runs: tuple[int, ...] = ()  # these runs execute `outlier_factor` x slower
    outlier_factor: float = 1.3
    warmups: int = 3
    ssp_index: int = 6
    tail: int = 4
    trailing: int = 0  # executions after the SSP tail (role "trail", level of "ssp")
    launch_gap_ns: int = 0  # idle gap after every execution but a run's last, at levels_mw["gap"]
    predecessor_count: int = 0
    pred_exec_time_ns: int = 100_000
    idle_ns: int = 2_000_000
    max_delay_ns: int = 1_000_000
    sample_period_ns: int = 20_000
    delay_ns: int = 0
    offset_ns: int = 163_000
    gpu_ref_ns: int = 10_000_000_000
    drift: float = 0.0
    levels_mw: dict[str, float] = field(
        default_factory=lambda: {
            "idle": 100_000.0,
            "pred": 500_000.0,
            "first": 450_000.0,
            "warmup": 300_000.0,
            "sse": 350_000.0,
            "ssp": 400_000.0,
            "gap": 150_000.0,
        }
    )
    channel_scale: dict[str, float] = field(default_factory=lambda: {"total": 1.0, "memory": 0.25})
    margin: float = 0.05
    seed: int = 0
    host_t0_ns: int = 1_000_000_000_000


def _roles(spec: SynthSpec) -> np.ndarray:
    """Role names of the executions of one run (pred first, then main)."""
    main = []
    for i in range(spec.ssp_index + spec.tail + spec.trailing):
        if i >= spec.ssp_index + spec.tail:
            main.append("trail")
        elif i >= spec.ssp_index:
            main.append("ssp")
        elif i == spec.warmups:
            main.append("sse")
        elif i == 0 and spec.predecessor_count:
            main.append("first")
        else:
            main.append("warmup")
    return np.array(["pred"] * spec.predecessor_count + main, dtype=object)


def generate(spec: SynthSpec) -> dict[str, Any]:
    """Frames (executions, runs, samples, clock, truth), plan, clock fit dict and sensor dict.

    Run 0.. are measure runs; every execution's true power is levels_mw[role] x channel scale
    ("trail" at the "ssp" level), levels_mw["gap"] in launch gaps. Truth power is the cycle mean
    (start to the next start; start to end for a run's last execution), truth energy start to end."""
    rng = np.random.default_rng(spec.seed)
    n_main = spec.ssp_index + spec.tail + spec.trailing
    n_ex = spec.predecessor_count + n_main
    roles = _roles(spec)
    r = spec.runs
    # per-run execution time of the main kernel (constant within a run), ns
    t_main = spec.exec_time_ns * (1.0 + spec.exec_jitter * rng.standard_normal(r))
    if spec.outlier_runs:
        t_main[list(spec.outlier_runs)] *= spec.outlier_factor
    dur = np.empty((r, n_ex), dtype=np.int64)
    dur[:, : spec.predecessor_count] = spec.pred_exec_time_ns
    dur[:, spec.predecessor_count :] = np.rint(t_main)[:, None].astype(np.int64)
    delay = rng.integers(0, max(spec.max_delay_ns, 1), size=r)
    gap = np.full((r, n_ex), spec.launch_gap_ns, dtype=np.int64)
    gap[:, -1] = 0
    busy = (dur + gap).sum(axis=1)
    span = spec.idle_ns + delay + busy
    run_begin = spec.host_t0_ns + np.concatenate([[0], np.cumsum(span)[:-1]])
    host_start_run = run_begin + spec.idle_ns + delay
    cycle_ends = host_start_run[:, None] + np.cumsum(dur + gap, axis=1)
    starts = cycle_ends - dur - gap
    ends = starts + dur
    host_end = int(ends[-1, -1]) + spec.idle_ns

    def to_gpu(h: np.ndarray) -> np.ndarray:
        h = np.asarray(h, dtype=np.int64)
        rel = (h - spec.offset_ns - spec.gpu_ref_ns).astype(np.float64) / (1.0 + spec.drift)
        return spec.gpu_ref_ns + np.rint(rel).astype(np.int64)

    seg = np.where(np.arange(n_ex) < spec.predecessor_count, "pred", "main")
    idx = np.concatenate([np.arange(spec.predecessor_count), np.arange(n_main)]).astype(np.int32)
    executions = pl.DataFrame(
        {
            "run": np.repeat(np.arange(r, dtype=np.int32), n_ex),
            "segment": np.tile(seg, r),
            "exec_index": np.tile(idx, r),
            "gpu_start_ns": to_gpu(starts.ravel()),
            "gpu_end_ns": to_gpu(ends.ravel()),
        }
    )
    runs = pl.DataFrame(
        {
            "run": np.arange(r, dtype=np.int32),
            "phase": ["measure"] * r,
            "host_start_ns": host_start_run,
            "delay_ns": delay.astype(np.int64),
            "idle_ns": np.full(r, spec.idle_ns, np.int64),
            "energy_start_mj": np.full(r, None),
            "energy_end_mj": np.full(r, None),
        },
        schema={
            "run": pl.Int32,
            "phase": pl.String,
            "host_start_ns": pl.Int64,
            "delay_ns": pl.Int64,
            "idle_ns": pl.Int64,
            "energy_start_mj": pl.Float64,
            "energy_end_mj": pl.Float64,
        },
    )

    # samples: reported at t, showing the power at t - delay_ns
    t_true = np.arange(spec.host_t0_ns, host_end, spec.sample_period_ns, dtype=np.int64)
    t_true = t_true + rng.integers(0, max(spec.sample_period_ns // 4, 1), size=t_true.size)
    flat_s, flat_e, flat_c = starts.ravel(), ends.ravel(), cycle_ends.ravel()
    k = np.searchsorted(flat_s, t_true, side="right") - 1
    kc = np.clip(k, 0, None)
    inside = (k >= 0) & (t_true < flat_e[kc])
    in_gap = (k >= 0) & ~inside & (t_true < flat_c[kc])
    role_of_exec = np.tile(roles, r)
    level_of_exec = np.array([spec.levels_mw["ssp" if x == "trail" else x] for x in role_of_exec])
    p_true = np.full(t_true.size, spec.levels_mw["idle"])
    p_true[inside] = level_of_exec[k[inside]]
    p_true[in_gap] = spec.levels_mw["gap"]
    g_flat = gap.ravel()
    cycle_mean = (level_of_exec * dur.ravel() + spec.levels_mw["gap"] * g_flat) / (dur.ravel() + g_flat)
    chans = list(spec.channel_scale)
    samples = pl.DataFrame(
        {
            "t_ns": np.tile(t_true + spec.delay_ns, len(chans)),
            "channel": np.repeat(chans, t_true.size),
            "power_mw": np.concatenate([p_true * spec.channel_scale[c] for c in chans]),
        }
    ).sort("t_ns", maintain_order=True)

    truth = pl.DataFrame(
        {
            "run": np.tile(executions["run"].to_numpy(), len(chans)),
            "segment": np.tile(executions["segment"].to_numpy(), len(chans)),
            "exec_index": np.tile(executions["exec_index"].to_numpy(), len(chans)),
            "channel": np.repeat(chans, executions.height),
            "power_mw": np.concatenate([cycle_mean * spec.channel_scale[c] for c in chans]),
            "energy_mj": np.concatenate([level_of_exec * spec.channel_scale[c] * dur.ravel() * 1e-9 for c in chans]),
        }
    )
    g = to_gpu(np.linspace(spec.host_t0_ns, host_end, 50).astype(np.int64))
    h = spec.offset_ns + g + np.rint(spec.drift * (g - spec.gpu_ref_ns)).astype(np.int64)
    clock = pl.DataFrame(
        {
            "host_before_ns": h - 5_000,
            "gpu_ns": g,
            "host_after_ns": h + 5_000,
            "source": ["burst"] * g.size,
            "run": np.full(g.size, -1, np.int32),
        }
    )
    plan = {
        "exec_time_ns": float(spec.exec_time_ns),
        "warmups": spec.warmups,
        "sse_index": spec.warmups,
        "ssp_index": spec.ssp_index,
        "executions_per_run": n_main,
        "tail": spec.tail,
        "trailing": spec.trailing,
        "runs": r,
        "margin": spec.margin,
        "predecessor_count": spec.predecessor_count,
        "sensor": {
            "period_ns": spec.sample_period_ns,
            "delay_ns": spec.delay_ns,
            "window_ns": 1_000,
            "lag_ns": 0,
            "settle_ns": 0,
        },
        "probe": {"settled": True},
        "lois_wanted": 30,
        "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"},
        "backend": "synthetic",
    }
    return {
        "executions": executions,
        "runs": runs,
        "samples": samples,
        "clock": clock,
        "truth": truth,
        "plan": plan,
        "clock_fit": {
            "offset_ns": spec.offset_ns,
            "gpu_ref_ns": spec.gpu_ref_ns,
            "drift": spec.drift,
            "residual_ns": 100.0,
        },
        "sensor": dict(plan["sensor"]),
    }
