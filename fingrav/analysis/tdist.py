"""Student's t distribution in closed form (no scipy): the two-sided probability and critical value that the
batch-means and per-cycle t-intervals use (`fingrav.analysis.reference`, `fingrav.analysis.sustained`)."""

from __future__ import annotations

import math


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
