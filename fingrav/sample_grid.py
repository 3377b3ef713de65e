"""The power sensor's own sampling grid, recovered from the samples' timestamps (ns throughout).

An H200's NVML sample buffer (`nvmlDeviceGetSamples`) samples on a strictly regular grid (period ~19.99 ms,
intervals within ~0.1 ms) but stamps about one sample in five late, by 1.0 / 2.8 / 4.8 ms (p10 / p50 / p90), and
~1 % of them by 6-18 ms: intervals read 20.0, 20.0, 22.8, 17.2, 20.0, ... The value of a late-stamped sample is
the reading at its grid time: a step-response fit on the grid times leaves 4.2 W rms against 7.4 W on the stamps
(results/h200-method's calibration). At the sensor's steepest (a burst's decay, ~1/lag of the excess per ms), a
3 ms error in a sample's time is an error of ~25 % in what that sample says about the burst.

`fit_grid` finds the grid: the samples' offsets from a grid of the median interval, whose running median (most
samples are on time) is the grid's phase; each sample goes to the grid slot at or before its stamp (stamps are
late, never early, beyond the on-time scatter). A sample that shares its slot with another, or sits further from
its slot than `MAX_LATE_FRAC` of a period, cannot be placed (its time is unknown). Where the stamps show no
grid (a sensor whose intervals really vary: most samples off any grid), or no late stamps at all, there is
nothing to correct and the stamps are the times.

Who uses it: the calibration fits the sensor model on the grid times as well (`fingrav.sensorfit`: the
`grid` timing of `fingrav.contracts.sensor.SensorModel`) and the kernel-power estimators, whose answer depends
on every sample's exact time (`fingrav.analysis.kernel_power`), read the samples at their grid times with that
model. Statistics over many samples (means over settled spans) do not depend on a few ms and keep the stamps.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: a sample within this fraction of a period of its grid slot is on time
ON_TIME_FRAC = 0.02
#: a sample further than this fraction of a period after its slot cannot be placed
MAX_LATE_FRAC = 0.5
#: the stamps show a grid when at least this share of samples is on time
MIN_ON_TIME_SHARE = 0.6
#: a gap of more than this many periods without samples starts the grid's count again
REANCHOR_PERIODS = 50
#: fewest samples to look for a grid in
MIN_SAMPLES = 20


@dataclass(frozen=True)
class SampleGrid:
    """What `fit_grid` found: the grid's period (ns), the shares of samples on time, stamped late (placed on
    their slot) and not placeable, and the median lateness of the late ones (ns)."""

    period_ns: float
    on_time_share: float
    late_share: float
    unplaced_share: float
    late_p50_ns: float | None

    @property
    def corrects(self) -> bool:
        """Whether the grid times differ from the stamps (some sample is stamped late or cannot be placed)."""
        return self.late_share > 0.0 or self.unplaced_share > 0.0


@dataclass(frozen=True)
class GridTimes:
    """Per sample (the input's order): its grid time (ns, float) and whether it could be placed; `grid` is None
    where the stamps show no grid (then t_ns are the stamps and every sample is placed)."""

    t_ns: np.ndarray
    placed: np.ndarray
    grid: SampleGrid | None


def _slots(ts: np.ndarray, period: float, tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slot, grid time, countable) of sorted stamps `ts` (ns) on a grid of `period`. The count starts at the first
    sample whose next interval is one period (both are on time, or a later sample shows otherwise); the samples
    before it are not countable. Each later sample's slot is counted from the last on-time sample (the anchor; a
    sample within `tol` of its slot becomes the next anchor, so a slow drift of the sensor's clock against the
    host's never accumulates) and is the one at or before its stamp (stamps are late, not early). A sample that
    would fall in the slot of the sample before it, or more than `tol` early, or after a gap of REANCHOR_PERIODS, is
    taken as on time and becomes the anchor (the sample before it was late)."""
    n = ts.size
    slot = np.zeros(n)
    grid_t = ts.copy()
    d = np.diff(ts)
    starts = np.flatnonzero(np.abs(d - period) <= tol)
    countable = np.zeros(n, dtype=bool)
    if starts.size == 0:
        return slot, grid_t, countable
    i0 = int(starts[0])
    countable[i0:] = True
    anchor_t, anchor_k, prev_k = ts[i0], 0.0, 0.0
    for i in range(i0 + 1, n):
        x = (ts[i] - anchor_t) / period
        k = anchor_k + math.floor(x + tol / period)
        g = anchor_t + (k - anchor_k) * period
        if k <= prev_k or ts[i] - g < -tol or x > REANCHOR_PERIODS:
            k = max(prev_k + 1.0, anchor_k + round(x))
            g = ts[i]
        if abs(ts[i] - g) <= tol:
            anchor_t, anchor_k = ts[i], k
        slot[i], grid_t[i], prev_k = k, g, k
    return slot, grid_t, countable


def fit_grid(t_ns: np.ndarray) -> GridTimes:
    """The grid times of one sample stream's timestamps (ns; any order; module docstring)."""
    t = np.asarray(t_ns, dtype=np.float64)
    none = GridTimes(t.copy(), np.ones(t.size, dtype=bool), None)
    if t.size < MIN_SAMPLES:
        return none
    order = np.argsort(t, kind="stable")
    ts = t[order]
    d = np.diff(ts)
    period = float(np.median(d))
    if not period > 0.0:
        return none
    tol = ON_TIME_FRAC * period
    clean = np.abs(d - period) <= 2.0 * tol  # intervals between two on-time samples one slot apart
    if clean.sum() < MIN_SAMPLES // 2:
        return none
    period = float(np.median(d[clean]))
    slot, grid_t, countable = _slots(ts, period, tol)
    dev = ts - grid_t
    on_time = countable & (np.abs(dev) <= tol)
    if on_time.mean() < MIN_ON_TIME_SHARE:
        return none
    placed = countable & (dev <= MAX_LATE_FRAC * period)
    late = placed & (dev > tol)
    grid = SampleGrid(
        period_ns=period,
        on_time_share=float((placed & ~late).mean()),
        late_share=float(late.mean()),
        unplaced_share=float((~placed).mean()),
        late_p50_ns=float(np.median(dev[late])) if late.any() else None,
    )
    if not grid.corrects:
        return GridTimes(t.copy(), np.ones(t.size, dtype=bool), grid)
    out_t = np.empty(t.size)
    out_p = np.empty(t.size, dtype=bool)
    out_t[order] = np.where(placed, grid_t, ts)
    out_p[order] = placed
    logger.debug(
        "sample grid: period %.4f ms, %.1f %% late (p50 %.2f ms), %.2f %% not placed",
        period / 1e6,
        100 * grid.late_share,
        (grid.late_p50_ns or 0.0) / 1e6,
        100 * grid.unplaced_share,
    )
    return GridTimes(out_t, out_p, grid)
