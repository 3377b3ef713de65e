"""Throughput and efficiency of a kernel whose work is known, with CIs (`fingrav.contracts.profile.Throughput`).

Computed once, in the differentiate stage, from the work per execution (`fingrav.contracts.work.Work`: flop, bytes),
the headline's cycle time and energy per execution: with a reference run (ssp_source sustained) its uninstrumented
cycle, timed by two GPU stamps around the whole run (its CI is that one value: over ~10^4-10^7 executions the
stamps' resolution is negligible), and its sustained energy; without one the stamped SSP cycle and the burst energy:

* rates over the SSP cycle time c (pooled mean start-to-start time, ns): TFLOP/s = flop / c * 1e-3 and
  GB/s = bytes / c; their CIs are the percentile intervals of the same map over the cluster bootstrap's
  replicates of c (`ProfileResult.cycle_replicates`);
* efficiencies from the energy per execution E (mJ): TFLOP/s per W = flop / E * 1e-9 (TFLOP per J),
  pJ per flop = E * 1e9 / flop, pJ per byte = E * 1e9 / bytes; their CIs are the image of E's CI (the bootstrap
  interval of E = SSP power x cycle time over paired replicates, widened by the SSP's systematic part) under the
  map, which is monotone, so the image of an interval is the interval of the image (exact, no linearization).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from fingrav.contracts.profile import Estimate, Throughput
from fingrav.contracts.work import Work

logger = logging.getLogger(__name__)

CI_METHOD = (
    "rates: percentile interval of the cluster-bootstrap cycle-time replicates mapped through amount / cycle; "
    "efficiencies: the energy-per-execution CI (bootstrap + systematic) mapped through the monotone E -> flop / E "
    "or E / amount"
)
NS_PER_S = 1e9
PJ_PER_MJ = 1e9


def _finite(v: float | None) -> float | None:
    return float(v) if v is not None and math.isfinite(v) else None


def _rate(
    amount: float | None, cycle_ns: float | None, replicates: np.ndarray | None, scale: float, level: float
) -> Estimate:
    """amount per execution / cycle time (ns) x scale, with the percentile CI of the replicates at `level`."""
    if not amount or cycle_ns is None or cycle_ns <= 0:
        return Estimate()
    value = amount / cycle_ns * scale
    lo = hi = None
    if replicates is not None:
        r = np.asarray(replicates, dtype=np.float64)
        r = r[np.isfinite(r) & (r > 0)]
        if r.size:
            a = (1.0 - level) / 2.0
            c_lo, c_hi = np.quantile(r, [a, 1.0 - a])
            lo, hi = amount / c_hi * scale, amount / c_lo * scale  # decreasing in c
    return Estimate(value=_finite(value), ci_low=_finite(lo), ci_high=_finite(hi))


def _of_energy(energy: Mapping[str, Any], f: Callable[[float], float], decreasing: bool) -> Estimate:
    """f(E) with the image of E's CI (f monotone; `decreasing` swaps the ends)."""
    e, lo, hi = energy.get("value"), energy.get("ci_low"), energy.get("ci_high")
    if e is None or e <= 0:
        return Estimate()
    ends = [f(x) if x is not None and x > 0 else None for x in (lo, hi)]
    if decreasing:
        ends.reverse()
    return Estimate(value=_finite(f(e)), ci_low=_finite(ends[0]), ci_high=_finite(ends[1]))


def throughput(
    work: Work | None,
    cycle_mean_ns: float | None,
    cycle_replicates: np.ndarray | None,
    energy_per_exec_mj: Mapping[str, Any],
    ci_level: float,
) -> Throughput | None:
    """The `Throughput` of one scenario (module docstring); None when the work is unknown.

    work: flop / bytes per execution; cycle_mean_ns: the pooled mean SSP cycle time and its bootstrap replicates;
    energy_per_exec_mj: {value, ci_low, ci_high} (mJ); ci_level: the CI level of the replicates' interval."""
    if work is None or (not work.flop and not work.bytes):
        return None
    flop, nbytes = work.flop or None, work.bytes or None
    out = Throughput(
        tflop_s=_rate(flop, cycle_mean_ns, cycle_replicates, NS_PER_S / 1e12, ci_level),
        gb_s=_rate(nbytes, cycle_mean_ns, cycle_replicates, NS_PER_S / 1e9, ci_level),
        tflop_s_per_w=_of_energy(energy_per_exec_mj, lambda e: flop / (e * 1e-3) / 1e12, True) if flop else Estimate(),
        energy_per_flop_pj=_of_energy(energy_per_exec_mj, lambda e: e * PJ_PER_MJ / flop, False)
        if flop
        else Estimate(),
        energy_per_byte_pj=_of_energy(energy_per_exec_mj, lambda e: e * PJ_PER_MJ / nbytes, False)
        if nbytes
        else Estimate(),
        ci_method=CI_METHOD,
    )
    logger.debug("throughput: %s", out.model_dump())
    return out


def row_columns(work: Work | None, t: Throughput | None) -> dict[str, float | None]:
    """The summary.csv `THROUGHPUT` columns (`fingrav.contracts.summary`) of a scenario (all None without work)."""

    def trio(name: str, unit: str, e: Estimate | None) -> dict[str, float | None]:
        e = e or Estimate()
        return {f"{name}_{unit}": e.value, f"{name}_ci_low_{unit}": e.ci_low, f"{name}_ci_high_{unit}": e.ci_high}

    return {
        "work_flop": work.flop if work is not None else None,
        "work_bytes": work.bytes if work is not None else None,
        **trio("throughput", "tflop_s", t.tflop_s if t else None),
        **trio("bandwidth", "gb_s", t.gb_s if t else None),
        **trio("energy_efficiency", "tflop_s_per_w", t.tflop_s_per_w if t else None),
        **trio("energy_per_flop", "pj", t.energy_per_flop_pj if t else None),
        **trio("energy_per_byte", "pj", t.energy_per_byte_pj if t else None),
    }
