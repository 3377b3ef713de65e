"""A check that needs no faster meter: the estimator's power from the SSP index on equals the method SSP.

The method SSP (`profiles`, `ssp_power_w`) is the mean of the centroid-aligned readings over the SSP tail of the
golden SSP runs. The sensor-model estimator (`fingrav.analysis.kernel_power.estimate_kernel_power`) sees the same
executions another way: it deconvolves every sample of those runs, from settled idle before each run through the
warm-ups to the sensor's memory after the run, into pieces of constant power, and reports the time-weighted level
of the executions at and after the SSP index (the tail and the trailing executions, which the plan adds to cover
the sensor's group delay and which run at the same steady level: with them the span is at least about half a
reading, so the estimator resolves it where the tail alone, on a sensor slower than the kernel, is a small share of
any reading). Both estimate what the steady executions draw; where they differ by more than their combined
uncertainty, one of them is wrong (a sensor model that does not describe the sensor, a tail still moving, a transient
the SSP's CI does not hold)
and flag `ssp_inconsistent` fires.

The comparison (`check`): d = estimator - SSP (mW); its 95 % interval combines the two CIs in quadrature, each
side with the half-width of the side facing the other (the two estimates share their data, so their errors are
positively correlated and the quadrature sum over-states the difference's spread: the check errs on the side of
passing). It passes when 0 lies in that interval or |d| is within `contracts.flags.CONSISTENCY_FLOOR_PCT` of the
SSP (the deconvolution's numerical resolution: on exact data both CIs shrink to nothing). Not tested where the
estimator does not resolve those executions
(`KernelPower.measurable` false: it says why). Powers mW, times ns.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from fingrav.analysis.kernel_power import estimate_kernel_power, window_samples
from fingrav.contracts.flags import CONSISTENCY_FLOOR_PCT
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import KernelPower
from fingrav.contracts.result import Estimate
from fingrav.contracts.roles import MAIN, SSE
from fingrav.contracts.sensor import SensorModel

logger = logging.getLogger(__name__)

#: the estimator's target name for the executions from the SSP index on (summary.json `kernel_power["ssp_steady"]`)
TARGET = "ssp_steady"
METHOD = "sensor-model estimate from the SSP index on vs the method SSP; CI: the two CIs in quadrature"


def steady_samples(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    runs: pl.DataFrame,
    plan: Plan,
    sensor: SensorModel,
    delay_ns: int,
) -> pl.DataFrame:
    """The samples of the golden SSP runs the estimator fits for the executions from the SSP index on, in
    `kernel_power.target_samples`' frame: run, t_ns (delay-corrected), power_mw, run_start_ns (the run's first
    execution), t_start_ns (the start
    of execution ssp_index), t_end_ns (the end of the run's last execution), sse_run (false); from settled idle
    before each run (at most IDLE_PERIODS sensor periods) to window + 4 x lag after the run."""
    gold = host_execs.filter(pl.col("golden"))
    if "phase" in gold.columns:
        gold = gold.filter(pl.col("phase") != SSE)
    starts = gold.group_by("run").agg(
        run_start_ns=pl.col("exec_start_ns").min(),
        main_start_ns=pl.col("exec_start_ns").filter(pl.col("segment") == MAIN).min(),
    )
    main = gold.filter(pl.col("segment") == MAIN)
    first = main.filter(pl.col("exec_index") == plan.ssp_index).select("run", t_start_ns="exec_start_ns")
    last = (  # the run's last execution: the trailing ones run at the SSP level too and make the span resolvable
        main.filter(pl.col("exec_index") >= plan.ssp_index)
        .sort("exec_index")
        .group_by("run")
        .agg(t_end_ns=pl.col("cycle_end_ns").last())
    )
    tgt = first.join(last, on="run").with_columns(  # the executions before the SSP index are its warm-ups
        sse_run=pl.lit(False),
        target_index=pl.lit(plan.ssp_index, pl.Int32),
        warm_gap=pl.lit(0.0),
        base_run=pl.lit(False),
    )
    cast = pl.col("run").cast(pl.Int32)
    return window_samples(samples, tgt.with_columns(cast), starts.with_columns(cast), runs, sensor, delay_ns)


def steady_kernel_power(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    runs: pl.DataFrame,
    plan: Plan,
    sensor: SensorModel,
    delay_ns: int,
    run_ids: np.ndarray,
    counts: np.ndarray,
    level: float,
    min_seen: float,
) -> KernelPower:
    """The estimator's power (mW) of the executions from the SSP index on (module docstring), target `TARGET`; no
    CI limit (the check carries its width: a wide estimate passes only because it says little, and the summary shows
    how wide)."""
    frame = steady_samples(samples, host_execs, runs, plan, sensor, delay_ns)
    return estimate_kernel_power(frame, sensor, run_ids, counts, level, TARGET, math.inf, min_seen=min_seen)


@dataclass(frozen=True)
class Consistency:
    """The check's outcome: `tested` (the estimator resolved them), `passed` (None when not tested), the
    difference estimator vs SSP in % of the SSP with its combined CI (`vs_ssp`), and why not tested."""

    tested: bool
    passed: bool | None
    vs_ssp: Estimate
    reason: str | None = None


def check(estimator: KernelPower, ssp: Estimate) -> Consistency:
    """Whether the estimator's power from the SSP index on equals the method SSP (both mW) within their combined CI
    (module docstring); the difference in % of the SSP."""
    none = Estimate(unit="%", method=METHOD)
    p = estimator.power
    if not estimator.measurable or p.value is None:
        return Consistency(
            False, None, none, estimator.reason or "the estimator did not resolve the executions from the SSP index on"
        )
    if ssp.value is None or ssp.ci_low is None or ssp.ci_high is None or not ssp.value:
        return Consistency(False, None, none, "the method SSP has no CI")
    if p.ci_low is None or p.ci_high is None:
        return Consistency(False, None, none, "the estimate has no CI")
    d = float(p.value) - float(ssp.value)
    below = math.hypot(float(p.value) - float(p.ci_low), float(ssp.ci_high) - float(ssp.value))
    above = math.hypot(float(p.ci_high) - float(p.value), float(ssp.value) - float(ssp.ci_low))
    lo, hi = d - below, d + above
    scale = 100.0 / float(ssp.value)
    vs = Estimate.of(d * scale, lo * scale, hi * scale, "%", METHOD)
    passed = lo <= 0.0 <= hi or abs(d * scale) <= CONSISTENCY_FLOOR_PCT
    if not passed:
        logger.info("SSP self-consistency fails: estimator vs SSP %s", vs)
    return Consistency(True, passed, vs)
