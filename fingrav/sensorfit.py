"""Characterize a power sensor from its response to a square-wave load.

GPU-side module (numpy + stdlib only).

Input: the samples of one channel (`t_ns` on the host clock, `power_mw`) and the on-intervals of the
load (host-clock start/end ns, already mapped from GPU time). Output: a `SensorCharacterization`.

Sensor model (all times in ms). The sample stamped t reports

    idle + step * (lag ∘ boxcar)(load)(t - delay)  (+ a slow linear trend)

where load(t) is 1 during an on-interval and 0 otherwise, boxcar averages it over the last `window` ms,
lag is a first-order low-pass with time constant `lag` (0 = none) and `delay` is a dead time. Hence the
sample at t averages the load over [t - delay - window, t - delay], further smoothed by the lag. The
normalized response to a unit step at 0 (`step_response`) is 0 before `delay`, and with the lag's ramp
response R(x) = x - lag * (1 - exp(-x / lag)):  S(t) = (R(t - delay) - R(t - delay - window)) / window.
`settle_ms` is the first time S reaches 0.99; `group_delay_ms` = delay + window / 2 + lag is the centroid
of the impulse response (where, on average, a sample's information comes from).

Fit, coarse to fine:
1. crude levels from the late part of each on/off interval; a channel "responds" when the load minus
   idle difference is over 10 standard errors;
2. equivalent-time sampling: every sample is placed relative to its latest edge (rising and falling
   edges pooled, falling ones mirrored) and normalized, giving the step response at many phases; a
   grid over (delay, window, lag) is fitted to it (levels refit linearly for each grid point), then a
   Nelder-Mead refinement;
3. Nelder-Mead on the raw samples with the full square-wave model (superposition of the last
   `EDGES_IN_MODEL` edges; idle, step and a linear trend solved by linear least squares at every point),
   once with the lag free and once as a pure boxcar (lag = 0), the latter reported as `boxcar_only`.
Standard errors of delay/window/lag come from the Jacobian at the optimum (white-noise assumption: a lower
bound when the model misfits).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from fingrav.device.base import PowerSamples
from fingrav.errors import DataError

logger = logging.getLogger(__name__)

NS_PER_MS = 1_000_000
SETTLE_TOL = 0.01
#: edges (most recent first) whose responses are superposed for each sample in the raw fit
EDGES_IN_MODEL = 4
#: significance (in standard errors) of the crude on-minus-off difference for a channel to "respond"
RESPONSE_SIGMAS = 10.0
#: the pooled step response is averaged into at most this many equal-count bins before the grid search
MAX_POOLED_POINTS = 1500
GRID_SIZE = 15
#: windows and lags below this fraction of the sample period count as "at the bound 0" for the errors
RESOLVABLE = 0.1
RESPONSE_BINS = 80
#: `content_lead`: the quantile of the transition samples' timing offsets, the normalized levels that bound a
#: transition, and the fewest samples a quantile is taken of (fewer: their largest offset)
CONTENT_LEAD_QUANTILE = 0.95
CONTENT_LEAD_Z = 0.05
CONTENT_LEAD_MIN_SAMPLES = 20
#: `content_lead`: a sample's level counts less this many of its noise's standard deviations (an idle sample's noise
#: passes for a transition's level once in ~700)
CONTENT_LEAD_SIGMAS = 3.0


# --------------------------------------------------------------------------- the model
def step_response(t_ms: np.ndarray | float, delay_ms: Any, window_ms: Any, lag_ms: Any) -> np.ndarray:
    """Normalized response (0 -> 1) to a unit load step at t = 0; parameters broadcast against t (ms)."""
    t = np.asarray(t_ms, dtype=np.float64)
    d = np.asarray(delay_ms, dtype=np.float64)
    w = np.asarray(window_ms, dtype=np.float64)
    tau = np.asarray(lag_ms, dtype=np.float64)
    has_lag = tau > 0
    tau_safe = np.where(has_lag, tau, 1.0)

    def ramp(x: np.ndarray) -> np.ndarray:
        xp = np.maximum(x, 0.0)
        return xp - np.where(has_lag, tau * -np.expm1(-xp / tau_safe), 0.0)

    x = t - d
    has_window = w > 0
    boxcar = (ramp(x) - ramp(x - w)) / np.where(has_window, w, 1.0)
    pure_lag = np.where(has_lag, -np.expm1(-np.maximum(x, 0.0) / tau_safe), (x >= 0).astype(np.float64))
    return np.where(has_window, boxcar, pure_lag)


def _inverse_response(z: np.ndarray, delay: float, window: float, lag: float, hi: float) -> np.ndarray:
    """The time (ms, in [0, hi]) at which the model's step response reaches each z in (0, 1) (bisection; the
    response is non-decreasing)."""
    lo_t = np.zeros_like(z)
    hi_t = np.full_like(z, hi)
    for _ in range(60):
        mid = 0.5 * (lo_t + hi_t)
        up = step_response(mid, delay, window, lag) >= z
        hi_t = np.where(up, mid, hi_t)
        lo_t = np.where(up, lo_t, mid)
    return 0.5 * (lo_t + hi_t)


def settle_time_ms(delay_ms: float, window_ms: float, lag_ms: float, tol: float = SETTLE_TOL) -> float:
    """Time (ms) from a load step until the model response is within `tol` of its final level."""
    if lag_ms <= 0:
        return delay_ms + (1.0 - tol) * window_ms
    hi = delay_ms + window_ms + lag_ms * (math.log(1.0 / tol) + 1.0)
    return float(_inverse_response(np.array([1.0 - tol]), delay_ms, window_ms, lag_ms, hi)[0])


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class SensorCharacterization:
    """One channel's sensor characterization. Times in ms, power in mW.

    responds: the channel follows the load steps (else only period/levels/noise are filled);
    period_ms (+ p10/p90): spacing of distinct sample timestamps; idle_mw / load_mw: fitted levels
    (at the middle of the calibration when a trend was fitted); step_mw = load - idle;
    delay_ms / window_ms / lag_ms: dead time, boxcar length, first-order lag (see module docstring),
    *_se_ms their standard errors (None when not identified, e.g. the lag at its bound 0; the group
    delay is well determined even when delay and window trade off);
    settle_ms: step to within 1 % of the final level;
    group_delay_ms: delay + window / 2 + lag; fit_rms_mw: rms residual of the raw samples;
    content_lead_ms: how much later than the fitted model says a sample's content can lie (`content_lead`);
    boxcar_only: the best pure-boxcar fit {delay_ms, window_ms, settle_ms, fit_rms_mw};
    noise_mw: std of settled samples; quantization_mw: smallest value step (None if not detected);
    trend_mw_per_s: slow linear drift fitted with the levels; response: the measured pooled, normalized
    step response in RESPONSE_BINS bins {t_ms, mean, n, model}; flags: problems found.
    """

    channel: str
    responds: bool
    n_samples: int
    n_edges: int
    period_ms: float
    period_p10_ms: float
    period_p90_ms: float
    idle_mw: float
    load_mw: float | None = None
    step_mw: float | None = None
    delay_ms: float | None = None
    window_ms: float | None = None
    lag_ms: float | None = None
    settle_ms: float | None = None
    group_delay_ms: float | None = None
    delay_se_ms: float | None = None
    window_se_ms: float | None = None
    lag_se_ms: float | None = None
    group_delay_se_ms: float | None = None
    fit_rms_mw: float | None = None
    content_lead_ms: float | None = None
    boxcar_only: dict[str, float] | None = None
    noise_mw: float | None = None
    quantization_mw: float | None = None
    trend_mw_per_s: float | None = None
    response: dict[str, list[float]] | None = None
    flags: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every field."""
        return asdict(self)


# --------------------------------------------------------------------------- helpers
def _nelder_mead(
    f: Callable[[np.ndarray], float], x0: np.ndarray, steps: np.ndarray, xtol: float, max_eval: int = 600
) -> tuple[np.ndarray, float]:
    """Minimize f from x0 (standard Nelder-Mead); stops when the simplex is smaller than xtol."""
    n = len(x0)
    sim = np.vstack([x0] + [x0 + np.eye(n)[i] * steps[i] for i in range(n)])
    fs = np.array([f(x) for x in sim])
    evals = n + 1
    while evals < max_eval:
        order = np.argsort(fs)
        sim, fs = sim[order], fs[order]
        if np.max(np.abs(sim[1:] - sim[0])) <= xtol:
            break
        c = sim[:-1].mean(axis=0)
        xr = c + (c - sim[-1])
        fr = f(xr)
        evals += 1
        if fr < fs[0]:
            xe = c + 2.0 * (c - sim[-1])
            fe = f(xe)
            evals += 1
            sim[-1], fs[-1] = (xe, fe) if fe < fr else (xr, fr)
            continue
        if fr < fs[-2]:
            sim[-1], fs[-1] = xr, fr
            continue
        xc = c + 0.5 * (xr - c) if fr < fs[-1] else c + 0.5 * (sim[-1] - c)
        fc = f(xc)
        evals += 1
        if fc < min(fr, fs[-1]):
            sim[-1], fs[-1] = xc, fc
            continue
        sim[1:] = sim[0] + 0.5 * (sim[1:] - sim[0])
        fs[1:] = [f(x) for x in sim[1:]]
        evals += n
    i = int(np.argmin(fs))
    return sim[i], float(fs[i])


def _quantization(values: np.ndarray) -> float | None:
    """Smallest step of the value grid (mW): the approximate greatest common divisor of the gaps between
    distinct values, accepted when >= 95 % of the gaps are integer multiples of it (within 2 %);
    None when the values look continuous."""
    u = np.unique(values[np.isfinite(values)])
    if len(u) < 3:
        return None
    tol = 1e-9 * max(1.0, float(np.max(np.abs(u))))
    gaps = np.diff(u)
    gaps = gaps[gaps > tol]
    if len(gaps) < 2:
        return None
    q = float(gaps.min())
    for g in np.sort(gaps)[:200]:
        a, b = float(g), q
        while b > 10 * tol:  # Euclid with a tolerance
            r = a % b
            a, b = b, (0.0 if min(r, b - r) <= 10 * tol else r)
        q = a
        if q <= 10 * tol:
            return None
    m = gaps / q
    return q if float(np.mean(np.abs(m - np.rint(m)) <= 0.02)) >= 0.95 else None


def _period(t_ns: np.ndarray) -> tuple[float, float, float]:
    u = np.unique(t_ns)
    if len(u) < 2:
        raise DataError("sensor fit: fewer than two distinct sample timestamps")
    d = np.diff(u).astype(np.float64) / NS_PER_MS
    p10, p50, p90 = np.percentile(d, [10, 50, 90])
    return float(p50), float(p10), float(p90)


class _Edges:
    """The square wave on a float ms axis (origin: first rising edge)."""

    def __init__(self, on_start_ns: np.ndarray, on_end_ns: np.ndarray) -> None:
        s = np.asarray(on_start_ns, dtype=np.int64)
        e = np.asarray(on_end_ns, dtype=np.int64)
        if len(s) != len(e):
            raise DataError(f"sensor fit: {len(s)} step starts but {len(e)} ends")
        if len(s) < 2:
            raise DataError(f"sensor fit needs at least 2 load steps, got {len(s)}")
        order = np.argsort(s)
        s, e = s[order], e[order]
        if np.any(e <= s) or np.any(s[1:] < e[:-1]):
            raise DataError("sensor fit: load steps are empty or overlap")
        self.t0 = int(s[0])
        self.start = (s - self.t0).astype(np.float64) / NS_PER_MS
        self.end = (e - self.t0).astype(np.float64) / NS_PER_MS
        self.edges = np.ravel(np.column_stack([self.start, self.end]))  # rise, fall, rise, ...
        self.signs = np.tile([1.0, -1.0], len(s))
        on = self.end - self.start
        off = self.start[1:] - self.end[:-1]
        self.min_interval = float(min(on.min(), off.min()))
        self.median_off = float(np.median(off))

    def to_ms(self, t_ns: np.ndarray) -> np.ndarray:
        return (np.asarray(t_ns, dtype=np.int64) - self.t0).astype(np.float64) / NS_PER_MS

    def last_edge(self, t: np.ndarray) -> np.ndarray:
        """Index of the latest edge at or before each t (-1 before the first)."""
        return np.searchsorted(self.edges, t, side="right") - 1

    def late_masks(self, t: np.ndarray, frac: float = 0.4) -> tuple[np.ndarray, np.ndarray]:
        """Samples in the last `frac` of each on-interval / off-interval (incl. one before and after)."""
        on = np.zeros(len(t), bool)
        off = np.zeros(len(t), bool)
        starts = np.concatenate([[self.start[0] - self.median_off], self.end])
        ends = np.concatenate([self.start, [self.end[-1] + self.median_off]])
        for a, b, mask in ((self.start, self.end, on), (starts, ends, off)):
            lo = b - frac * (b - a)
            i = np.searchsorted(b, t, side="left")
            ok = i < len(b)
            ic = np.minimum(i, len(b) - 1)
            mask |= ok & (t >= lo[ic]) & (t <= b[ic])
        return on, off


class _RawModel:
    """Raw samples with the superposed square-wave model; idle/step/trend by linear least squares."""

    def __init__(self, t: np.ndarray, y: np.ndarray, edges: _Edges) -> None:
        j = edges.last_edge(t)
        n = len(t)
        k = np.arange(EDGES_IN_MODEL)
        idx = j[:, None] - k[None, :]
        valid = idx >= 0
        idc = np.maximum(idx, 0)
        self.dt = np.where(valid, t[:, None] - edges.edges[idc], -1e9)
        self.sg = np.where(valid, edges.signs[idc], 0.0)
        first = j - EDGES_IN_MODEL + 1
        self.base = np.where(first > 0, first % 2, 0).astype(np.float64)
        self.y = y
        self.tc = (t - t.mean()) / 1000.0  # s
        self.n = n
        self.cluster = j + 1  # the load interval each sample lies in (0: before the first edge), `_param_se`

    def u(self, p: np.ndarray) -> np.ndarray:
        d, w, tau = np.abs(p)
        return self.base + np.sum(self.sg * step_response(self.dt, d, w, tau), axis=1)

    def solve(self, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
        """(coefficients [idle, step, trend_mw_per_s], design matrix, rss)."""
        a = np.column_stack([np.ones(self.n), self.u(p), self.tc])
        coef, *_ = np.linalg.lstsq(a, self.y, rcond=None)
        r = self.y - a @ coef
        return coef, a, float(r @ r)

    def rss(self, p: np.ndarray) -> float:
        return self.solve(p)[2]


def _pooled(
    t: np.ndarray, y: np.ndarray, edges: _Edges, idle: float, step: float, pre_ms: float
) -> tuple[np.ndarray, np.ndarray]:
    """Equivalent-time sampling: (time relative to the edge, normalized response) for every sample in
    [edge - pre_ms, next edge) of every edge; falling edges mirrored so that all go 0 -> 1."""
    e = edges.edges
    nxt = np.concatenate([e[1:], [e[-1] + edges.median_off]])
    rs, zs = [], []
    z_rise = (y - idle) / step
    for i in range(len(e)):
        lo, hi = np.searchsorted(t, [e[i] - pre_ms, nxt[i]], side="left")
        rs.append(t[lo:hi] - e[i])
        zs.append(z_rise[lo:hi] if i % 2 == 0 else 1.0 - z_rise[lo:hi])
    return np.concatenate(rs), np.concatenate(zs)


def _bin_equal_count(r: np.ndarray, z: np.ndarray, max_points: int) -> tuple[np.ndarray, np.ndarray]:
    if len(r) <= max_points:
        return r, z
    order = np.argsort(r, kind="stable")
    b = (np.arange(len(r)) * max_points) // len(r)
    cnt = np.bincount(b)
    return np.bincount(b, r[order]) / cnt, np.bincount(b, z[order]) / cnt


def _grid_fit(r: np.ndarray, z: np.ndarray, d_vals: np.ndarray, w_vals: np.ndarray, tau_vals: np.ndarray) -> np.ndarray:
    """Best (delay, window, lag) on the grid for z ~ a + b * S(r) (a, b free); returns all grid
    points sorted by rss as rows (d, w, tau, rss)."""
    dd, ww, tt = (g.ravel() for g in np.meshgrid(d_vals, w_vals, tau_vals, indexing="ij"))
    zc = z - z.mean()
    zz = float(zc @ zc)
    out = np.empty(len(dd))
    chunk = max(1, 400_000 // max(len(r), 1))
    for i in range(0, len(dd), chunk):
        s = step_response(r[None, :], dd[i : i + chunk, None], ww[i : i + chunk, None], tt[i : i + chunk, None])
        sc = s - s.mean(axis=1, keepdims=True)
        ss = np.einsum("ij,ij->i", sc, sc)
        sz = sc @ zc
        out[i : i + chunk] = zz - np.where(ss > 0, sz**2 / np.where(ss > 0, ss, 1.0), 0.0)
    res = np.column_stack([dd, ww, tt, out])
    return res[np.argsort(res[:, 3], kind="stable")]


def _noise(t: np.ndarray, y: np.ndarray, edges: _Edges, settled_after_ms: float) -> float | None:
    """Pooled std of samples at least `settled_after_ms` after their latest edge, around the mean of
    their interval (so slow drifts between intervals do not count)."""
    j = edges.last_edge(t)
    since = np.where(j >= 0, t - edges.edges[np.maximum(j, 0)], np.inf)
    keep = since >= settled_after_ms
    if keep.sum() < 3:
        return None
    groups = j[keep] + 1
    yk = y[keep]
    cnt = np.bincount(groups)
    mean = np.bincount(groups, yk) / np.maximum(cnt, 1)
    res = yk - mean[groups]
    dof = len(yk) - int(np.count_nonzero(cnt))
    if dof <= 0:
        return None
    return float(math.sqrt(float(res @ res) / dof))


def _param_se(
    model: _RawModel, p: np.ndarray, rss: float, h: float, free: Sequence[bool], limit: float
) -> tuple[list[float | None], float | None]:
    """Standard errors of (delay, window, lag) and of the group delay (delay + window / 2 + lag) from the
    Jacobian of the full model at p. Parameters with free[i] False are held (their errors are None);
    errors above `limit` (ms) mean "not identified" and are None too.

    The error of one parameter comes from the part of its Jacobian column not explained by the other columns,
    `rest` (least squares, stable even when other parameters trade off against each other): the larger of the
    textbook error s / |rest| and the cluster-robust one, sqrt(sum over load intervals of (rest . residual)^2) /
    |rest|^2 with the small-sample factor G / (G - 1) x (n - 1) / (n - k) (G intervals, k parameters). The
    residuals are not alike: a sample's timing scatter (acquisition jitter, the stamps) moves it by the
    response's slope, so the residuals are largest on the edges, where the timing columns live, and the samples
    of one interval share its load's level. The textbook error pools them and reads 30-45 % low on such sensors
    (the spread of repeated calibrations of one simulated sensor); the robust one alone is noisy where the
    residuals are alike, hence the larger of the two."""
    coef, a, _ = model.solve(p)
    cols: dict[int, np.ndarray] = {}
    for i in range(3):
        if not free[i]:
            continue
        dp = np.zeros(3)
        dp[i] = h
        lower = p - dp if p[i] >= h else p  # forward difference at the boundary
        cols[i] = coef[1] * (model.u(p + dp) - model.u(lower)) / (p[i] + h - lower[i])
    dof = model.n - a.shape[1] - len(cols)
    se: list[float | None] = [None, None, None]
    if dof <= 0 or 0 not in cols:
        return se, None
    sigma = math.sqrt(rss / dof)
    resid = model.y - a @ coef
    groups = model.cluster
    n_groups = int(np.unique(groups).size)
    factor = (
        n_groups / (n_groups - 1) * (model.n - 1) / dof if n_groups > 1 else 0.0
    )  # CR1: the robust error's small-sample factor

    def se_of(col: np.ndarray, others: list[np.ndarray]) -> float | None:
        o = np.column_stack([a, *others])
        rest = col - o @ np.linalg.lstsq(o, col, rcond=None)[0]
        norm2 = float(rest @ rest)
        if norm2 <= 0:
            return None
        textbook = sigma / math.sqrt(norm2)
        score = np.bincount(groups, rest * resid)
        robust = math.sqrt(factor * float(score @ score)) / norm2
        err = max(textbook, robust)
        return err if err <= limit else None

    for i, col in cols.items():
        se[i] = se_of(col, [c for k, c in cols.items() if k != i])
    # group delay as a coordinate: (gd, window, lag) with delay = gd - window / 2 - lag
    shifted = [cols[k] - w * cols[0] for k, w in ((1, 0.5), (2, 1.0)) if k in cols]
    return se, se_of(cols[0], shifted)


# --------------------------------------------------------------------------- the fit's steps
@dataclass(frozen=True)
class ChannelSeries:
    """One channel's finite samples in time order and the load's edges: `t_ns` host ns, `t` ms relative to the
    first edge, `y` mW; the sample period (median, p10, p90; ms) and the quantization step (mW or None)."""

    channel: str
    t_ns: np.ndarray
    t: np.ndarray
    y: np.ndarray
    edges: _Edges
    period: float
    p10: float
    p90: float
    quantization: float | None

    @classmethod
    def of(
        cls, t_ns: np.ndarray, power_mw: np.ndarray, on_start_ns: np.ndarray, on_end_ns: np.ndarray, channel: str
    ) -> ChannelSeries:
        """DataError with fewer than 10 finite samples (or unusable steps, `_Edges`)."""
        t_ns = np.asarray(t_ns, dtype=np.int64)
        y = np.asarray(power_mw, dtype=np.float64)
        ok = np.isfinite(y)
        t_ns, y = t_ns[ok], y[ok]
        order = np.argsort(t_ns, kind="stable")
        t_ns, y = t_ns[order], y[order]
        if len(y) < 10:
            raise DataError(f"sensor fit ({channel}): {len(y)} samples are too few")
        edges = _Edges(on_start_ns, on_end_ns)
        t = edges.to_ms(t_ns)
        period, p10, p90 = _period(t_ns)
        return cls(channel, t_ns, t, y, edges, period, p10, p90, _quantization(y))

    def common(self) -> dict[str, Any]:
        """The fields of a `SensorCharacterization` that do not depend on the fit."""
        return {
            "channel": self.channel,
            "n_samples": len(self.y),
            "n_edges": len(self.edges.edges),
            "period_ms": self.period,
            "period_p10_ms": self.p10,
            "period_p90_ms": self.p90,
            "quantization_mw": self.quantization,
        }


@dataclass(frozen=True)
class CrudeLevels:
    """Step 1: the mean of the settled on / off samples (mW), their difference and its standard error (mW)."""

    on_mw: float
    off_mw: float
    diff_mw: float
    se_mw: float

    @classmethod
    def of(cls, s: ChannelSeries) -> CrudeLevels:
        on_m, off_m = s.edges.late_masks(s.t)
        if on_m.sum() < 3 or off_m.sum() < 3:
            raise DataError(f"sensor fit ({s.channel}): too few samples in the settled parts of the steps")
        y_on, y_off = s.y[on_m], s.y[off_m]
        diff = float(y_on.mean() - y_off.mean())
        se = math.sqrt(float(y_on.var(ddof=1)) / len(y_on) + float(y_off.var(ddof=1)) / len(y_off))
        return cls(float(y_on.mean()), float(y_off.mean()), diff, se)

    @property
    def responds(self) -> bool:
        """The difference is over RESPONSE_SIGMAS standard errors."""
        return self.diff_mw != 0.0 and abs(self.diff_mw) > RESPONSE_SIGMAS * self.se_mw


def _no_response(s: ChannelSeries, crude: CrudeLevels) -> SensorCharacterization:
    logger.info(
        "sensor %s: no response to the load steps (difference %.0f mW, %.1f standard errors)",
        s.channel,
        crude.diff_mw,
        abs(crude.diff_mw) / crude.se_mw if crude.se_mw > 0 else 0.0,
    )
    return SensorCharacterization(
        responds=False,
        idle_mw=float(np.mean(s.y)),
        noise_mw=_noise(s.t, s.y, s.edges, 0.0),
        flags=["no_response"],
        **s.common(),
    )


@dataclass(frozen=True)
class PooledFit:
    """Step 2: the equivalent-time step response (pooled over the edges, `pre` ms before each) fitted on a grid
    over (delay, window, lag) (ms; `bounds` their upper bounds) and refined (`p`); `grid` rows sorted by their
    residual, `xtol` the refinement's tolerance (ms)."""

    pre: float
    r: np.ndarray
    bounds: np.ndarray
    grid: np.ndarray
    xtol: float
    p: np.ndarray

    @classmethod
    def of(cls, s: ChannelSeries, crude: CrudeLevels) -> PooledFit:
        pre = min(2.0 * s.period, 0.5 * s.edges.min_interval)
        r, z = _pooled(s.t, s.y, s.edges, crude.off_mw, crude.diff_mw, pre)
        rb, zb = _bin_equal_count(r, z, MAX_POOLED_POINTS)
        hmax = s.edges.min_interval
        gmin = max(s.period / 50.0, 1e-3)
        bounds = np.array([0.5 * hmax, hmax, 0.5 * hmax])
        vals = [np.concatenate([[0.0], np.geomspace(gmin, b, GRID_SIZE)]) for b in bounds]
        grid = _grid_fit(rb, zb, *vals)
        xtol = max(1e-3 * s.period, 1e-4)

        def pooled_rss(p: np.ndarray) -> float:
            sr = step_response(rb, *np.abs(p))
            a = np.column_stack([np.ones_like(sr), sr])
            _, res, *_ = np.linalg.lstsq(a, zb, rcond=None)
            return float(res[0]) if len(res) else float(np.sum((zb - zb.mean()) ** 2))

        p1, _ = _nelder_mead(pooled_rss, grid[0, :3].copy(), _steps_for(grid[0, :3], s.period), xtol)
        return cls(pre, r, bounds, grid, xtol, np.abs(p1))


def _steps_for(p: np.ndarray, period: float) -> np.ndarray:
    """The Nelder-Mead simplex's initial steps around `p` (ms)."""
    return np.maximum(0.2 * np.abs(p), 0.1 * period)


@dataclass(frozen=True)
class RawFit:
    """Step 3: the full square-wave model fitted on the raw samples: `p` (delay, window, lag; ms) and its residual
    sum of squares (mW^2), once with the lag free and once as a pure boxcar (`box`: delay, window; `rss_box`)."""

    model: _RawModel
    p: np.ndarray
    rss: float
    box: np.ndarray
    rss_box: float

    @classmethod
    def of(cls, s: ChannelSeries, pooled: PooledFit) -> RawFit:
        model = _RawModel(s.t, s.y, s.edges)
        xtol = pooled.xtol
        p_full, rss_full = _nelder_mead(model.rss, pooled.p, _steps_for(pooled.p, s.period), xtol)

        def box_rss(q: np.ndarray) -> float:
            return model.rss(np.array([q[0], q[1], 0.0]))

        q0 = pooled.grid[pooled.grid[:, 2] == 0.0][0, :2].copy()
        q_box, rss_box = _nelder_mead(box_rss, q0, _steps_for(q0, s.period), xtol)
        q_box = np.abs(q_box)
        if rss_box < rss_full:  # the lag-free optimum is inside the full model's space: start there too
            start = np.array([q_box[0], q_box[1], 0.0])
            p_alt, rss_alt = _nelder_mead(model.rss, start, _steps_for(start, s.period), xtol)
            if rss_alt < rss_full:
                p_full, rss_full = p_alt, rss_alt
            if rss_box < rss_full:
                p_full, rss_full = np.array([q_box[0], q_box[1], 0.0]), rss_box
        return cls(model, np.abs(p_full), rss_full, q_box, rss_box)

    def boxcar_only(self, n: int) -> dict[str, float]:
        """The best pure-boxcar fit (ms, mW rms over `n` samples)."""
        delay, window = float(self.box[0]), float(self.box[1])
        return {
            "delay_ms": delay,
            "window_ms": window,
            "settle_ms": settle_time_ms(delay, window, 0.0),
            "fit_rms_mw": math.sqrt(self.rss_box / n),
        }


def _fit_flags(s: ChannelSeries, pooled: PooledFit, fit: RawFit, settle: float) -> list[str]:
    """fit_at_bound, steps_shorter_than_settle, sparse_edges (SensorCharacterization.flags)."""
    flags: list[str] = []
    if np.any(fit.p >= 0.98 * pooled.bounds):
        flags.append("fit_at_bound")
    if settle > s.edges.min_interval:
        flags.append("steps_shorter_than_settle")
    transition = np.count_nonzero((pooled.r >= 0) & (pooled.r <= settle))
    if transition < 30:
        flags.append("sparse_edges")
    return flags


def _measured_response(
    s: ChannelSeries, r2: np.ndarray, z2: np.ndarray, pre: float, settle: float, p: np.ndarray
) -> dict[str, list[float] | list[int]]:
    """The pooled, normalized step response of the detrended samples (`_pooled`: `r2` ms after the edge, `z2`) in
    RESPONSE_BINS bins, with the model's."""
    hi = min(s.edges.min_interval, max(3.0 * settle, 5.0 * s.period))
    bins = np.linspace(-pre, hi, RESPONSE_BINS + 1)
    b = np.digitize(r2, bins) - 1
    inb = (b >= 0) & (b < RESPONSE_BINS)
    cnt = np.bincount(b[inb], minlength=RESPONSE_BINS)
    mean = np.bincount(b[inb], z2[inb], minlength=RESPONSE_BINS) / np.maximum(cnt, 1)
    tbin = np.bincount(b[inb], r2[inb], minlength=RESPONSE_BINS) / np.maximum(cnt, 1)
    has = cnt > 0
    delay, window, lag = (float(v) for v in p)
    return {
        "t_ms": [round(float(v), 4) for v in tbin[has]],
        "mean": [round(float(v), 4) for v in mean[has]],
        "n": [int(v) for v in cnt[has]],
        "model": [round(float(v), 4) for v in step_response(tbin[has], delay, window, lag)],
    }


def content_lead(
    r: np.ndarray, z: np.ndarray, p: np.ndarray, settle: float, noise: float, q: float = CONTENT_LEAD_QUANTILE
) -> float:
    """How much later (ms, >= 0) than the fitted model (`p`: delay, window, lag; ms) a sample's content can lie: the
    `q` quantile of the timing offsets of the samples in a step's transition. `r`, `z`: the pooled step response
    (`_pooled`: ms after the edge, normalized 0 -> 1); `noise`: one sample's noise, normalized (noise / step).

    A sample's level less CONTENT_LEAD_SIGMAS of its noise is the least it surely shows; the model reaches that level
    at some time r', and r' - r is the sample's offset: positive where the sample reports later power than its stamp
    and the model say (unplaceable late stamps that pull the fitted delay up, acquisition jitter, a model that
    misfits), and only where its noise cannot explain it (a noisy sensor with exact stamps has a lead of ~0). The
    transition: where the model's response or the sample's sure level is between CONTENT_LEAD_Z and
    1 - CONTENT_LEAD_Z. The SSP runs' trailing executions cover the lead (`fingrav.collect.plan`), so that a reading
    placed in the SSP tail does not hold the idle after the run. 0 when no sample falls in a transition; the largest
    offset where fewer than CONTENT_LEAD_MIN_SAMPLES do."""
    delay, window, lag = (float(v) for v in p)
    lo_z, hi_z = CONTENT_LEAD_Z, 1.0 - CONTENT_LEAD_Z
    sure = z - CONTENT_LEAD_SIGMAS * max(noise, 0.0)
    model = step_response(r, delay, window, lag)
    inside = (r <= settle) & (((model > lo_z) & (model < hi_z)) | ((sure > lo_z) & (sure < hi_z)))
    if not inside.any():
        return 0.0
    offsets = _inverse_response(np.clip(sure[inside], lo_z, hi_z), delay, window, lag, settle) - r[inside]
    if offsets.size < CONTENT_LEAD_MIN_SAMPLES:
        return max(float(offsets.max()), 0.0)
    return max(float(np.quantile(offsets, q)), 0.0)


def _log_characterization(c: SensorCharacterization) -> None:
    logger.info(
        "sensor %s: period %.2f ms (p10 %.2f, p90 %.2f), delay %.2f ms, window %.2f ms, lag %.2f ms, "
        "settle %.1f ms, content lead %.2f ms, idle %.1f W, load %.1f W, rms %.2f W, noise %s W%s",
        c.channel,
        c.period_ms,
        c.period_p10_ms,
        c.period_p90_ms,
        c.delay_ms,
        c.window_ms,
        c.lag_ms,
        c.settle_ms,
        c.content_lead_ms or 0.0,
        c.idle_mw / 1e3,
        (c.load_mw or 0.0) / 1e3,
        (c.fit_rms_mw or 0.0) / 1e3,
        "n/a" if c.noise_mw is None else f"{c.noise_mw / 1e3:.2f}",
        f" flags {c.flags}" if c.flags else "",
    )


# --------------------------------------------------------------------------- main entry points
def characterize_sensor(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    on_start_ns: np.ndarray,
    on_end_ns: np.ndarray,
    channel: str = "total",
) -> SensorCharacterization:
    """Characterize one channel from its samples (host-clock ns, mW) and the load's on-intervals
    (host-clock ns). Raises DataError on unusable input (too few samples or steps, overlapping steps).
    The steps of the module docstring: crude levels -> pooled step response (grid + refinement) -> raw fit."""
    s = ChannelSeries.of(t_ns, power_mw, on_start_ns, on_end_ns, channel)
    crude = CrudeLevels.of(s)
    if not crude.responds:
        return _no_response(s, crude)
    pooled = PooledFit.of(s, crude)
    fit = RawFit.of(s, pooled)
    delay, window, lag = (float(v) for v in fit.p)
    idle, step, trend = (float(v) for v in fit.model.solve(fit.p)[0])
    settle = settle_time_ms(delay, window, lag)
    # a window or lag near its bound 0 trades off against the delay to first order: hold it for the errors
    free = [True, window >= RESOLVABLE * s.period, lag >= RESOLVABLE * s.period]
    limit = s.edges.min_interval
    (se_d, se_w, se_l), se_g = _param_se(fit.model, fit.p, fit.rss, max(pooled.xtol, 1e-3), free, limit=limit)
    y_detr = s.y - trend * fit.model.tc  # trend removed, final levels
    r_pooled, z_pooled = _pooled(s.t, y_detr, s.edges, idle, step, pooled.pre)  # the final, detrended response
    noise = _noise(s.t, y_detr, s.edges, settle)
    char = SensorCharacterization(
        responds=True,
        idle_mw=idle,
        load_mw=idle + step,
        step_mw=step,
        delay_ms=delay,
        window_ms=window,
        lag_ms=lag,
        settle_ms=settle,
        group_delay_ms=delay + window / 2.0 + lag,
        delay_se_ms=se_d,
        window_se_ms=se_w,
        lag_se_ms=se_l,
        group_delay_se_ms=se_g,
        fit_rms_mw=math.sqrt(fit.rss / len(s.y)),
        content_lead_ms=content_lead(r_pooled, z_pooled, fit.p, settle, (noise or 0.0) / abs(step) if step else 0.0),
        boxcar_only=fit.boxcar_only(len(s.y)),
        noise_mw=noise,
        trend_mw_per_s=trend,
        response=_measured_response(s, r_pooled, z_pooled, pooled.pre, settle, fit.p),
        flags=_fit_flags(s, pooled, fit, settle),
        **s.common(),
    )
    _log_characterization(char)
    return char


def characterize_channels(
    samples: PowerSamples,
    on_start_ns: np.ndarray,
    on_end_ns: np.ndarray,
    channels: Sequence[str] | None = None,
) -> dict[str, SensorCharacterization]:
    """`characterize_sensor` for each channel (default: every channel present, "total" first)."""
    ch = np.asarray(samples.channel, dtype=object)
    if channels is None:
        present = list(dict.fromkeys(ch.tolist()))
        channels = sorted(present, key=lambda c: (c != "total", present.index(c)))
    out: dict[str, SensorCharacterization] = {}
    for name in channels:
        m = ch == name
        if not m.any():
            raise DataError(f"sensor fit: no samples of channel {name!r}")
        out[name] = characterize_sensor(samples.t_ns[m], samples.power_mw[m], on_start_ns, on_end_ns, name)
    return out
