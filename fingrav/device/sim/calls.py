"""The executions of one or many calls of the simulated GPU, flattened into arrays (`Calls`), and the steps of the
execution model that need no device state, each over every execution of every call at once.

A *call* is one `execute` (or one part of an unstamped run): its segments back to back. `SimulatedGPU` runs a
single call for `execute` and a whole batch of measure runs (`GPUDevice.measure_runs`) as one `Calls`: the
per-execution arrays are built once per batch by indexing a template per kind of run, never per execution in
Python. The steps that carry the device's state from one call to the next (clock ramp, limiter age, warming) are
in `fingrav.device.sim.device`; see its docstring for the model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fingrav.device.sim.kernels import SimKernel
from fingrav.device.sim.presets import Preset
from fingrav.errors import DeviceError

CUT = 20.0  # exponentials past this many time constants are taken as exactly settled


def exclusive_cumsum(x: np.ndarray) -> np.ndarray:
    """[0, x0, x0 + x1, ...] (same length as x)."""
    out = np.empty_like(x)
    if out.size:
        out[0] = 0
        np.cumsum(x[:-1], out=out[1:])
    return out


@dataclass(frozen=True)
class Calls:
    """R calls of n executions in all, in launch order.

    call: (n,) the call of each execution; segment / exec_index: (n,) its segment within the call and its index
    within the segment (int32); handle: (n,) index into `handles`; first / last: (R,) each call's first and last
    execution (every call has at least one); and per execution the kernel's model numbers (base_ns, heavy,
    limiter and burst levels, shape fractions) and its plateau excess per component (K, n), mW."""

    handles: list[SimKernel]
    call: np.ndarray
    segment: np.ndarray
    exec_index: np.ndarray
    handle: np.ndarray
    first: np.ndarray
    last: np.ndarray

    @property
    def n(self) -> int:
        return int(self.call.size)

    @property
    def r(self) -> int:
        return int(self.first.size)

    def of(self, attr: str) -> np.ndarray:
        """A kernel attribute of `SimKernel` per execution (n,)."""
        return np.array([getattr(h, attr) for h in self.handles], dtype=np.float64)[self.handle]

    def shape_of(self, attr: str) -> np.ndarray:
        """A `KernelShape` field per execution (n,)."""
        return np.array([getattr(h.shape, attr) for h in self.handles], dtype=np.float64)[self.handle]

    def plateau(self) -> np.ndarray:
        """Plateau excess per component and execution (K, n), mW."""
        return np.stack([h.plateau_mw for h in self.handles], axis=1)[:, self.handle]

    def placement(self) -> np.ndarray | None:
        """The execution-time factor of each execution's input set (n,): execution j of a segment uses set j mod
        the kernel's sets (`SimKernel.placement`); None when every factor is 1 (nothing to apply)."""
        if all(bool(np.all(h.placement == 1.0)) for h in self.handles):
            return None
        sizes = np.array([h.placement.size for h in self.handles], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        flat = np.concatenate([h.placement for h in self.handles])
        return flat[starts[self.handle] + self.exec_index % sizes[self.handle]]

    def per_call_sum(self, x: np.ndarray) -> np.ndarray:
        """The sum of `x` (n,) over each call's executions (R,)."""
        if self.r == 1:
            return np.array([x.sum()])
        return np.add.reduceat(x, self.first)

    def within_call(self, cum: np.ndarray) -> np.ndarray:
        """An exclusive cumulative sum over all executions (n,) restarted at each call's first execution."""
        return cum - cum[self.first][self.call]

    @staticmethod
    def build(kinds: Sequence[Sequence[tuple[Any, int]]], kind: np.ndarray, preset: str) -> Calls:
        """The calls of runs of several kinds: kinds[k] the segments (handle, count) of kind k, kind (R,) the kind
        of each call in order. Raises DeviceError for a handle another device prepared, ValueError for a negative
        count."""
        handles: list[SimKernel] = []
        ids: dict[int, int] = {}
        tmpl_seg, tmpl_idx, tmpl_h = [], [], []
        for segments in kinds:
            seg, idx, hh = [], [], []
            for s, (h, c) in enumerate(segments):
                if not isinstance(h, SimKernel) or h.preset != preset:
                    raise DeviceError(f"execute: {h!r} was not prepared by this simulated {preset}")
                if int(c) < 0:
                    raise ValueError(f"execute: negative count {c}")
                if id(h) not in ids:
                    ids[id(h)] = len(handles)
                    handles.append(h)
                seg.append(np.full(int(c), s, np.int32))
                idx.append(np.arange(int(c), dtype=np.int32))
                hh.append(np.full(int(c), ids[id(h)], np.int64))
            tmpl_seg.append(np.concatenate(seg) if seg else np.zeros(0, np.int32))
            tmpl_idx.append(np.concatenate(idx) if idx else np.zeros(0, np.int32))
            tmpl_h.append(np.concatenate(hh) if hh else np.zeros(0, np.int64))
        kind = np.asarray(kind, dtype=np.int64)
        sizes = np.array([t.size for t in tmpl_seg], dtype=np.int64)
        counts = sizes[kind]
        width = max(int(sizes.max()), 1) if sizes.size else 1
        pad = np.zeros((len(tmpl_seg), width), np.int64)

        def table(parts: list[np.ndarray]) -> np.ndarray:
            t = pad.copy()
            for k, part in enumerate(parts):
                t[k, : part.size] = part
            return t

        seg_t, idx_t, h_t = table(tmpl_seg), table(tmpl_idx), table(tmpl_h)
        call = np.repeat(np.arange(kind.size, dtype=np.int64), counts)
        offsets = exclusive_cumsum(counts)
        pos = np.arange(call.size, dtype=np.int64) - offsets[call]
        k_of = kind[call]
        return Calls(
            handles=handles,
            call=call,
            segment=seg_t[k_of, pos].astype(np.int32),
            exec_index=idx_t[k_of, pos].astype(np.int32),
            handle=h_t[k_of, pos],
            first=offsets,
            last=offsets + counts - 1,
        )


@dataclass(frozen=True)
class Draws:
    """The random numbers of a batch of calls, drawn from the execution stream in one fixed order (for a single
    call: the order the simulator always drew them in): the launch (U(0, 1) per call, or the launch gap's normal
    of a continued part), the execution-time jitter (normal per execution), the outlier test and slowdown (per
    call), the launch gaps (normal per execution), the sync latency (U(0, 1) per call)."""

    launch: np.ndarray
    jitter: np.ndarray
    outlier: np.ndarray
    slowdown: np.ndarray
    gaps: np.ndarray
    sync: np.ndarray

    @staticmethod
    def draw(rng: np.random.Generator, p: Preset, r: int, n: int, continued: bool) -> Draws:
        launch = np.array([rng.standard_normal()]) if continued else rng.random(r)
        jitter = rng.standard_normal(n)
        outlier = rng.random(r)
        slowdown = rng.uniform(*p.outlier_slowdown, r)
        gaps = rng.standard_normal(n)
        sync = rng.random(r)
        return Draws(launch, jitter, outlier, slowdown, gaps, sync)


def execution_times(
    calls: Calls,
    d: Draws,
    p: Preset,
    idle_ns: np.ndarray,
    slow_x: np.ndarray,
    warmup: bool,
    stamped: bool,
    place: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(execution times before the limiter, launch gaps after each execution), ns (n,): nominal x (1 + jitter) x
    warm-up penalty (the first executions of a call after `idle_ns` (R,) of idle; later segments scaled by
    `switch_warmup_scale`) x (1 + the call's outlier slowdown `slow_x` (R,)) x the input set's placement factor
    (`place` (n,), `Calls.placement`; None: 1); gaps lognormal, plus the stamp overhead when stamped, 0 after each
    call's last execution."""
    factor = 1.0 + p.exec_jitter * d.jitter
    nw = len(p.warmup_penalty)
    if nw and warmup:
        warm = np.flatnonzero(calls.exec_index < nw)
        if warm.size:
            scale = (1.0 - np.exp(-idle_ns[calls.call[warm]] / p.warmup_idle_tau_ns)) * np.where(
                calls.segment[warm] == 0, 1.0, p.switch_warmup_scale
            )
            factor[warm] *= 1.0 + scale * np.asarray(p.warmup_penalty)[calls.exec_index[warm]]
    d_pre = calls.of("base_ns") * factor * (1.0 + slow_x[calls.call])
    if place is not None:
        d_pre = d_pre * place
    gaps = p.launch_gap_ns * np.exp(p.launch_gap_sigma * d.gaps)
    if stamped:
        gaps += p.stamp_overhead_ns
    gaps[calls.last] = 0.0
    return d_pre, gaps


def limiter(
    calls: Calls,
    age_ns: np.ndarray,
    d_pre: np.ndarray,
    p: Preset,
    schedule: tuple[np.ndarray, ...] | None,
    cycle_level: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(limiter level L, limit-cycle number (-1: none), execution time after the limiter's slowdown, ns) per
    execution at limiter ages `age_ns` (n,); `cycle_level` is `device.limit_cycle_level`."""
    n = calls.n
    heavy_h = np.array([h.heavy for h in calls.handles])
    if not heavy_h.any():
        return np.ones(n), np.full(n, -1, np.int64), d_pre
    heavy = heavy_h[calls.handle]
    lss = calls.of("limiter_level")
    cycling = p.limit_cycle_high_ns > 0 and p.limit_cycle_low_ns > 0
    target = calls.of("burst_level") if cycling else lss
    z = (age_ns - p.limiter_start_ns) / p.limiter_tau_ns
    fast = np.where(z <= 0, 1.0, np.where(z > CUT, target, target + (1.0 - target) * np.exp(-np.clip(z, 0, CUT))))
    if cycling:
        lim, cycle_no = cycle_level(age_ns, fast, lss, target, p, schedule)
    else:
        lim, cycle_no = fast, np.full(n, -1)
    level = np.where(heavy, lim, 1.0)
    cycle_no = np.where(heavy, cycle_no, -1)
    return level, cycle_no, d_pre * (1.0 + p.limiter_slowdown * (1.0 - level))


def segments(
    calls: Calls, fs: np.ndarray, fe: np.ndarray, x_plat: np.ndarray, gap_ch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The timeline segments of the executions (t0 (4n,), excess p0 and slope (C, 4n)): per execution a ramp from
    the preceding level (idle for a call's first execution, the gap level otherwise) to the plateau `x_plat`
    (C, n), the plateau, the tail, then the launch gap at the gap level `gap_ch` (C,), flat zero after a call's
    last execution (the idle until the next call)."""
    n = calls.n
    nch = x_plat.shape[0]
    ramp = calls.shape_of("ramp_frac") * (fe - fs)
    tail = calls.shape_of("tail_frac") * (fe - fs)
    tail_level = calls.shape_of("tail_level")
    t0 = np.empty(4 * n)
    t0[0::4] = fs
    t0[1::4] = fs + ramp
    t0[2::4] = fe - tail
    t0[3::4] = fe
    g = gap_ch[:, None]
    start_level = np.repeat(g, n, axis=1)
    start_level[:, calls.first] = 0.0
    p0 = np.empty((nch, 4 * n))
    slope = np.zeros((nch, 4 * n))
    p0[:, 0::4] = start_level
    slope[:, 0::4] = (x_plat - start_level) / ramp
    p0[:, 1::4] = x_plat
    p0[:, 2::4] = x_plat
    slope[:, 2::4] = (tail_level - 1.0) * x_plat / tail
    p0[:, 3::4] = g
    p0[:, 4 * calls.last + 3] = 0.0
    return t0, p0, slope


def truth(
    calls: Calls, fs: np.ndarray, fd: np.ndarray, x0: np.ndarray, idle_ch: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(energy of each execution (C, n), its cycle's length (n,), its cycle's energy (C, n)), mW ns, exact from the
    cumulative excess energy `x0` (C, 4n) at the segment starts: a cycle runs from the execution's start to the
    next start in the same call (to its end for a call's last execution)."""
    idle = idle_ch[:, None]
    e_start = x0[:, 0::4]
    e_end = x0[:, 3::4]
    exec_e = e_end - e_start + idle * fd
    nxt = np.arange(1, calls.n + 1)
    nxt[calls.last] = calls.last  # the call's last: its own end
    cyc_len = np.empty(calls.n)
    cyc_e = np.empty_like(exec_e)
    inner = np.ones(calls.n, bool)
    inner[calls.last] = False
    cyc_len[inner] = fs[nxt[inner]] - fs[inner]
    cyc_len[~inner] = fd[~inner]
    cyc_e[:, inner] = e_start[:, nxt[inner]] - e_start[:, inner]
    cyc_e[:, ~inner] = e_end[:, ~inner] - e_start[:, ~inner]
    cyc_e += idle * cyc_len
    return exec_e, cyc_len, cyc_e
