"""Energy of a sampled power trace: numpy only, so that GPU-side code and experiments that run on a GPU machine
without polars (experiments/peers.py) use the analysis' own integral."""

from __future__ import annotations

import numpy as np

from fingrav.contracts.units import MJ_PER_MW_NS


def trapezoid_energy_mj(t_ns: np.ndarray, power_mw: np.ndarray, start_ns: int, end_ns: int) -> float | None:
    """Trapezoid integral (mJ) of the power samples (sorted t_ns) over [start_ns, end_ns], the power
    at both ends interpolated linearly; None without samples on both sides of the span."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    if end_ns <= start_ns or t.size < 2 or t[0] > start_ns or t[-1] < end_ns:
        return None
    i0 = int(np.searchsorted(t, start_ns, side="right"))
    i1 = int(np.searchsorted(t, end_ns, side="left"))
    tt = np.concatenate([[start_ns], t[i0:i1], [end_ns]]).astype(np.float64)
    tt -= float(start_ns)  # relative times keep float64 precision with epoch-sized stamps
    pp = np.concatenate([[np.interp(start_ns, t, p)], p[i0:i1], [np.interp(end_ns, t, p)]])
    return float(np.sum(0.5 * (pp[1:] + pp[:-1]) * np.diff(tt))) * MJ_PER_MW_NS
