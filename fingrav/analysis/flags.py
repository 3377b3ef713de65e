"""Which quality flags fire for a profile, and the row's `valid` (the flags, their meanings and thresholds:
`fingrav.contracts.flags`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from fingrav.contracts import flags as F
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.flags import (
    GAP_FACTOR,
    KS_CRITICAL,
    MAX_BLOCK_SPREAD_PCT,
    MAX_SSP_VS_REFERENCE_PCT,
    METHOD_MINIMUM_NS,
    MIN_GOLDEN_FRACTION,
    MIN_PHASE_RUNS,
)
from fingrav.contracts.plan import Probe
from fingrav.contracts.roles import MEASURE_PHASES, TOTAL
from fingrav.contracts.sensor import SensorModel

logger = logging.getLogger(__name__)

FLAG_ORDER = F.ORDER
INVALIDATING = F.INVALIDATING


def sample_phase_ks(
    samples: pl.DataFrame, runs: pl.DataFrame, period_ns: float | None = None
) -> tuple[float | None, int]:
    """(KS statistic D, n): is the wait from each measure run's start (runs.host_start_ns) to the first "total"
    sample (raw sample clock) what a sampling grid independent of the runs gives?

    For a sampler with jittered intervals T, the wait from a random instant to the next sample follows the
    forward-recurrence law F0(x) = E[min(T, x)] / E[T] (uniform on [0, period) only without jitter); F0 is
    taken from the observed intervals (gaps > 3x the median left out). Runs whose first sample comes after
    a gap are left out. `period_ns` is unused (kept for callers); (None, n) when n < 2."""
    starts = runs.filter(pl.col("phase").is_in(list(MEASURE_PHASES)))["host_start_ns"].drop_nulls().to_numpy()
    t = samples.lazy().filter(pl.col("channel") == TOTAL).select("t_ns").collect()["t_ns"].sort().to_numpy()
    if starts.size < 2 or t.size < 3:
        return None, int(starts.size)
    iv = np.diff(t).astype(np.float64)
    iv = np.sort(iv[(iv > 0) & (iv <= 3.0 * float(np.median(iv)))])
    if iv.size < 2:
        return None, int(starts.size)
    i = np.searchsorted(t, starts)
    ok = i < t.size
    wait = np.sort((t[i[ok]] - starts[ok]).astype(np.float64))
    wait = wait[wait <= iv[-1]]
    n = int(wait.size)
    if n < 2:
        return None, n
    # E[min(T, x)] = (sum of T_j < x + x * #(T_j >= x)) / m
    csum = np.concatenate(([0.0], np.cumsum(iv)))
    k = np.searchsorted(iv, wait)
    f0 = (csum[k] + wait * (iv.size - k)) / iv.size / float(iv.mean())
    r = np.arange(1, n + 1)
    d = float(max(np.max(r / n - f0), np.max(f0 - (r - 1) / n)))
    return d, n


def run_spans(host_execs: pl.DataFrame, golden_only: bool = True) -> pl.DataFrame:
    """Host-clock span [start_ns, end_ns) of the executions of each (golden) run, sorted by start."""
    ex = host_execs.filter(pl.col("golden")) if golden_only else host_execs
    return (
        ex.group_by("run")
        .agg(start_ns=pl.col("exec_start_ns").min(), end_ns=pl.col("exec_end_ns").max())
        .sort("start_ns")
    )


def detect_gaps(samples: pl.DataFrame, channel: str = TOTAL, factor: float = GAP_FACTOR) -> np.ndarray:
    """Gaps in one channel's sample stream: (k, 2) int64 [from_ns, to_ns] (raw sample clock) where
    consecutive samples are more than `factor` x the median interval apart."""
    t = samples.lazy().filter(pl.col("channel") == channel).select("t_ns").collect()["t_ns"]
    if not t.is_sorted():
        t = t.sort()
    if t.len() < 3:
        return np.zeros((0, 2), np.int64)
    arr = t.to_numpy()
    d = np.diff(arr)
    med = float(np.median(d))
    if med <= 0:
        return np.zeros((0, 2), np.int64)
    idx = np.flatnonzero(d > factor * med)
    return np.stack([arr[idx], arr[idx + 1]], axis=1).astype(np.int64)


def gaps_in_spans(gaps: np.ndarray, spans: pl.DataFrame) -> int:
    """How many gaps [from, to] overlap any span [start_ns, end_ns) (spans non-overlapping, sorted)."""
    if gaps.size == 0 or spans.height == 0:
        return 0
    starts = spans["start_ns"].to_numpy()
    ends = spans["end_ns"].to_numpy()
    k = np.searchsorted(starts, gaps[:, 1], side="left") - 1
    ok = k >= 0
    hit = np.zeros(len(gaps), bool)
    hit[ok] = ends[k[ok]] > gaps[ok, 0]
    return int(hit.sum())


@dataclass(frozen=True)
class FlagInputs:
    """What the flags look at. Times in ns; `sensor`: the total channel's. runs_total /
    runs_golden: SSP runs; sse_runs_total / sse_runs_golden: SSE runs (0: none);
    reference_unsettled: the reference run has too few samples after settling."""

    ssp_lois: int
    sse_lois: int
    exec_time_ns: float | None
    sensor: SensorModel
    clock: ClockMap
    probe: Probe | None
    runs_total: int
    runs_golden: int
    gaps_in_golden_runs: int
    min_lois: int
    max_drift_ppm: float
    max_clock_residual_us: float
    sse_runs_total: int = 0
    sse_runs_golden: int = 0
    reference_unsettled: bool = False
    reference_block_spread_pct: float | None = None
    ssp_ci_mw: tuple[float | None, float | None] = (None, None)
    reference_ci_mw: tuple[float | None, float | None] = (None, None)
    ssp_vs_reference_pct: float | None = None
    sample_phase_ks: tuple[float | None, int] = (None, 0)
    samples_rejected: int = 0
    tail_unsettled: bool = False  # the SSP tail still trends beyond its CI (fingrav.analysis.settling)
    sse_skipped: bool = False  # the plan skipped the SSE runs (plan.sse_decision.skipped)
    max_ci_pct: float = float("inf")  # analysis.max_ci_pct
    ssp_mw: float | None = None  # the headline SSP (sustained where there is a reference run)
    headline_ci_mw: tuple[float | None, float | None] | None = None  # its CI; None: ssp_ci_mw
    energy_mj: tuple[float | None, float | None, float | None] = (None, None, None)  # value, CI low, CI high
    headline_source: str | None = None  # `contracts.summary.SSP_SOURCES`; "burst" fires burst_only
    reference_drifting: bool = False  # the reference run's power still drifts over its last half (warming)
    method_ssp_mw: float | None = None  # the method SSP (short stamped runs after idle); its CI is ssp_ci_mw
    method_ssp_energy_mj: tuple[float | None, float | None, float | None] = (None, None, None)  # its energy
    ssp_consistent: bool | None = None  # the SSP self-consistency check (`analysis.consistency`); None: not tested


# with a sustained headline these concern the burst SSP (burst_power_w) alone: they fire as their burst_* flags
BURST_ONLY_FLAGS = {"too_few_lois": "burst_too_few_lois", "unsettled": "burst_unsettled"}
SUSTAINED_SOURCES = frozenset({"sustained", "sustained_stamped"})


def _disjoint(a: tuple[float | None, float | None], b: tuple[float | None, float | None]) -> bool:
    if None in a or None in b:
        return True
    return a[1] < b[0] or b[1] < a[0]


def _half_width_pct(value: float | None, ci: tuple[float | None, ...]) -> float:
    """Half the CI's width in % of the value (0 without a value: too_few_lois covers that; inf without a CI)."""
    if value is None or value == 0:
        return 0.0
    lo, hi = ci
    if lo is None or hi is None:
        return float("inf")
    return 0.5 * (hi - lo) / abs(value) * 100.0


def _data_flags(inp: FlagInputs) -> set[str]:
    """Flags of the data: LOIs, the kernel against the sensor window and the method minimum, sample gaps, the
    clock, settling, golden runs."""
    fired: set[str] = set()
    if inp.ssp_lois < inp.min_lois:
        fired.add("too_few_lois")
    if inp.sse_lois < inp.min_lois:
        fired.add("too_few_lois_sse")
    if inp.sse_skipped:
        fired.add("sse_skipped")
    if inp.exec_time_ns is not None:
        window = inp.sensor.window_ns
        if window is not None and inp.exec_time_ns < float(window) + float(inp.sensor.lag_ns or 0.0):
            fired.add("kernel_shorter_than_window")
        if inp.exec_time_ns < METHOD_MINIMUM_NS:
            fired.add("below_method_minimum")
    if inp.gaps_in_golden_runs > 0:
        fired.add("sample_gaps")
    if abs(inp.clock.drift_ppm) > inp.max_drift_ppm:
        fired.add("clock_drift")
    if inp.clock.residual_ns == inp.clock.residual_ns and inp.clock.residual_ns > inp.max_clock_residual_us * 1e3:
        fired.add("clock_residual")
    if (inp.probe is not None and not inp.probe.settled) or inp.tail_unsettled:
        fired.add("unsettled")
    if inp.ssp_consistent is False:
        fired.add("ssp_inconsistent")
    if inp.runs_total == 0 or inp.runs_golden / inp.runs_total < MIN_GOLDEN_FRACTION:
        fired.add("low_golden_fraction")
    if inp.sse_runs_total and inp.sse_runs_golden / inp.sse_runs_total < MIN_GOLDEN_FRACTION:
        fired.add("low_golden_fraction")
    return fired


def _reference_flags(inp: FlagInputs) -> set[str]:
    """Flags of the reference run: unsettled, none (burst only), drifting, power limit cycling, and the SSP
    against it (under a burst headline)."""
    fired: set[str] = set()
    if inp.reference_unsettled:
        fired.add("reference_unsettled")
    if inp.headline_source == "burst":
        fired.add("burst_only")
    if inp.reference_drifting:
        fired.add("reference_drifting")
    if inp.reference_block_spread_pct is not None and inp.reference_block_spread_pct > MAX_BLOCK_SPREAD_PCT:
        fired.add("power_limit_cycling")
    if (  # under a sustained headline the headline is the reference: ssp_vs_power_pct says how far the SSP is
        inp.headline_source not in SUSTAINED_SOURCES
        and inp.ssp_vs_reference_pct is not None
        and abs(inp.ssp_vs_reference_pct) > MAX_SSP_VS_REFERENCE_PCT
        and _disjoint(inp.ssp_ci_mw, inp.reference_ci_mw)
    ):
        fired.add("ssp_reference_mismatch")
    return fired


def _precision_flags(inp: FlagInputs) -> set[str]:
    """Flags of how the numbers were read: sample phase, the headline's and the energy's CI, rejected samples."""
    fired: set[str] = set()
    d, n = inp.sample_phase_ks
    if d is not None and n >= MIN_PHASE_RUNS and d > KS_CRITICAL / np.sqrt(n):
        fired.add("sample_phase_nonuniform")
    if (
        _half_width_pct(inp.ssp_mw, inp.headline_ci_mw if inp.headline_ci_mw is not None else inp.ssp_ci_mw)
        > inp.max_ci_pct
        or _half_width_pct(inp.energy_mj[0], inp.energy_mj[1:]) > inp.max_ci_pct
    ):
        fired.add("imprecise")
    if inp.samples_rejected > 0:
        fired.add("nonphysical_samples")
    return fired


def compute_flags(inp: FlagInputs) -> tuple[list[str], bool]:
    """(flags in FLAG_ORDER, valid): the data's, the reference run's and the precision flags; under a sustained
    headline the SSP-only flags become their burst counterparts."""
    fired = _data_flags(inp) | _reference_flags(inp) | _precision_flags(inp)
    if inp.headline_source in SUSTAINED_SOURCES:  # the headline rests on the reference run, not on the SSP LOIs
        for ssp_flag, burst_flag in BURST_ONLY_FLAGS.items():
            if ssp_flag in fired:
                fired = (fired - {ssp_flag}) | {burst_flag}
    flags = [f for f in FLAG_ORDER if f in fired]
    valid = not (fired & INVALIDATING)
    if flags:
        logger.info("flags: %s (valid=%s)", ";".join(flags), valid)
    return flags, valid


#: flags that make the method SSP itself invalid (`ssp_invalidating`); the data flags apply to every number
SSP_DATA_FLAGS = ("sample_gaps", "clock_residual")


def ssp_invalidating(inp: FlagInputs, flags: Sequence[str]) -> list[str]:
    """The invalidating flags of the method SSP alone (summary `ssp_valid` is true without any): too few SSP LOIs,
    the probe or the SSP tail not settled, the SSP's or its energy's CI wider than ±max_ci_pct, and the data flags
    (`SSP_DATA_FLAGS`) that fired, in the registry's order (`ssp_inconsistent` is a note: see its meaning)."""
    fired = {f for f in SSP_DATA_FLAGS if f in flags}
    if inp.ssp_lois < inp.min_lois:
        fired.add("too_few_lois")
    if (inp.probe is not None and not inp.probe.settled) or inp.tail_unsettled:
        fired.add("unsettled")
    if (
        _half_width_pct(inp.method_ssp_mw, inp.ssp_ci_mw) > inp.max_ci_pct
        or _half_width_pct(inp.method_ssp_energy_mj[0], inp.method_ssp_energy_mj[1:]) > inp.max_ci_pct
    ):
        fired.add("imprecise")
    return [f for f in FLAG_ORDER if f in fired]


def count_gaps(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    known_gaps: Sequence[Sequence[int]] = (),
    delay_ns: int = 0,
) -> dict[str, int]:
    """Known (metadata) and detected sample gaps that overlap golden runs' execution spans.

    Gaps are on the raw sample clock; they are shifted by -delay_ns like the samples."""
    spans = run_spans(host_execs)
    known = np.asarray(known_gaps, dtype=np.int64).reshape(-1, 2) - delay_ns
    detected = detect_gaps(samples) - delay_ns
    return {
        "known": int(len(known)),
        "detected": int(len(detected)),
        "known_in_golden_runs": gaps_in_spans(known, spans),
        "detected_in_golden_runs": gaps_in_spans(detected, spans),
    }
