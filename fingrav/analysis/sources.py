"""The sensor-source systematic: what the card's two power sources disagree on, in every absolute power CI.

A GPU reports its power twice: the sample buffer (the power samples every statistic of fingrav rests on) and the
energy counter. On an H200 the two disagree by up to ~2 % over one run, and neither is the truth an independent
instrument would read; the run-to-run scatter that a bootstrap or a batch-means CI holds says nothing about it.

The disagreement is measured per scenario over its whole collection (`collection_counter_vs_samples`): the
counter's energy from the first run's start reading to the last run's end reading against the samples' integral
over the same span (delay-corrected, idle between the runs included). That span is tens of seconds, so the
counter's update period and resolution (100 ms and 1 mJ on an H200) cost ~0.1 % where the reference run's own
comparison (`reference.counter_vs_samples`, 3 s: worst-case bounds of several %) cannot resolve it. The comparison's
own noise is the counter's: each of the two readings is floored to one step (resolution r) and up to one update
period u old, so it misses a uniform share of the last u of energy before it; its standard deviation (% of the
samples' energy E over the span)

    sigma = 100 / E x sqrt(2 r² / 12 + ((P_start u)² + (P_end u)²) / 12)

(P_start, P_end: the samples' power at the two readings). The sensor-source term is the disagreement beyond that
noise, d' = sqrt(max(0, d² - (1.96 sigma)²)) (as the tail-trend bias is the slope beyond its noise, `settling`): a
simulator whose two sources agree gets ~0, a counter and samples that disagree get their disagreement. The
disagreement is an energy over the span, i.e. a mean power offset: D = d' / 100 x P_coll (mW), P_coll the samples'
mean power over the span (idle between the runs included). A sensor's quantization and offset errors are offsets in
W, not shares of the power: the collection's d' in % of a mean that is mostly idle (P_coll ~0.3-0.9 of the kernel's
power) overstates the share it is of a kernel's power (issue 22: on the fidelity matrix the headline's error was
0.2-0.8 of d', as 1 - P_coll / P would have it). The term is D, in mW, combined in quadrature with each CI
half-width (an error independent of the run-to-run scatter):

    half' = sqrt(half² + (D / P x value)²)

(P: the power the number stands for, mW; value x D / P = D for a power, D x the cycle for an energy per execution).

for every absolute power or energy the samples give (the headline power and energy per execution, the method SSP's
power and energy). The simulator's counter and samples are its own two sources (the true energy, floored and
updated like the real counter; the sensor model's samples): there the term is what they disagree on beyond the
comparison's noise, which is the samples' own bias (a quantized sensor with little noise reads a few tenths of a
% off; experiments/RESULTS.md, issue 22). Comparisons of two numbers of the same source (the method
SSP vs the reference run, a reading vs the SSP) keep their CIs: the term cancels. The `imprecise` flag judges the
CIs without it: more runs cannot narrow it. Without the counter there is no term (`SourceTerm.pct` None). Powers
mW, energies mJ.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import polars as pl

from fingrav.analysis.energy import trapezoid_energy_mj
from fingrav.backends import EnergyCounter
from fingrav.contracts.result import Estimate
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.units import MJ_PER_MW_NS

logger = logging.getLogger(__name__)

METHOD = "sensor-source systematic (counter vs samples over the collection beyond its noise, in W, in quadrature)"
#: shortest span (ns) over which the two sources are compared
MIN_SPAN_NS = 100_000_000


#: z of the two-sided 95 % level: the disagreement beyond 1.96 of the comparison's own standard deviation counts
Z95 = 1.96


def _collection_span(runs: pl.DataFrame, host_execs: pl.DataFrame) -> tuple[int, int, float] | None:
    """(start ns, end ns, counter energy mJ) of the collection: from the earliest run's start reading to the latest
    run's end reading; None without counter readings or over less than `MIN_SPAN_NS`."""
    need = ("host_start_ns", "energy_start_mj", "energy_end_mj")
    if runs.height == 0 or any(c not in runs.columns for c in need) or host_execs.height == 0:
        return None
    ends = host_execs.group_by(pl.col("run").cast(pl.Int32)).agg(end_ns=pl.col("exec_end_ns").max())
    r = (
        runs.select(pl.col("run").cast(pl.Int32), *need)
        .join(ends, on="run")
        .filter(pl.col("energy_start_mj").is_not_null() & pl.col("energy_end_mj").is_not_null())
    )
    if r.height == 0:
        return None
    first = r.sort("host_start_ns").row(0, named=True)
    last = r.sort("end_ns").row(-1, named=True)
    start_ns, end_ns = int(first["host_start_ns"]), int(last["end_ns"])
    counter_mj = float(last["energy_end_mj"]) - float(first["energy_start_mj"])
    if end_ns - start_ns < MIN_SPAN_NS or not math.isfinite(counter_mj) or counter_mj <= 0:
        return None
    return start_ns, end_ns, counter_mj


def collection_mean_power_mw(
    runs: pl.DataFrame, host_execs: pl.DataFrame, samples: pl.DataFrame, delay_ns: int
) -> float | None:
    """The samples' mean power (mW) over the span of `collection_counter_vs_samples` (idle between the runs
    included): the power its disagreement is a share of. None where that comparison has no value."""
    both = _collection_energies(runs, host_execs, samples, delay_ns)
    if both is None:
        return None
    return both.integral_mj / ((both.end_ns - both.start_ns) * MJ_PER_MW_NS)


class _CollectionEnergies(NamedTuple):
    """The collection's span (ns), the counter's energy over it and the samples' integral (mJ), and the samples
    (delay-corrected ns, mW) the integral is of."""

    start_ns: int
    end_ns: int
    counter_mj: float
    integral_mj: float
    t_ns: np.ndarray
    power_mw: np.ndarray


def _collection_energies(
    runs: pl.DataFrame, host_execs: pl.DataFrame, samples: pl.DataFrame, delay_ns: int
) -> _CollectionEnergies | None:
    """The counter's energy and the samples' integral over the collection's span (`_collection_span`; samples of
    the total channel, delay-corrected); None without a span or a non-zero integral."""
    span = _collection_span(runs, host_execs)
    if span is None:
        return None
    start_ns, end_ns, counter_mj = span
    smp = samples.lazy().filter(pl.col("channel") == TOTAL).select("t_ns", "power_mw").sort("t_ns").collect()
    t = smp["t_ns"].to_numpy().astype(np.int64) - int(delay_ns)
    p = smp["power_mw"].to_numpy()
    integral = trapezoid_energy_mj(t, p, start_ns, end_ns)
    return _CollectionEnergies(start_ns, end_ns, counter_mj, integral, t, p) if integral else None


def collection_counter_vs_samples(
    runs: pl.DataFrame,
    host_execs: pl.DataFrame,
    samples: pl.DataFrame,
    delay_ns: int,
    counter: EnergyCounter | None = None,
) -> Estimate:
    """The energy counter vs the samples over the scenario's collection (%): (counter - samples integral) / samples
    integral x 100, from the earliest run's start reading (`runs.host_start_ns`, `energy_start_mj`) to the latest
    run's end reading (its last execution's end, `energy_end_mj`); samples of the total channel, delay-corrected.
    Its CI: ± 1.96 sigma of the counter's own noise (module docstring; `counter`: the device's counter, None: no
    CI). No value without counter readings, samples over the span, or a span of `MIN_SPAN_NS`."""
    none = Estimate(unit="%", method="counter vs samples over the collection")
    both = _collection_energies(runs, host_execs, samples, delay_ns)
    if both is None:
        return none
    start_ns, end_ns, counter_mj, integral, t, p = both
    pct = (counter_mj - integral) / integral * 100.0
    method = f"counter vs samples over the collection ({(end_ns - start_ns) / 1e9:.1f} s)"
    if counter is None:
        return Estimate.of(pct, unit="%", method=method)
    p_start, p_end = (float(np.interp(x, t, p)) for x in (start_ns, end_ns))
    e_u = (p_start * counter.update_ns * MJ_PER_MW_NS, p_end * counter.update_ns * MJ_PER_MW_NS)  # mJ
    sigma = 100.0 / integral * math.sqrt((2.0 * counter.resolution_mj**2 + e_u[0] ** 2 + e_u[1] ** 2) / 12.0)
    half = Z95 * sigma
    return Estimate.of(pct, pct - half, pct + half, "%", f"{method}; CI: the counter's resolution and update period")


_MW_PER = {"mW": 1.0, "W": 1e3}  # the power units an Estimate comes in


@dataclass(frozen=True)
class SourceTerm:
    """The sensor-source term: the disagreement beyond its noise in % of the collection's mean power (`pct`; None:
    not measured), the same as a power offset (`mw`, mW; None: the collection's mean power unknown: then `pct` is
    taken as a share of every number), and how it was obtained."""

    pct: float | None
    mw: float | None = None
    method: str = METHOD

    @classmethod
    def of(cls, counter_vs_samples: Estimate | None, mean_mw: float | None = None) -> SourceTerm:
        """The term of a counter-vs-samples comparison (%: `collection_counter_vs_samples`): the disagreement beyond
        its own noise, sqrt(max(0, d² - half²)) with half its CI's half-width (d itself without a CI); with the
        collection's mean power `mean_mw` (`collection_mean_power_mw`), also as a power offset (mW)."""
        e = counter_vs_samples
        if e is None or e.value is None:
            return cls(None)
        d = abs(float(e.value))
        if e.ci_low is not None and e.ci_high is not None:
            half = 0.5 * (float(e.ci_high) - float(e.ci_low))
            d = math.sqrt(max(0.0, d * d - half * half))
        mw = d / 100.0 * float(mean_mw) if mean_mw is not None and math.isfinite(mean_mw) and mean_mw > 0 else None
        return cls(d, mw)

    def share_pct(self, power: Estimate | None) -> float | None:
        """The term in % of `power` (an Estimate in mW or W): the offset over the power, else `pct`."""
        if not self.pct:
            return self.pct
        if self.mw is None or power is None or power.value is None or power.unit not in _MW_PER:
            return self.pct
        p = abs(float(power.value)) * _MW_PER[power.unit]
        return 100.0 * self.mw / p if p > 0 else self.pct

    def widen(self, e: Estimate, power: Estimate | None = None) -> Estimate:
        """`e` with the term in its CI, each half-width combined with it in quadrature (unchanged without a term, a
        value or a CI); power: the power `e` stands for (`share_pct`; None: `e` itself, a power)."""
        share = self.share_pct(power if power is not None else e)
        if not share:
            return e
        return e.with_term(share / 100.0, f"{self.method} ±{share:.3g} %" if e.method else self.method)
