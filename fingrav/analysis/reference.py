"""The reference run: the main kernel alone, back to back for >= 2 s (phase "reference").

Its settled steady-state power is an independent check of the SSP power (the SSP tail of the measure
runs is short; the reference run is long), and its energy-counter reading cross-checks the power
samples.

- Busy start / end: the first execution's start / the last execution's end, mapped to the host clock.
  executions.parquet stores only the first and the last execution of the reference run (exec_index 0
  and reference_executions - 1), which is all this needs.
- reference power = mean of the delay-corrected "total" samples in [busy start + t_stable, busy end],
  t_stable = plan["probe"]["t_stable_ns"] (the stability probe's settling time), else the planned
  sensor's settle_ns. The samples are autocorrelated (the sensor averages over a window and lags), so
  the CI is not an independent bootstrap of samples but a batch-means t-interval: the settled samples
  split into BATCHES contiguous batches, mean ± t(level, BATCHES - 1) x sd(batch means) / sqrt(BATCHES).
  Fewer than MIN_SETTLED_REFERENCE_SAMPLES settled samples: flag `reference_unsettled`, no CI.
- energy power = (energy_end_mj - energy_start_mj) / host duration of the whole run, the run from its
  host_start_ns (clock read right before the launch; the counter is read just before it) to busy end.
  It includes the initial transient (power ramping up, boost, throttling), so it may differ from the
  settled power; it is a cross-check, not the reference value.
  Its CI (`counter_power`): bounds of what the counter cannot resolve: its resolution (each of the two readings
  is floored to one step), its update period (each reading is up to one period old) and the read-to-stamp gaps
  (the first reading precedes the span's start by the read guard + the run's random delay + the GPU clock read),
  the energy of a period or a gap at most the highest sample power before the span (the first reading) or in it
  (the last); the span's two ends are stamps with the clock map's residual. Not in the bounds: the time from the
  last execution's end to the second reading (the device synchronizes, then reads; not recorded). The resolution
  and update period: `fingrav.backends.EnergyCounter` of the recorded
  backend, overridden by the recorded device description where it has its own (`energy_counter_of`). These
  are worst-case bounds of deterministic errors (coverage >= the level, not a statistical interval).
- samples power = the trapezoid integral of the delay-corrected samples over the same whole-run span / the span,
  its CI the batch-means interval of the samples in the span, relative, around it (`samples_power`).
- counter vs samples = (counter energy - samples integral) / samples integral x 100, its CI by interval
  arithmetic of the two (`fingrav.contracts.result.Estimate.vs`).

Units: ns, mW, mJ in frames and in the returned dict (`*_ns`, `*_mw`, `*_mj`), % for `*_pct`.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis.energy import trapezoid_energy_mj
from fingrav.analysis.sustained import BATCHES, batch_means_ci, block_spread_pct, drift, limit_cycle
from fingrav.backends import BACKENDS, EnergyCounter
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.flags import BLOCK_NS, MIN_SETTLED_REFERENCE_SAMPLES
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import EarlyPower, ReferenceStats
from fingrav.contracts.result import Estimate, finite
from fingrav.contracts.roles import MAIN, REFERENCE, TOTAL
from fingrav.contracts.tables import READ_GUARD_NS
from fingrav.contracts.units import MJ_PER_MW_NS, NS_PER_MS

logger = logging.getLogger(__name__)

SAMPLE_MARGIN_NS = 1_000_000_000  # samples read around the run (for interpolation at its ends)
EARLY_WINDOW_NS = 100_000_000  # the early (pre-clamp) window of the reference run: >= 100 ms ...
EARLY_PERIODS = 15  # ... and >= 15 sensor periods
EARLY_MIN_SAMPLES = 6
DRIFT_TOL_PCT = 0.35  # a reference run without a stopping target (older plans) drifts beyond +-this over its last half


def energy_counter_of(plan: Plan) -> EnergyCounter | None:
    """The energy counter of the device that collected `plan` (`fingrav.backends.EnergyCounter`): its backend's
    entry, with the recorded device description's own numbers where it has them (the simulator's
    parameters.energy_counter, amdsmi's power.counter_resolution_uj); None for an unknown backend."""
    device = plan.provenance.device
    entry = BACKENDS.get(str(device.backend)) if device is not None else None
    if device is None or entry is None or entry.energy_counter is None:
        return None
    spec = entry.energy_counter
    sim = (device.parameters or {}).get("energy_counter") or {}
    res_mj = finite(sim.get("resolution_mj"))
    period_ms = finite(sim.get("period_ms"))
    power = (device.model_extra or {}).get("power")  # amdsmi's power record, as the backend wrote it
    res_uj = finite(power.get("counter_resolution_uj")) if isinstance(power, dict) else None
    if res_mj is None and res_uj is not None:
        res_mj = res_uj / 1e3
    if res_mj is None and period_ms is None:
        return spec
    return EnergyCounter(
        res_mj if res_mj is not None else spec.resolution_mj,
        period_ms * NS_PER_MS if period_ms is not None else spec.update_ns,
        f"{spec.source}; recorded device description",
    )


def counter_power(
    counter_mj: float | None,
    span_ns: int,
    p_max_mw: float | None,
    lead_ns: float,
    counter: EnergyCounter | None,
    stamp_ns: float = 0.0,
    p_before_mw: float | None = None,
) -> Estimate:
    """The energy counter's power over the span (mW) = counter_mj / span, with bounds of what the counter cannot
    resolve (module docstring): +-resolution_mj; the first reading up to `lead_ns` before the span and up to
    update_ns old (the energy of lead + update_ns before the span, at most p_before_mw x (lead_ns + update_ns),
    may be in the counter: lower end only); the last reading up to update_ns old (up to p_max_mw x update_ns of
    the span missing: upper end only); each end of the span +- `stamp_ns`. p_max_mw: the span's highest sample
    power; p_before_mw: the highest before the span (default p_max_mw). No CI without the counter's description
    or p_max_mw."""
    if counter_mj is None or span_ns <= 0:
        return Estimate(unit="mW", method="energy counter / span")
    value = counter_mj / span_ns * 1e9  # mJ / ns -> mW
    if counter is None or p_max_mw is None:
        return Estimate.of(value, unit="mW", method="energy counter / span; counter not described: no CI")
    before = p_max_mw if p_before_mw is None else p_before_mw
    early_mj = before * (max(lead_ns, 0.0) + counter.update_ns) * MJ_PER_MW_NS
    late_mj = p_max_mw * counter.update_ns * MJ_PER_MW_NS
    lo_mj = counter_mj - counter.resolution_mj - early_mj
    hi_mj = counter_mj + counter.resolution_mj + late_mj
    stamp = max(stamp_ns, 0.0)
    lo = max(lo_mj, 0.0) / (span_ns + 2 * stamp) * 1e9
    hi = hi_mj / (span_ns - 2 * stamp) * 1e9 if span_ns > 2 * stamp else None
    method = (
        f"energy counter / span; bounds: resolution {counter.resolution_mj:.4g} mJ, update "
        f"{counter.update_ns / NS_PER_MS:.4g} ms, lead {lead_ns / NS_PER_MS:.4g} ms, stamps +-{stamp:.3g} ns"
    )
    return Estimate.of(value, lo, hi, "mW", method)


def samples_power(
    t_ns: np.ndarray, power_mw: np.ndarray, start_ns: int, end_ns: int, samples_mj: float | None, level: float
) -> Estimate:
    """The samples' power over [start_ns, end_ns] (mW) = their trapezoid integral `samples_mj` / the span, with the
    batch-means CI of the samples in the span, relative, around it (the samples are autocorrelated)."""
    span = end_ns - start_ns
    if samples_mj is None or span <= 0:
        return Estimate(unit="mW", method="samples integral / span")
    value = samples_mj / span * 1e9
    inside = power_mw[(t_ns >= start_ns) & (t_ns <= end_ns)]
    mean, lo, hi = batch_means_ci(inside, level)
    if mean is None or lo is None or hi is None or mean <= 0:
        return Estimate.of(value, unit="mW", method="samples integral / span")
    return Estimate.of(
        value, value * lo / mean, value * hi / mean, "mW", "samples integral / span; batch-means CI, relative"
    )


def early_power(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    settled_ns: int,
    busy_end_ns: int,
    period_ns: float | None,
    first_clamp_ns: int | None,
    level: float = 0.95,
) -> EarlyPower | None:
    """The reference run's power right after it settles and before the limiter first clamps: the uninstrumented
    counterpart of the burst SSP (the SSP of the short stamped runs is read at the same time after idle), so that
    burst SSP vs this is what the stamps do to the power (`instrumentation_power_pct`).

    Window: from `settled_ns` (busy start + t_stable) for EARLY_WINDOW_NS or EARLY_PERIODS sensor periods, whichever
    is longer, cut at the first clamp (`first_clamp_ns`, limit cycle) and the run's end. Mean and batch-means CI of
    the delay-corrected samples in it (mW, ns; up to BATCHES batches of >= 3 samples); None with fewer than
    EARLY_MIN_SAMPLES samples in the window."""
    width = max(EARLY_WINDOW_NS, EARLY_PERIODS * (period_ns or 0.0))
    end = min(settled_ns + int(width), busy_end_ns, first_clamp_ns if first_clamp_ns is not None else busy_end_ns)
    inside = (t_ns >= settled_ns) & (t_ns <= end)
    n = int(inside.sum())
    if n < EARLY_MIN_SAMPLES:
        return None
    mean, lo, hi = batch_means_ci(power_mw[inside], level, min(BATCHES, n // 3))
    return EarlyPower(start_ns=int(settled_ns), end_ns=int(end), samples=n, power_mw=mean, ci_low_mw=lo,
                      ci_high_mw=hi)  # fmt: skip


def _settled(
    t: np.ndarray, p: np.ndarray, busy: _Busy, t_stable: int, plan: Plan, level: float, run: int
) -> dict[str, Any]:
    """Step 4: the settled samples (busy start + t_stable .. busy end): their mean with the batch-means CI (none
    when fewer than MIN_SETTLED_REFERENCE_SAMPLES: unsettled), the limit cycle, the block spread, the drift (no
    limit cycle), the early power (`early_power`)."""
    in_settled = (t >= busy.start_ns + t_stable) & (t <= busy.end_ns)
    settled = p[in_settled]
    mean, ci_lo, ci_hi = batch_means_ci(settled, level)
    period = float(np.median(np.diff(t[in_settled]))) if settled.size > 2 else None
    cycle = limit_cycle(t[in_settled], settled, level)  # the same call as the collector's `reference_decision`
    spread = block_spread_pct(t[in_settled], settled)
    unsettled = settled.size < MIN_SETTLED_REFERENCE_SAMPLES
    if unsettled:
        ci_lo = ci_hi = None
        logger.warning(
            "reference run %d: %d samples after settling (busy %.3g s, t_stable %.3g s): reference_unsettled",
            run,
            settled.size,
            (busy.end_ns - busy.start_ns) / 1e9,
            t_stable / 1e9,
        )
    dr = drift(t[in_settled], settled, level) if cycle is None else None
    drift_tol = plan.reference_ci_pct / 2.0 if plan.reference_ci_pct is not None else DRIFT_TOL_PCT
    early = early_power(t, p, busy.start_ns + t_stable, busy.end_ns, period, cycle.start_ns if cycle else None, level)
    return {
        "settled_samples": int(settled.size),
        "power_mw": mean,
        "ci_low_mw": ci_lo,
        "ci_high_mw": ci_hi,
        "unsettled": bool(unsettled),
        "block_spread_pct": spread,
        "limit_cycle": cycle,
        "early": early,
        "drift": dr,
        "drifting": bool(dr is not None and dr.drifting(drift_tol)),
    }


def _reference_run(runs: pl.DataFrame) -> dict[str, Any] | None:
    """Step 1: the reference run's row of runs.parquet (run, host_start_ns, energy_start_mj / energy_end_mj,
    delay_ns; absent columns None); the first when there are several; None without one."""

    def col(name: str, dtype: pl.DataType) -> pl.Expr:
        return pl.col(name).cast(dtype) if name in runs.columns else pl.lit(None, dtype=dtype).alias(name)

    ref_runs = (
        runs.select(
            pl.col("run").cast(pl.Int32),
            pl.col("phase").cast(pl.String),
            col("host_start_ns", pl.Int64()),
            col("energy_start_mj", pl.Float64()),
            col("energy_end_mj", pl.Float64()),
            col("delay_ns", pl.Int64()),
        )
        .filter(pl.col("phase") == REFERENCE)
        .sort("run")
    )
    if ref_runs.height == 0:
        return None
    if ref_runs.height > 1:
        logger.warning("%d reference runs; using the first (run %d)", ref_runs.height, ref_runs["run"][0])
    return ref_runs.row(0, named=True)


@dataclass(frozen=True)
class _Busy:
    """The reference run's executions on the host clock: first start, last end (ns), executions that ran."""

    start_ns: int
    end_ns: int
    executions: int


def _busy_span(executions: pl.DataFrame, run: int, plan: Plan, clock: ClockMap) -> _Busy | None:
    """Step 2: the busy span of the reference run's main executions (mapped to the host clock); None without
    executions. A count that differs from the plan's is logged."""
    ex = (
        executions.lazy()
        .filter((pl.col("run").cast(pl.Int32) == run) & (pl.col("segment").cast(pl.String) == MAIN))
        .select(
            pl.col("exec_index").cast(pl.Int64),
            clock.host_expr("gpu_start_ns").alias("start_ns"),
            clock.host_expr("gpu_end_ns").alias("end_ns"),
        )
        .sort("exec_index")
        .collect()
    )
    if ex.height == 0:
        logger.warning("reference run %d has no executions: no reference power", run)
        return None
    n_exec = int(ex["exec_index"][-1]) + 1
    planned = plan.reference_executions
    ran = plan.reference_executed if plan.reference_executed is not None else planned
    if ran and ran != n_exec:
        logger.warning("reference run %d: last exec_index %d, plan says %s executions ran", run, n_exec - 1, ran)
    return _Busy(int(ex["start_ns"][0]), int(ex["end_ns"][-1]), n_exec)


def _total_samples(samples: pl.DataFrame, delay_ns: int, lo_ns: int, hi_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Step 3: the delay-corrected total-channel samples in [lo_ns, hi_ns], in time order: (t_ns, power_mw)."""
    smp = (
        samples.lazy()
        .filter(pl.col("channel").cast(pl.String) == TOTAL)
        .select((pl.col("t_ns").cast(pl.Int64) - int(delay_ns)).alias("t_ns"), pl.col("power_mw").cast(pl.Float64))
        .filter(pl.col("t_ns").is_between(lo_ns, hi_ns))
        .sort("t_ns")
        .collect()
    )
    return smp["t_ns"].to_numpy(), smp["power_mw"].to_numpy()


def _counter_check(
    rrow: dict[str, Any],
    t: np.ndarray,
    p: np.ndarray,
    span_start: int,
    busy_end: int,
    plan: Plan,
    clock: ClockMap,
    level: float,
) -> dict[str, Any]:
    """Step 5: the energy counter over the whole run (mJ), its power with bounds (mW, `counter_power`), the
    samples' integral over the same span and its power (`samples_power`), counter vs samples (%)."""
    e0, e1 = finite(rrow["energy_start_mj"]), finite(rrow["energy_end_mj"])
    counter = e1 - e0 if e0 is not None and e1 is not None else None
    span = busy_end - span_start
    energy_power = counter / span * 1e9 if counter is not None and span > 0 else None  # mJ / ns -> mW
    samples_mj = trapezoid_energy_mj(t, p, span_start, busy_end)
    cross = (counter - samples_mj) / samples_mj * 100.0 if counter is not None and samples_mj else None
    in_span = (t >= span_start) & (t <= busy_end)
    p_max = float(p[in_span].max()) if in_span.any() else None
    lead = READ_GUARD_NS + float(rrow["delay_ns"] or 0)
    stamp = clock.residual_ns if math.isfinite(clock.residual_ns) else 0.0
    spec = energy_counter_of(plan)
    before = (t >= span_start - lead - (spec.update_ns if spec else 0.0)) & (t <= span_start)
    p_before = float(p[before].max()) if before.any() else None
    return {
        "energy_counter_mj": counter,
        "energy_power_mw": energy_power,
        "samples_energy_mj": samples_mj,
        "counter_vs_samples_pct": cross,
        "counter_power": counter_power(counter, span, p_max, lead, spec, stamp, p_before),
        "samples_power": samples_power(t, p, span_start, busy_end, samples_mj, level),
    }


def reference_stats(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    samples: pl.DataFrame,
    plan: Plan,
    clock: ClockMap,
    delay_ns: int = 0,
    level: float = 0.95,
) -> ReferenceStats | None:
    """Statistics of the reference run (module docstring); None when there is no reference run (or it
    has no executions): its row (`_reference_run`), busy span (`_busy_span`), samples (`_total_samples`), the
    settled statistics (`_settled`), the counter cross-check (`_counter_check`).

    delay_ns: the total channel's delay correction (subtracted from sample times).
    Returns the `ReferenceStats` (None where a number is not available)."""
    rrow = _reference_run(runs)
    if rrow is None:
        return None
    run = int(rrow["run"])
    busy = _busy_span(executions, run, plan, clock)
    if busy is None:
        return None
    t_stable, t_source = plan.settle_time_ns()
    host_start = rrow["host_start_ns"]
    span_start = int(host_start) if host_start is not None and host_start <= busy.start_ns else busy.start_ns
    lo_ns = min(span_start, busy.start_ns + t_stable) - SAMPLE_MARGIN_NS
    t, p = _total_samples(samples, delay_ns, lo_ns, busy.end_ns + SAMPLE_MARGIN_NS)
    settled = _settled(t, p, busy, t_stable, plan, level, run)
    counter = _counter_check(rrow, t, p, span_start, busy.end_ns, plan, clock, level)
    out = ReferenceStats(
        run=run,
        executions=busy.executions,
        executions_planned=int(plan.reference_executions) if plan.reference_executions is not None else None,
        busy_start_ns=busy.start_ns,
        busy_end_ns=busy.end_ns,
        busy_ns=busy.end_ns - busy.start_ns,
        t_stable_ns=t_stable,
        t_stable_source=t_source,
        ci_method=f"batch means: {BATCHES} contiguous batches, t-interval (df {BATCHES - 1})",
        block_ms=BLOCK_NS / 1e6,
        span_start_ns=span_start,
        span_end_ns=busy.end_ns,
        span_ns=busy.end_ns - span_start,
        unstamped=bool(plan.reference_unstamped),
        cycle_ns=(busy.end_ns - busy.start_ns) / busy.executions if busy.executions > 0 else None,
        note="energy_power_mw: the energy counter over the whole run (initial transient included) / its host "
        "duration; power_mw: the settled samples only",
        **settled,
        **counter,
    )
    logger.info(
        "reference run %d: %d executions, %.4g W settled (%d samples), counter %.4g W, counter vs samples %s %%",
        run,
        busy.executions,
        (out.power_mw or math.nan) / 1e3,
        out.settled_samples,
        (out.energy_power_mw or math.nan) / 1e3,
        f"{out.counter_vs_samples_pct:+.3g}" if out.counter_vs_samples_pct is not None else "n/a",
    )
    return out
