"""Sustained power under a power limiter: the limit cycle of a long back-to-back run and its whole-cycle mean.

A cap-bound kernel run back to back does not settle at one level on a card whose power limiter cycles (the
H200: ~0.7 s near the burst level, ~0.2 s clamped, repeating). A mean over an arbitrary span then depends on
where the span starts and ends; the sustained power is the mean over *whole* cycles. From the settled,
delay-corrected samples of the reference run:

1. the run cycles when the 200 ms block means spread by more than `contracts.flags.MAX_BLOCK_SPREAD_PCT`;
2. the samples are averaged into bins of `SEGMENTATION_FACTORS` x the median sample interval (at least `BIN_NS`;
   bins narrower than about 1.5 intervals alias with the samples: empty bins every few bins split the phases
   apart); the bins are labelled clamped (low) or released (high) with hysteresis, switching below the lower third
   and above the upper third between their 10th and 90th percentiles, and runs of fewer than `MIN_RUN_BINS` bins
   are merged into their neighbours (noise);
3. a cycle runs from the start of one clamp to the start of the next (a cycle shorter than half the median one
   joins its shorter neighbour: a brief release within a clamp is not a cycle); per cycle: period, duty (the
   released fraction), high and low levels, and its mean;
4. the sustained power is the time-weighted mean of the bins from the first clamp start to the last, its CI the
   time-weighted one over cycles (a ratio's, each cycle weighing by its length; >= 3 cycles; else none); the
   cycle's numbers (period, duty, levels) get t-intervals.

Where cycles begin is a model choice, and on the H200 the per-cycle CI changes with it (0.1-1.2 % on one run for
bins of 1.5-3 sample intervals; the mean by < 0.2 %): the cycle's numbers come from the middle bin width, and the
mean's CI is the widest of the bin widths that see >= 3 cycles (a systematic part, as in
`fingrav.analysis.kernel_power`). Without cycling the sustained power is the mean of the run's last half
(`drift`): the die warms for seconds (the H200: +0.6 % from 0.5 to 3 s), so the latest half is the closest to
sustained use; its batch-means CI is combined in quadrature with half the change across that half beyond the
change's own noise (`drift_term_pct`). Powers mW, times ns.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from dataclasses import dataclass

import numpy as np

from fingrav.analysis.tdist import ratio_t_half_width, t_critical, t_interval
from fingrav.contracts.flags import BLOCK_NS, MAX_BLOCK_SPREAD_PCT
from fingrav.contracts.plan import ReferenceStop
from fingrav.contracts.profile import Drift, LimitCycleStats, ReferenceStats
from fingrav.contracts.result import Estimate, PowerSource
from fingrav.contracts.units import MJ_PER_MW_NS

logger = logging.getLogger(__name__)

BIN_NS = 10_000_000  # 10 ms
MIN_RUN_BINS = 2
MIN_CYCLES_FOR_CI = 3
MIN_CYCLE_FRAC = 0.5  # a "cycle" shorter than this fraction of the median one is part of a neighbour
SEGMENTATION_FACTORS = (1.5, 2.0, 3.0)  # bin widths, in sample intervals (module docstring)
BATCHES = 10  # contiguous batches of the batch-means CI


def batch_means_ci(
    values: np.ndarray, level: float = 0.95, batches: int = BATCHES
) -> tuple[float | None, float | None, float | None]:
    """(mean, ci_low, ci_high) of autocorrelated `values` in time order: the mean of all values and a
    t-interval from the means of `batches` contiguous, near-equal batches (df = batches - 1).
    Fewer values than batches: (mean, None, None); no values: (None, None, None)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return None, None, None
    mean = float(v.mean())
    if v.size < batches or batches < 2:
        return mean, None, None
    means = np.array([b.mean() for b in np.array_split(v, batches)])
    half = t_critical(level, batches - 1) * float(means.std(ddof=1)) / math.sqrt(batches)
    return mean, mean - half, mean + half


def block_spread_pct(t_ns: np.ndarray, power_mw: np.ndarray, block_ns: int = BLOCK_NS) -> float | None:
    """(max - min) / mean of the block means of settled power, in %: how much sustained power still moves
    after settling. A power limiter that clamps the card in ~1 s cycles (H200 GEMMs near the cap) shows as
    a large spread; None with fewer than 3 blocks of >= 3 samples."""
    if t_ns.size < 9:
        return None
    blk = (t_ns - t_ns[0]) // block_ns
    means = [float(power_mw[blk == b].mean()) for b in np.unique(blk) if np.count_nonzero(blk == b) >= 3]
    if len(means) < 3:
        return None
    m = float(np.mean(means))
    return (max(means) - min(means)) / m * 100.0 if m else None


def drift(t_ns: np.ndarray, power_mw: np.ndarray, level: float = 0.95) -> Drift | None:
    """The `Drift` of the last half (in time) of settled samples; None with fewer than 2 x BATCHES samples in it.
    The slope is fitted to the means of BATCHES contiguous batches against their mean times, its standard error
    from their residuals (df BATCHES - 2): the samples' autocorrelation cannot make a wiggle look like a drift."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    if t.size < 4:
        return None
    mid = t[0] + (t[-1] - t[0]) // 2
    keep = t >= mid
    th, ph = (t[keep] - mid).astype(np.float64), p[keep]
    if ph.size < 2 * BATCHES:
        return None
    tb = np.array([b.mean() for b in np.array_split(th, BATCHES)])
    pb = np.array([b.mean() for b in np.array_split(ph, BATCHES)])
    x = tb - tb.mean()
    sxx = float(np.sum(x * x))
    m = float(ph.mean())
    if sxx <= 0 or m == 0:
        return None
    slope = float(np.sum(x * (pb - pb.mean())) / sxx)
    resid = pb - pb.mean() - slope * x
    se_slope = math.sqrt(float(np.sum(resid * resid)) / (BATCHES - 2) / sxx)
    span = float(th.max() - th.min())
    mean, lo, hi = batch_means_ci(ph, level)
    return Drift(
        change_pct=slope * span / m * 100.0,
        se_pct=se_slope * span / abs(m) * 100.0,
        mean_mw=float(mean if mean is not None else m),
        ci_low_mw=lo,
        ci_high_mw=hi,
        start_ns=int(mid),
    )


def _t_interval(values: list[float], level: float, unit: str) -> Estimate:
    """The mean of `values` (non-finite dropped) with a t-interval over them (no CI with fewer than 2)."""
    return Estimate.of(*t_interval(values, level), unit=unit, method="t-interval over limit cycles")


def binned(t_ns: np.ndarray, power_mw: np.ndarray, bin_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """(bin start ns, bin mean mW) of the samples, bins without samples dropped."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    k = (t - t[0]) // bin_ns
    idx, inv = np.unique(k, return_inverse=True)
    sums = np.bincount(inv, weights=p)
    counts = np.bincount(inv)
    return t[0] + idx * bin_ns, sums / counts


def _merge_short_runs(high: np.ndarray, min_len: int) -> np.ndarray:
    """Runs of the boolean labels shorter than min_len take their left neighbour's label (noise, not phases)."""
    out = high.copy()
    i = 0
    while i < out.size:
        j = i
        while j < out.size and out[j] == out[i]:
            j += 1
        if j - i < min_len and i > 0:
            out[i:j] = out[i - 1]
        i = j
    return out


def _labels(cp: np.ndarray) -> np.ndarray:
    """Released (True) / clamped (False) per bin, with hysteresis (module docstring, 2.)."""
    lo_q, hi_q = np.quantile(cp, [0.1, 0.9])
    lower, upper = lo_q + (hi_q - lo_q) / 3.0, lo_q + 2.0 * (hi_q - lo_q) / 3.0
    high = np.empty(cp.size, dtype=bool)
    state = bool(cp[0] > 0.5 * (lo_q + hi_q))
    for i, v in enumerate(cp):
        if state and v < lower:
            state = False
        elif not state and v > upper:
            state = True
        high[i] = state
    return _merge_short_runs(high, MIN_RUN_BINS)


def _merge_short_cycles(starts: np.ndarray) -> np.ndarray:
    """The clamp starts with every cycle shorter than MIN_CYCLE_FRAC of the median cycle merged into its shorter
    neighbour (the boundary between them dropped), the shortest first, while two or more cycles are left. An
    irregular limiter (results/h200-db5) can release for a few bins within a clamp; on the narrowest bins that
    splits one cycle into a short, mostly clamped one and a mostly released one (654 W over 11 bins, 705 W over 23,
    where the cycles around them average ~689 W over ~30). The two are not independent cycles: taken as two they
    widened the whole-cycle CI from ~0.2 % to ~3 %. The whole-cycle mean, over the same span, does not change."""
    s = [int(x) for x in starts]
    while len(s) >= 3:
        lens = np.diff(s)
        i = int(np.argmin(lens))
        if lens[i] >= MIN_CYCLE_FRAC * float(np.median(lens)):
            break
        left = lens[i - 1] if i > 0 else None
        right = lens[i + 1] if i + 1 < lens.size else None
        merge_left = right is None or (left is not None and left <= right)
        del s[i if merge_left else i + 1]
    return np.asarray(s, dtype=np.int64)


def _segment(t: np.ndarray, p: np.ndarray, bin_ns: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(bin starts, bin means, released labels, indices of the clamp starts) for one bin width; cycles shorter
    than MIN_CYCLE_FRAC of the median merged into a neighbour (`_merge_short_cycles`)."""
    ct, cp = binned(t, p, bin_ns)
    high = _labels(cp)
    starts = np.flatnonzero(~high[1:] & high[:-1]) + 1  # released -> clamped
    return ct, cp, high, _merge_short_cycles(starts)


def _cycle_means(cp: np.ndarray, starts: np.ndarray) -> list[float]:
    return [float(cp[a:b].mean()) for a, b in zip(starts[:-1], starts[1:], strict=True)]


def _cycle_ratio_half(cp: np.ndarray, starts: np.ndarray, level: float) -> float | None:
    """The whole-cycle mean's CI half-width (mW) over the cycles between clamp starts `starts` of the bin means
    `cp`: the whole-cycle mean is time-weighted (every bin alike), so its CI is the ratio's over cycles
    (`fingrav.analysis.tdist.ratio_t_half_width`: each cycle weighs by its length), not a t-interval of cycle means
    taken alike. On the H200 the last cycle of a run is often short and mostly clamped (results/h200-db5: 7-15 bins
    at 672-677 W where the others average ~689 W); weighing it by its length alone took db5's 7 imprecise
    headlines from +-1.3-5.0 % to +-1.2-2.9 % (the rest was split cycles, `_merge_short_cycles`)."""
    bounds = zip(starts[:-1], starts[1:], strict=True)
    sums, counts = zip(*((float(cp[a:b].sum()), float(b - a)) for a, b in bounds), strict=True)
    return ratio_t_half_width(sums, counts, level)[1]


def _whole_cycle_mean(
    whole: float, cycles: int, segs: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]], level: float
) -> Estimate:
    """The whole-cycle mean (mW) with the widest of the CIs over cycles (`_cycle_ratio_half`) of the segmentations
    `segs` (bin widths) that have at least MIN_CYCLES_FOR_CI cycles; no CI with fewer cycles."""
    method = "whole-cycle mean; CI: the widest over the bin widths of the time-weighted CI over cycles"
    halves = [
        h
        for _, scp, _, st in segs
        if st.size - 1 >= MIN_CYCLES_FOR_CI and (h := _cycle_ratio_half(scp, st, level)) is not None
    ]
    if cycles >= MIN_CYCLES_FOR_CI and halves:
        half = max(halves)
        return Estimate.of(whole, whole - half, whole + half, "mW", method)
    return Estimate.of(whole, unit="mW", method=method)


def limit_cycle(
    t_ns: np.ndarray, power_mw: np.ndarray, level: float = 0.95, period_ns: float | None = None
) -> LimitCycleStats | None:
    """The limit cycle of settled samples (module docstring), or None when the power does not cycle (block
    spread <= MAX_BLOCK_SPREAD_PCT) or fewer than two clamp starts are seen. period_ns: the sample interval the bin
    widths scale with (default: the samples' median interval)."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    if t.size < 9:
        return None
    bt, bp = binned(t, p, BLOCK_NS)
    if bp.size < 3 or bp.mean() <= 0 or (bp.max() - bp.min()) / bp.mean() * 100.0 <= MAX_BLOCK_SPREAD_PCT:
        return None
    dt = float(period_ns) if period_ns else float(np.median(np.diff(t)))
    segs = [_segment(t, p, int(max(BIN_NS, f * dt))) for f in SEGMENTATION_FACTORS]
    ct, cp, high, clamp_starts = segs[len(segs) // 2]
    if clamp_starts.size < 2:
        return None
    periods, duties, highs, lows = [], [], [], []
    for a, b in zip(clamp_starts[:-1], clamp_starts[1:], strict=True):
        seg_h = high[a:b]
        seg_p = cp[a:b]
        periods.append(float(ct[b] - ct[a]))
        duties.append(float(seg_h.mean()))
        highs.append(float(seg_p[seg_h].mean()) if seg_h.any() else math.nan)
        lows.append(float(seg_p[~seg_h].mean()) if (~seg_h).any() else math.nan)
    a, b = int(clamp_starts[0]), int(clamp_starts[-1])
    n = len(_cycle_means(cp, clamp_starts))
    whole = float(cp[a:b].mean())
    mean_ci = _whole_cycle_mean(whole, n, segs, level)
    lc = LimitCycleStats(
        cycles=n,
        start_ns=int(ct[a]),
        end_ns=int(ct[b]),
        period_ns=_t_interval(periods, level, "ns"),
        duty=_t_interval(duties, level, ""),
        high_mw=_t_interval(highs, level, "mW"),
        low_mw=_t_interval(lows, level, "mW"),
        mean_mw=mean_ci,
    )
    logger.info(
        "limit cycle: %d whole cycles, period %.3g s, duty %.2g, high %.4g W, low %.4g W, mean %.4g W",
        n,
        (lc.period_ns.value or 0.0) / 1e9,
        lc.duty.value or 0.0,
        (lc.high_mw.value or 0.0) / 1e3,
        (lc.low_mw.value or 0.0) / 1e3,
        whole / 1e3,
    )
    return lc


def drift_term_pct(dr: Drift, level: float = 0.95) -> float:
    """Half the drift beyond its own noise (% of the mean): 0.5 x sqrt(max(0, c² - (t se)²)), c the change across the
    last half, se its standard error, t the two-sided `level` t-quantile of its BATCHES - 2 degrees of freedom (as
    the sensor-source term counts the disagreement beyond its noise, `fingrav.analysis.sources`). The change's noise
    is the batch means' own scatter, already in their CI: counted once, not twice. It is combined with the batch-means
    CI in quadrature (the power still moving inside the window, an error independent of the scatter)."""
    c, noise = float(dr.change_pct), t_critical(level, BATCHES - 2) * float(dr.se_pct)
    return 0.5 * math.sqrt(max(0.0, c * c - noise * noise))


@dataclass(frozen=True)
class SustainedHeadline:
    """The headline power (mW) and energy per execution (mJ), the cycle they rest on (ns) and where they come from
    (`fingrav.contracts.result.POWER_SOURCES`)."""

    source: PowerSource
    power: Estimate
    cycle_ns: float | None
    energy: Estimate


def headline(
    reference: ReferenceStats | None,
    burst: Estimate,
    burst_cycle_ns: float | None,
    burst_energy: Estimate,
) -> SustainedHeadline:
    """What the kernel draws in the state users run it in. With a settled reference run: its sustained power
    (the whole-cycle mean where the limiter cycles, else the settled mean) and its cycle time (uninstrumented
    when the device ran it without stamps: source "sustained", else "sustained_stamped"); where it does not cycle,
    the mean of the run's last half (`drift`), its CI and half the change across it beyond its noise in quadrature
    (`drift_term_pct`); with fewer than
    `MIN_CYCLES_FOR_CI` cycles the batch-means CI widened to include the settled mean. Without one: the FinGraV
    SSP of the short runs after idle (burst: mW, its cycle ns, its energy mJ), source "burst"."""
    ok = reference is not None and not reference.unsettled and reference.power_mw is not None
    if not ok or reference is None or not reference.cycle_ns or reference.power_mw is None:
        return SustainedHeadline("burst", burst, burst_cycle_ns, burst_energy)
    settled = float(reference.power_mw)
    lo, hi = reference.ci_low_mw, reference.ci_high_mw
    lc = reference.limit_cycle
    method = reference.ci_method
    if lc is not None:
        mean = lc.mean_mw
        power = float(mean.value) if mean.value is not None else settled
        method = mean.method
        if mean.ci_low is not None and mean.ci_high is not None:
            lo, hi = float(mean.ci_low), float(mean.ci_high)
        elif lo is not None and hi is not None:  # too few cycles: the settled CI, widened to the whole-cycle mean
            gap = abs(power - settled)
            lo, hi = min(float(lo), power) - gap, max(float(hi), power) + gap
            method = "whole-cycle mean; CI: the settled batch-means CI widened to it (too few cycles)"
    elif (dr := reference.drift) is not None:
        # the run's last half, the closest to sustained use (the die still warms for seconds); its CI widened by
        # half the change across it (the power still moves inside the window the number stands for)
        power = float(dr.mean_mw)
        extra = drift_term_pct(dr) / 100.0 * power
        method = "mean of the last half; CI: batch means and half its drift beyond its noise, in quadrature"
        if dr.ci_low_mw is not None and dr.ci_high_mw is not None:
            lo, hi = (
                power - math.hypot(power - float(dr.ci_low_mw), extra),
                power + math.hypot(float(dr.ci_high_mw) - power, extra),
            )
    else:
        power = settled
    cycle = float(reference.cycle_ns)
    p = Estimate.of(power, lo, hi, "mW", method)
    e = p.scaled(cycle * MJ_PER_MW_NS, "mJ", f"{method}; x the uninstrumented cycle (two stamps over the run)")
    source: PowerSource = "sustained" if reference.unstamped else "sustained_stamped"
    return SustainedHeadline(source, p, cycle, e)


#: a settled power whose block spread is above this fraction of MAX_BLOCK_SPREAD_PCT is near the limiter's edge
NEAR_LIMIT_FRAC = 0.8
#: ... and is watched this much longer than reference_ms before it is called steady: about one limit cycle on the
#: H200 (periods 0.96-1.02 s, results/h200-db6). There, two prefill attentions called steady at a spread of 4.4 and
#: 4.8 % (limit 5 %) began to clamp 0.1-0.2 s later, in the executions already queued, and their rows were left with
#: one limit cycle and an imprecise headline (results/h200-db5, results/h200-db6)
NEAR_LIMIT_NS = 1_000_000_000

#: why an adaptive reference run stopped or went on (`reference_decision`; plan.json `reference_stop`)
REFERENCE_REASONS = {
    "min_length": "shorter than run_policy.reference_ms: going on",
    "too_short_to_tell": "fewer than three 200 ms blocks of settled samples: going on",
    "near_limit": "settled power does not cycle but its block spread is near the limit (above NEAR_LIMIT_FRAC of "
    "it): going on for NEAR_LIMIT_NS past run_policy.reference_ms, to see whether the limiter starts to cycle",
    "steady": "settled power does not cycle (block spread within the limit) and no longer drifts: stopped",
    "drifting": "settled power still drifts over the run's last half by more than reference_ci_pct / 2: going on",
    "too_few_cycles": "the power cycles but fewer than three whole limit cycles are seen: going on",
    "ci_too_wide": "the whole-cycle mean's CI is wider than run_policy.reference_ci_pct: going on",
    "ci_reached": "the whole-cycle mean's CI is within run_policy.reference_ci_pct: stopped",
    "max_length": "run_policy.reference_max_ms reached: stopped",
}


@dataclass(frozen=True)
class ReferenceDecision:
    """Whether an adaptive reference run goes on (`reason`: a key of `REFERENCE_REASONS`); what it saw so far:
    `elapsed_ns` since the run started, whole limit `cycles`, and the whole-cycle mean's CI half-width in %
    (`ci_pct`, None without one)."""

    extend: bool
    reason: str
    elapsed_ns: int
    cycles: int = 0
    ci_pct: float | None = None

    def to_summary(self) -> ReferenceStop:
        """The decision as plan.json's `reference_stop`."""
        return ReferenceStop(**dataclasses.asdict(self))


def reference_decision(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    start_ns: int,
    now_ns: int,
    settle_ns: int,
    min_ns: int,
    max_ns: int,
    max_ci_pct: float,
    level: float = 0.95,
) -> ReferenceDecision:
    """Go on with a reference run, or stop (the collector asks this while the run is still executing).

    t_ns / power_mw: the "total" samples read so far (host clock ns, mW; raw, not delay-corrected: a decision,
    not a measurement); start_ns / now_ns: the run's start and now on the host clock; settle_ns: samples before
    start + settle_ns are not looked at (the probe's settling time). The run goes on until it is min_ns long,
    then for as long as its settled power is seen to cycle (block spread > MAX_BLOCK_SPREAD_PCT) and the
    whole-cycle mean (`limit_cycle`, the headline's own statistic) has fewer than MIN_CYCLES_FOR_CI cycles or a
    CI wider than +-max_ci_pct %, or, where it does not cycle, for as long as it still drifts over the last half
    (`drift`: by more than max_ci_pct / 2 plus two standard errors; the die warming) or its block spread is near the
    limit (`NEAR_LIMIT_FRAC`) and the run is shorter than min_ns + `NEAR_LIMIT_NS`, up to max_ns. A limiter that only
    starts later than the run's end is not seen (make reference_ms longer)."""
    elapsed = int(now_ns - start_ns)
    if elapsed < min_ns:
        return ReferenceDecision(True, "min_length", elapsed)
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    keep = (t >= start_ns + settle_ns) & (t <= now_ns)
    t, p = t[keep], p[keep]
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    stop = elapsed >= max_ns
    spread = block_spread_pct(t, p)
    if spread is None:
        return ReferenceDecision(not stop, "max_length" if stop else "too_short_to_tell", elapsed)
    if spread <= MAX_BLOCK_SPREAD_PCT:
        d = drift(t, p, level)
        if d is not None and d.drifting(max_ci_pct / 2.0):  # still warming (or cooling): not yet sustained
            return ReferenceDecision(not stop, "max_length" if stop else "drifting", elapsed, 0, None)
        if spread > NEAR_LIMIT_FRAC * MAX_BLOCK_SPREAD_PCT and elapsed < min_ns + NEAR_LIMIT_NS and not stop:
            return ReferenceDecision(True, "near_limit", elapsed)
        return ReferenceDecision(False, "steady", elapsed)
    lc = limit_cycle(t, p, level)
    if lc is None or lc.cycles < MIN_CYCLES_FOR_CI:
        cycles = lc.cycles if lc is not None else 0
        return ReferenceDecision(not stop, "max_length" if stop else "too_few_cycles", elapsed, cycles)
    ci = lc.mean_mw.half_width_pct
    if ci is not None and ci <= max_ci_pct:
        return ReferenceDecision(False, "ci_reached", elapsed, lc.cycles, ci)
    return ReferenceDecision(not stop, "max_length" if stop else "ci_too_wide", elapsed, lc.cycles, ci)
