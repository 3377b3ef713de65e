"""When the SSP runs may stop: the LOI count and the statistical CI of the method SSP reach their targets.

GPU-side module (numpy + stdlib): the collector asks `ssp_stop_decision` between SSP runs (the runs stop once it
says so, at most run_policy.max_runs of them); the analysis asks it again on the golden runs it kept and records both
answers (`fingrav.analysis.differentiate`), as it does for the adaptive reference run
(`fingrav.analysis.sustained.reference_decision`).

The statistic is the method SSP's own (`fingrav.analysis.profiles`): the pooled mean of the SSP LOIs (mW) over the
SSP runs, a ratio of per-run sums to per-run counts, with a CI over runs (the runs are the independent units; the
LOIs of one run are not). The analysis draws that CI by a cluster bootstrap over runs widened by
`fingrav.analysis.profiles.small_sample_factor`; here it is the same interval in closed form, the linearized
(delta-method) standard error of the ratio with the bootstrap's small-sample widening:
half = t(level, k - 1) x sqrt(k / (k - 1) x sum_i (s_i - m n_i)^2) / sum_i n_i for k runs with LOI sums s_i and
counts n_i, m = sum s / sum n. This is the statistical part of the SSP's CI, the part more runs shrink; systematic
terms the analysis adds on top (the lag bound, a trend of the tail) are not counted, so the CI target
(run_policy.ssp_ci_pct) sits below the validity limit (analysis.max_ci_pct).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from fingrav.analysis.tdist import ratio_t_half_width

#: SSP runs before any stop: a CI over fewer clusters is too unsure of its own width to stop on
MIN_RUNS = 8

#: why the SSP runs stopped or went on (`ssp_stop_decision`; plan.json `ssp_stop`)
SSP_STOP_REASONS = {
    "too_few_runs": f"fewer than {MIN_RUNS} SSP runs: going on",
    "too_few_lois": "fewer SSP LOIs than run_policy.min_lois: going on",
    "ci_too_wide": "the method SSP's statistical CI is wider than run_policy.ssp_ci_pct: going on",
    "ci_reached": "run_policy.min_lois LOIs and the method SSP's statistical CI within run_policy.ssp_ci_pct: stopped",
    "max_runs": "the run budget (run_policy.max_runs) reached: stopped",
}


@dataclass(frozen=True)
class SSPStopDecision:
    """Whether the SSP runs go on (`reason`: a key of `SSP_STOP_REASONS`), and what they had: SSP `runs`, LOIs,
    the pooled mean (mW, None without LOIs) and its statistical CI half-width in % (None with fewer than 2 runs
    with LOIs)."""

    extend: bool
    reason: str
    runs: int
    lois: int
    mean_mw: float | None = None
    ci_pct: float | None = None

    def to_dict(self) -> dict[str, object]:
        """The decision as plan.json's `ssp_stop` (`fingrav.contracts.plan.SSPStop`)."""
        return dataclasses.asdict(self)


def ssp_ci_pct(run_sum_mw: np.ndarray, run_lois: np.ndarray, level: float = 0.95) -> tuple[float | None, float | None]:
    """(pooled mean mW, statistical CI half-width %) of the SSP LOIs of runs with LOI sums `run_sum_mw` (mW) and
    counts `run_lois` (module docstring); runs without LOIs count as runs; (None, None) without LOIs, (mean, None)
    with fewer than 2 runs."""
    m, half = ratio_t_half_width(np.asarray(run_sum_mw, dtype=np.float64), np.asarray(run_lois), level)
    if m is None or half is None or m == 0:
        return m, None
    return m, abs(half / m) * 100.0


def ssp_stop_decision(
    run_sum_mw: np.ndarray,
    run_lois: np.ndarray,
    min_lois: int,
    max_ci_pct: float,
    max_runs: int,
    level: float = 0.95,
) -> SSPStopDecision:
    """Go on with the SSP runs, or stop. run_sum_mw / run_lois: per SSP run so far, the sum (mW) and count of its
    SSP LOIs. Stops once there are at least MIN_RUNS runs, at least `min_lois` LOIs and the statistical CI
    (`ssp_ci_pct`) is within +- `max_ci_pct` %, or at `max_runs` runs whatever they gave."""
    runs = int(np.asarray(run_lois).size)
    lois = int(np.asarray(run_lois, dtype=np.int64).sum())
    mean, ci = ssp_ci_pct(run_sum_mw, run_lois, level)
    if runs < MIN_RUNS:
        reason = "too_few_runs"
    elif lois < min_lois:
        reason = "too_few_lois"
    elif ci is None or ci > max_ci_pct:
        reason = "ci_too_wide"
    else:
        return SSPStopDecision(False, "ci_reached", runs, lois, mean, ci)
    if runs >= max_runs:
        return SSPStopDecision(False, "max_runs", runs, lois, mean, ci)
    return SSPStopDecision(True, reason, runs, lois, mean, ci)
