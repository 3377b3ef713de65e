"""The simulator's true power: a piecewise-linear function of host time per channel.

Stored as the *excess over idle* x(t) = P(t) - idle (mW) on segments [t0_i, t0_{i+1}), each linear
(x = p0_i + slope_i * (t - t0_i)); the last segment of every appended chunk is a flat zero segment
that also covers the idle time until the next chunk. The cumulative excess energy X(t) (mW*ns) is
piecewise quadratic and evaluated exactly and vectorized (`np.searchsorted`); the true cumulative
energy is E(t) = idle * t + X(t). Times are float64 ns relative to the simulation start (exact for
integers up to 2**53 ns, about 104 days).
"""

from __future__ import annotations

import logging

import numpy as np

logger = logging.getLogger(__name__)

_SENTINEL_T = -1e18  # start of the initial zero segment (ns); finite so that 0 * dt stays 0


class PowerTimeline:
    """Piecewise-linear excess power of `n_channels` channels, with bounded memory (`prune`)."""

    def __init__(self, n_channels: int) -> None:
        self.n_channels = n_channels
        self._t0 = np.array([_SENTINEL_T])
        self._p0 = np.zeros((n_channels, 1))
        self._slope = np.zeros((n_channels, 1))
        self._x0 = np.zeros((n_channels, 1))
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_segments = 0
        self._x_end = np.zeros(n_channels)  # X (mW*ns) after the last appended chunk
        self._t_end = _SENTINEL_T  # start of the last (open, zero) segment
        self._act_start: list[float] = []
        self._act_end: list[float] = []
        self._act_start_arr = np.zeros(0)
        self._act_end_arr = np.zeros(0)
        self._act_dirty = False

    # ------------------------------------------------------------------ building
    def append(self, t0: np.ndarray, p0: np.ndarray, slope: np.ndarray, breaks: np.ndarray | None = None) -> np.ndarray:
        """Append a chunk of segments starting at `t0` (n,) with excess `p0` (C, n) mW and `slope`
        (C, n) mW/ns. The last segment must be flat zero (it extends to the next chunk). breaks: the indices of
        the segments that start a busy stretch after a flat zero one (a chunk of several calls, the first at 0):
        the idle between them is known to be idle (`active`). Returns the cumulative excess energy X at each
        segment start (C, n), mW*ns."""
        t0 = np.asarray(t0, dtype=np.float64)
        if t0[0] < self._t_end:
            raise ValueError(f"chunk starts at {t0[0]} ns, before the end of the timeline {self._t_end} ns")
        seg_len = np.empty_like(t0)
        seg_len[:-1] = np.diff(t0)
        seg_len[-1] = 0.0
        energy = (p0 + 0.5 * slope * seg_len) * seg_len
        x0 = np.empty_like(energy)
        x0[:, 0] = self._x_end
        if t0.size > 1:
            np.cumsum(energy[:, :-1], axis=1, out=x0[:, 1:])
            x0[:, 1:] += self._x_end[:, None]
        self._x_end = x0[:, -1].copy()
        self._t_end = float(t0[-1])
        self._pending.append((t0, p0, slope, x0))
        self._pending_segments += t0.size
        if breaks is None:
            self._act_start.append(float(t0[0]))
            self._act_end.append(float(t0[-1]))
        else:
            self._act_start.extend(t0[breaks].tolist())
            self._act_end.extend(t0[np.append(breaks[1:] - 1, t0.size - 1)].tolist())
        self._act_dirty = True
        return x0

    @property
    def pending_segments(self) -> int:
        """Segments appended since the last consolidation."""
        return self._pending_segments

    @property
    def size(self) -> int:
        """Segments held (consolidated + pending)."""
        return self._t0.size + self._pending_segments

    def _consolidate(self) -> None:
        if self._pending:
            self._t0 = np.concatenate([self._t0] + [c[0] for c in self._pending])
            self._p0 = np.concatenate([self._p0] + [c[1] for c in self._pending], axis=1)
            self._slope = np.concatenate([self._slope] + [c[2] for c in self._pending], axis=1)
            self._x0 = np.concatenate([self._x0] + [c[3] for c in self._pending], axis=1)
            self._pending = []
            self._pending_segments = 0
        self._activity()

    def _activity(self) -> None:
        if self._act_dirty:
            self._act_start_arr = np.asarray(self._act_start)
            self._act_end_arr = np.asarray(self._act_end)
            self._act_dirty = False

    def prune(self, t_keep: float) -> None:
        """Forget everything before `t_keep` (ns): later X/E queries must be at times >= t_keep."""
        self._consolidate()
        i = int(np.searchsorted(self._t0, t_keep, side="right")) - 1
        if i > 0:
            self._t0 = self._t0[i:]
            self._p0 = self._p0[:, i:]
            self._slope = self._slope[:, i:]
            self._x0 = self._x0[:, i:]
        j = int(np.searchsorted(self._act_end_arr, t_keep, side="left"))
        if j > 0:
            self._act_start = self._act_start[j:]
            self._act_end = self._act_end[j:]
            self._act_start_arr = self._act_start_arr[j:]
            self._act_end_arr = self._act_end_arr[j:]

    # ------------------------------------------------------------------ queries
    @property
    def earliest_ns(self) -> float:
        """Oldest time (ns) still held: queries before it are not exact any more."""
        return float(self._t0[0])

    def _source(self, t_min: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Segment arrays (t0, p0, slope, x0) covering every time >= t_min: the last appended chunk alone
        when it does (no consolidation: recent queries stay O(chunk)), else everything held."""
        if self._pending and t_min >= self._pending[-1][0][0]:
            return self._pending[-1]
        self._consolidate()
        return self._t0, self._p0, self._slope, self._x0

    def excess_energy(self, t: np.ndarray, channels: list[int] | None = None) -> np.ndarray:
        """X(t): cumulative excess energy (mW*ns) at times `t` (ns, any shape), exact.
        Returns shape (C,) + t.shape for the channel indices `channels` (all by default)."""
        t = np.asarray(t, dtype=np.float64)
        chans = range(self.n_channels) if channels is None else channels
        out = np.empty((len(chans),) + t.shape)
        if t.size == 0:
            return out
        t0, p0, slope, x0 = self._source(float(t.min()))
        i = np.searchsorted(t0, t, side="right") - 1
        np.maximum(i, 0, out=i)
        dt = t - t0[i]
        for row, c in enumerate(chans):
            out[row] = x0[c][i] + (p0[c][i] + 0.5 * slope[c][i] * dt) * dt
        return out

    def excess_power(self, t: np.ndarray) -> np.ndarray:
        """x(t): excess power (mW) at times `t` (ns), right-continuous; shape (C,) + t.shape."""
        t = np.asarray(t, dtype=np.float64)
        if t.size == 0:
            return np.empty((self.n_channels,) + t.shape)
        t0, p0, slope, _ = self._source(float(t.min()))
        i = np.searchsorted(t0, t, side="right") - 1
        np.maximum(i, 0, out=i)
        return p0[:, i] + slope[:, i] * (t - t0[i])

    def active(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Whether [lo, hi] (ns) overlaps any appended chunk (non-idle stretch); bool array."""
        self._activity()
        lo = np.asarray(lo, dtype=np.float64)
        hi = np.asarray(hi, dtype=np.float64)
        if self._act_start_arr.size == 0:
            return np.zeros(lo.shape, dtype=bool)
        j = np.searchsorted(self._act_start_arr, hi, side="left") - 1
        ok = j >= 0
        jj = np.maximum(j, 0)
        return ok & (self._act_end_arr[jj] > lo)
