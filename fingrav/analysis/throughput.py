"""Throughput and efficiency of a kernel whose work is known, with CIs (`fingrav.contracts.result.Throughput`).

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
from collections.abc import Callable

import numpy as np

from fingrav.contracts.result import Estimate, Throughput
from fingrav.contracts.work import Work

logger = logging.getLogger(__name__)

RATE_METHOD = (
    "the cycle time's CI (percentile interval of the cluster-bootstrap replicates) mapped through amount / cycle"
)
SUSTAINED_RATE_METHOD = (
    "the uninstrumented cycle with the relative CI of the stamped cycle's bootstrap replicates, mapped through "
    "amount / cycle"
)
EFFICIENCY_METHOD = (
    "the energy-per-execution CI (bootstrap + systematic) mapped through the monotone E -> flop / E or E / amount"
)
NS_PER_S = 1e9
PJ_PER_MJ = 1e9


def cycle_estimate(
    cycle_ns: float | None, replicates: np.ndarray | None, level: float, scale_to_ns: float | None = None
) -> Estimate:
    """The cycle time (ns) with the percentile CI of its bootstrap replicates at `level`; with `scale_to_ns`, the
    same relative CI around another cycle (the sustained run's, timed by two stamps over the whole run: its
    run-to-run variability is taken from the stamped runs')."""
    if cycle_ns is None or cycle_ns <= 0:
        return Estimate(unit="ns")
    lo = hi = None
    if replicates is not None:
        r = np.asarray(replicates, dtype=np.float64)
        r = r[np.isfinite(r) & (r > 0)]
        if r.size:
            a = (1.0 - level) / 2.0
            lo, hi = (float(x) for x in np.quantile(r, [a, 1.0 - a]))
    if scale_to_ns is None:
        return Estimate.of(cycle_ns, lo, hi, "ns", RATE_METHOD)
    f = scale_to_ns / cycle_ns
    return Estimate.of(scale_to_ns, lo * f if lo else None, hi * f if hi else None, "ns", SUSTAINED_RATE_METHOD)


def throughput(work: Work | None, cycle_ns: Estimate, energy_per_exec: Estimate) -> Throughput:
    """The `Throughput` of one scenario (module docstring): the work, and where it is known rates over the cycle
    (ns, `cycle_estimate`) and efficiencies from the energy per execution (mJ), each CI the image of its input's
    CI under the monotone map."""
    if work is None or (not work.flop and not work.bytes):
        return Throughput()
    flop, nbytes = work.flop or None, work.bytes or None

    def per_cycle(amount: float | None, scale: float, unit: str) -> Estimate:
        if not amount:
            return Estimate(unit=unit)
        return cycle_ns.map_monotone(lambda c: amount / c * scale, True, unit, cycle_ns.method)

    def of_energy(amount: float | None, f: Callable[[float], float], decreasing: bool, unit: str) -> Estimate:
        return energy_per_exec.map_monotone(f, decreasing, unit, EFFICIENCY_METHOD) if amount else Estimate(unit=unit)

    out = Throughput(
        work_flop=work.flop,
        work_bytes=work.bytes,
        tflop_s=per_cycle(flop, NS_PER_S / 1e12, "TFLOP/s"),
        gb_s=per_cycle(nbytes, NS_PER_S / 1e9, "GB/s"),
        tflop_s_per_w=of_energy(flop, lambda e: flop / (e * 1e-3) / 1e12, True, "TFLOP/s/W"),
        energy_per_flop=of_energy(flop, lambda e: e * PJ_PER_MJ / flop, False, "pJ/flop"),
        energy_per_byte=of_energy(nbytes, lambda e: e * PJ_PER_MJ / nbytes, False, "pJ/B"),
        time_basis=cycle_ns.method,
    )
    logger.debug("throughput: %s", out.model_dump())
    return out
