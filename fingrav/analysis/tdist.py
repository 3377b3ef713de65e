"""Student's t distribution in closed form (no scipy): the two-sided probability and critical value that the
batch-means and per-cycle t-intervals use (`fingrav.analysis.reference`, `fingrav.analysis.sustained`), and the
t-interval of independent values (`t_interval`, `t_half_width`)."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np


def t_two_sided_prob(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer `df` >= 1 degrees of freedom (closed form, Abramowitz
    & Stegun 26.7.3-4)."""
    if df < 1:
        raise ValueError(f"df must be >= 1, got {df}")
    if t <= 0:
        return 0.0
    theta = math.atan(t / math.sqrt(df))
    c2 = math.cos(theta) ** 2
    if df % 2 == 1:
        if df == 1:
            return 2.0 * theta / math.pi
        term, acc = math.cos(theta), math.cos(theta)
        for k in range(3, df - 1, 2):  # terms cos^3 .. cos^(df-2), coefficients 2/3, 2*4/(3*5), ...
            term *= c2 * (k - 1) / k
            acc += term
        return 2.0 / math.pi * (theta + math.sin(theta) * acc)
    term, acc = 1.0, 1.0
    for k in range(2, df, 2):  # terms cos^2 .. cos^(df-2), coefficients 1/2, 1*3/(2*4), ...
        term *= c2 * (k - 1) / k
        acc += term
    return math.sin(theta) * acc


def t_critical(level: float, df: int) -> float:
    """The two-sided critical value of Student's t: P(|T| <= t) = level (e.g. 2.262 for 0.95, df 9)."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    lo, hi = 0.0, 1.0
    while t_two_sided_prob(hi, df) < level:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_two_sided_prob(mid, df) < level:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def _finite_values(values: Iterable[float | None]) -> np.ndarray:
    return np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)


def t_half_width(values: Iterable[float | None], level: float = 0.95) -> float | None:
    """Half-width of the t-interval of the mean of independent `values` (None and non-finite ones dropped):
    t(level, n - 1) x sd / sqrt(n), in the values' unit; None with fewer than 2 values."""
    v = _finite_values(values)
    if v.size < 2:
        return None
    return t_critical(level, v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)


def t_interval(values: Iterable[float | None], level: float = 0.95) -> tuple[float | None, float | None, float | None]:
    """(mean, ci_low, ci_high) of independent `values` (None and non-finite ones dropped): a t-interval; None
    bounds with fewer than 2 values, all None without any."""
    v = _finite_values(values)
    if v.size == 0:
        return None, None, None
    m = float(v.mean())
    half = t_half_width(v, level)
    return (m, None, None) if half is None else (m, m - half, m + half)


def ratio_t_half_width(
    sums: Iterable[float], counts: Iterable[float], level: float = 0.95
) -> tuple[float | None, float | None]:
    """(ratio, half-width) of the pooled mean sum(sums) / sum(counts) over k independent clusters (cluster i: the
    total `sums[i]` of `counts[i]` units): the linearized (delta-method) standard error of the ratio, with the
    small-sample k / (k - 1) and t(level, k - 1): half = t x sqrt(k / (k - 1) x sum_i (s_i - r n_i)^2) / sum_i n_i,
    in the sums' unit per count. A cluster weighs by its count, as it does in the ratio itself (a short cluster moves
    the ratio little, and its CI as little). (None, None) without counts, (ratio, None) with fewer than 2 clusters."""
    s = np.asarray(list(sums), dtype=np.float64)
    n = np.asarray(list(counts), dtype=np.float64)
    total = float(n.sum())
    if total <= 0:
        return None, None
    r = float(s.sum()) / total
    k = s.size
    if k < 2:
        return r, None
    resid = s - r * n
    return r, t_critical(level, k - 1) * math.sqrt(k / (k - 1) * float(np.sum(resid * resid))) / total
