"""The collection plan: how many runs, executions per run and idle time, from METHOD.md's guidance
table, the measured sensor (calibration) and the stability probe.

GPU-side module (numpy + stdlib). All times in ns.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fingrav.analysis.ssp_stop import MIN_RUNS
from fingrav.collect.estimate import LIMITED_SSP_RUNS, NS_PER_S, DeviceTiming, limiter_bound, plan_cost, run_ns
from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.plan import Plan, Probe, SSEDecision, guidance
from fingrav.contracts.sensor import PlanSensor
from fingrav.contracts.units import NS_PER_MS

logger = logging.getLogger(__name__)

PROBE_Z = 3.0  # standard errors of the compared statistic allowed on top of the tolerance
#: after a long load (the probe read from the reference run) the idle settles this close to the idle before it, as a
#: fraction of the busy-to-idle swing, at most: the die is warmer (H200, results/h200-db3: 3-7 W above the idle
#: before 2-6 s at 340-740 W); further away it has not come back, and the idle before is the target again
WARM_IDLE_FRAC = 0.05
TAIL_PERIODS = 4  # the longest SSP tail, in sensor periods (the whole tail with an adaptive stop on a flat probe)


@dataclass(frozen=True)
class ProbeSamples:
    """The probe run's samples (ns, mW) sorted by time: idle before it (`before`), busy (`tb` ns after the busy
    start, `pb`) and after it (`ta` ns after the busy end, `pa`); `period` the sample spacing (ns)."""

    before: np.ndarray
    tb: np.ndarray
    pb: np.ndarray
    ta: np.ndarray
    pa: np.ndarray
    idle_level: float
    period: float

    @classmethod
    def split(
        cls,
        t_ns: np.ndarray,
        power_mw: np.ndarray,
        busy_start_ns: int,
        busy_end_ns: int,
        load_end_ns: int | None = None,
    ) -> ProbeSamples:
        """Split at the probe window [busy_start_ns, busy_end_ns]; the samples after `load_end_ns` (default: the
        window's end; later where the load goes on past the window) are the return to idle."""
        t = np.asarray(t_ns, dtype=np.int64)
        p = np.asarray(power_mw, dtype=np.float64)
        order = np.argsort(t)
        t, p = t[order], p[order]
        before = p[t < busy_start_ns]
        busy = (t >= busy_start_ns) & (t <= busy_end_ns)
        end = int(busy_end_ns) if load_end_ns is None else max(int(load_end_ns), int(busy_end_ns))
        after = t > end
        pb = p[busy]
        if len(pb) < 4:
            raise ValueError(f"stability probe has only {len(pb)} samples inside its busy time; make probe_ms longer")
        return cls(
            before=before,
            tb=t[busy] - busy_start_ns,
            pb=pb,
            ta=t[after] - end,
            pa=p[after],
            idle_level=float(np.median(before)) if len(before) else float(np.min(p)),
            period=float(np.median(np.diff(t))) if len(t) > 2 else 1.0,
        )


@dataclass(frozen=True)
class ProbeLevel:
    """The busy samples' final level (mW, the mean of the last quarter), the smoothing window `k` (samples), the
    per-sample noise `sd` and the standard error `se` of a smoothed value against the level (mW), and the
    allowance `allow` = tolerance `tol` + PROBE_Z x se (mW)."""

    level: float
    k: int
    q: int
    sd: float
    se: float
    tol: float
    allow: float

    @classmethod
    def of(cls, s: ProbeSamples, tol_pct: float, noise_mw: float, cycle_ns: int) -> ProbeLevel:
        pb = s.pb
        k = max(3, int(np.ceil(8 * cycle_ns / max(s.period, 1.0))))
        k = min(k, max(3, len(pb) // 4))
        q = len(pb) // 4
        tail_raw = pb[len(pb) - max(q, 2) :]
        level = float(np.mean(tail_raw))
        # per-sample noise from the data: first differences cancel slow changes (never below the calibration's)
        d = np.diff(pb)
        sd = max(float(np.median(np.abs(d - np.median(d)))) * 1.4826 / np.sqrt(2.0) if d.size else 0.0, noise_mw)
        se = sd * np.sqrt(1.0 / k + 1.0 / max(len(tail_raw), 1))
        tol = level * tol_pct / 100.0
        return cls(level, k, q, sd, se, tol, tol + PROBE_Z * se)


def _stable_from(s: ProbeSamples, lv: ProbeLevel) -> tuple[int | None, int]:
    """(index of the first smoothed busy sample after which at most 5 % stray outside the allowance, so that one
    noisy sample near the end does not void a settled run (None: none), its time in ns after the busy start)."""
    outside = np.abs(_moving_mean(s.pb, lv.k) - lv.level) > lv.allow
    frac_after = np.cumsum(outside[::-1])[::-1] / np.arange(len(outside), 0, -1)
    ok = (frac_after <= 0.05) & ~outside
    first_ok = int(np.argmax(ok)) if ok.any() else len(s.pb) - 1
    return (first_ok if ok.any() else None), int(s.tb[first_ok])


def _no_trend(s: ProbeSamples, lv: ProbeLevel) -> bool:
    """No linear trend over the busy samples' second half beyond the tolerance (slope test with its standard
    error)."""
    pb, tb = s.pb, s.tb
    half = slice(len(pb) // 2, len(pb))
    x = (tb[half] - tb[half].mean()).astype(np.float64)
    if x.size >= 4 and float(np.sum(x * x)) > 0:
        slope = float(np.sum(x * (pb[half] - pb[half].mean())) / np.sum(x * x))
        slope_se = lv.sd / float(np.sqrt(np.sum(x * x)))
        span = float(x.max() - x.min())
        return abs(slope) * span <= lv.tol + PROBE_Z * slope_se * span
    return True


def _idle_target(s: ProbeSamples, lv: ProbeLevel, warm: bool) -> tuple[float, int]:
    """(idle level mW the return to idle is judged against, samples it rests on): the idle before the probe, or,
    after a long load (`warm`), the level the watched idle settles at (the mean of its last quarter, >= 3 samples)
    where that is within WARM_IDLE_FRAC of the swing of the idle before (a warmer die idles a few W higher)."""
    if warm and len(s.pa) >= 4:
        last = s.pa[len(s.pa) - max(3, len(s.pa) // 4) :]
        final = float(np.mean(last))
        if abs(final - s.idle_level) <= WARM_IDLE_FRAC * abs(lv.level - s.idle_level):
            return final, len(last)
    return s.idle_level, len(s.before)


def _recover_time(s: ProbeSamples, lv: ProbeLevel, tol_pct: float, warm: bool = False) -> int:
    """ns after the busy end until the smoothed samples are back at the idle level (the last sample seen when
    they never are). The idle level is a median of the few samples before the probe (after a long load, `warm`:
    `_idle_target`): its own standard error (~1.25 sd / sqrt(n)) is allowed too, so a noisy idle level does not
    read as a device that never cools down."""
    ta, pa = s.ta, s.pa
    t_recover = int(ta[-1]) if len(ta) else 0
    if len(pa):
        idle_level, n_idle = _idle_target(s, lv, warm)
        idle_se = 1.2533 * lv.sd / np.sqrt(max(n_idle, 1))
        idle_tol = abs(lv.level - idle_level) * tol_pct / 100.0 + PROBE_Z * np.hypot(lv.se, idle_se)
        away = np.abs(_moving_mean(pa, lv.k) - idle_level) > idle_tol
        if away.any():
            last = int(np.nonzero(away)[0][-1])
            t_recover = int(ta[min(last + 1, len(ta) - 1)])
        else:
            t_recover = int(ta[0])
    return t_recover


def analyze_probe(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    busy_start_ns: int,
    busy_end_ns: int,
    executions: int,
    tol_pct: float,
    noise_mw: float = 0.0,
    cycle_ns: int = 0,
    load_end_ns: int | None = None,
) -> Probe:
    """Find when the sensor output of a long back-to-back run stops changing, and how long it takes to
    return to idle after the run (METHOD.md step 4: the execution count after which power is stable).

    load_end_ns: where the load goes on past the probe window [busy_start_ns, busy_end_ns] (the probe read from the
    reference run's start, `fingrav.collect.runner`), its end (host ns): the return to idle is timed from there,
    against the level the idle settles at when the warmer die idles a little higher (`_idle_target`).

    A fast sensor resolves the power shape inside each execution; the output is therefore smoothed with a
    moving mean over at least eight execution cycles (and >= 3 samples) before judging stability. The test
    is on that statistic: a smoothed value is at the final level when it is within `tol_pct` of it plus
    `PROBE_Z` standard errors of the comparison (the moving mean's and the final level's own, from the
    sample noise measured here: never the raw per-sample noise, which would let a noisy sensor call a
    ramp "stable"). Settled: the level is reached before the last quarter and the second half shows no
    linear trend beyond the tolerance (slope test with its standard error)."""
    s = ProbeSamples.split(t_ns, power_mw, busy_start_ns, busy_end_ns, load_end_ns)
    lv = ProbeLevel.of(s, tol_pct, noise_mw, cycle_ns)
    first_ok, t_stable = _stable_from(s, lv)
    settled = first_ok is not None and first_ok < len(s.pb) - max(2, lv.q) and _no_trend(s, lv)
    return Probe(
        busy_ns=int(busy_end_ns - busy_start_ns),
        executions=executions,
        idle_level_mw=s.idle_level,
        level_mw=lv.level,
        peak_mw=float(s.pb.max()),
        tol_mw=lv.allow,
        t_stable_ns=t_stable,
        t_recover_ns=_recover_time(s, lv, tol_pct, warm=load_end_ns is not None),
        settled=bool(settled),
        samples=int(len(s.pb)),
    )


def _moving_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Centered moving mean over k samples (edges padded with the edge value)."""
    if len(x) < k or k <= 1:
        return x.astype(np.float64, copy=True)
    left, right = (k - 1) // 2, k // 2
    xp = np.pad(x.astype(np.float64), (left, right), mode="edge")
    c = np.concatenate(([0.0], np.cumsum(xp)))
    return (c[k:] - c[:-k]) / k


@dataclass(frozen=True)
class RunCounts:
    """SSP runs (`runs`) and SSE runs (`sse_runs`, warm-ups + 1 executions each) of a plan."""

    runs: int
    sse_runs: int


def _base_runs(policy: Any, sse_runs: int, sse_index: int, notes: list[str]) -> int:
    """The base runs (run_policy.sse_base_runs) the plan measures: none where no SSE run is measured or there is no
    warm-up to measure without the SSE (a note says so)."""
    wanted = int(getattr(policy, "sse_base_runs", 0) or 0)
    if wanted and (sse_runs == 0 or sse_index == 0):
        notes.append(
            f"{wanted} base runs not measured: " + ("no SSE runs" if sse_runs == 0 else "no warm-ups (warmups: 0)")
        )
        return 0
    return wanted


@dataclass(frozen=True)
class RunShape:
    """The executions of an SSP run: the SSP starts at `ssp_index`, `tail` steady-state executions are profiled,
    `trailing` more are never profiled (executions_per_run = ssp_index + tail + trailing)."""

    ssp_index: int
    tail: int
    trailing: int

    @property
    def executions_per_run(self) -> int:
        return self.ssp_index + self.tail + self.trailing


def _ssp_index(cycle_ns: int, settle_ns: int, probe: Probe | None, warmups: int, notes: list[str]) -> int:
    """The SSP's execution: power must have stopped changing - the sensor's settling and the device's own
    transient (the probe's t_stable)."""
    need_ns = settle_ns
    if probe is not None:
        need_ns = max(need_ns, probe.t_stable_ns)
        if not probe.settled:
            notes.append("stability probe did not settle: SSP taken at the end of the probe length")
    return max(math.ceil(need_ns / max(cycle_ns, 1)), warmups + 2) - 1


def sse_decision(
    exec_time_ns: int,
    cycle_ns: int,
    sensor: PlanSensor,
    idle_ns: int,
    pred_busy_ns: float,
    policy: Any,
    ssp_runs: int = 0,
) -> SSEDecision:
    """What the SSE runs can resolve on this sensor, and whether to run them (run_policy.sse).

    A sample is an SSE LOI when it falls in the SSE execution: one per run at most, execution time / sample period
    per run on a slow sensor; the `ssp_runs` SSP runs give theirs too (their execution at the SSE index is one).
    min_lois LOIs need runs_for_min_lois runs; the budget is run_policy.sse_runs, else max_runs, plus the SSP runs.
    'auto' skips the SSE runs when fewer than sse_min_lois / 2 LOIs are expected within the budget (the
    analysis reports no SSE number below analysis.min_lois, the default sse_min_lois; half of it because the
    prediction errs low: sim-h200's cb-4k gets 25 where 16 are predicted); explicit run_policy.sse_runs are always
    run. 'never' always skips them, 'always' never does. The cost is per run (idle, guard, mean delay, warm-ups +
    the SSE execution, `pred_busy_ns` of predecessor executions)."""
    lois_per_run = min(1.0, exec_time_ns / max(sensor.period_ns, 1))
    runs_for = math.ceil(policy.min_lois / max(lois_per_run, 1e-9))
    budget = int(policy.sse_runs) if policy.sse_runs is not None else int(policy.max_runs)
    expected = (budget + int(ssp_runs)) * lois_per_run
    floor = int(policy.sse_min_lois) if policy.sse_min_lois is not None else int(policy.min_lois)
    per_run_s = run_ns(idle_ns, pred_busy_ns + (policy.warmups + 1) * cycle_ns, sensor.period_ns) / NS_PER_S
    skipped = None
    if policy.sse == "never":
        skipped = "run_policy.sse is 'never'"
    elif policy.sse == "auto" and policy.sse_runs is None and expected < floor / 2:
        skipped = (
            f"SSE: ~{runs_for} runs, ~{runs_for * per_run_s / 60:.1f} GPU-min for {policy.min_lois} LOIs on this "
            f"sensor ({lois_per_run:.3g} per run; ~{expected:.1f} in max_runs={budget} + {ssp_runs} SSP runs, < "
            f"{floor}/2): skipped; "
            "run_policy.sse: always measures it"
        )
    return SSEDecision(
        policy=policy.sse,
        lois_per_run=lois_per_run,
        runs_for_min_lois=runs_for,
        runs_for_min_lois_s=runs_for * per_run_s,
        budget_runs=budget,
        expected_lois=expected,
        skipped=skipped,
    )


def _run_counts(g_runs: int, sse: SSEDecision, policy: Any, notes: list[str]) -> RunCounts:
    """SSP runs: the guidance table. SSE runs (METHOD.md step 3): as many as the SSE profile needs for min_lois
    LOIs (METHOD.md step 8), at least the guidance table; both capped at max_runs; explicit values override; none
    when `sse` skips them."""
    runs = g_runs
    sse_runs = max(g_runs, sse.runs_for_min_lois)
    if sse.skipped is not None:
        notes.append(sse.skipped)
        sse_runs = 0
    elif sse_runs > policy.max_runs:
        notes.append(
            f"{sse_runs} SSE runs wanted for {policy.min_lois} SSE LOIs; "
            f"capped at run_policy.max_runs={policy.max_runs}"
        )
        sse_runs = int(policy.max_runs)
    runs = min(runs, int(policy.max_runs))
    if policy.sse_runs is not None and sse.skipped is None:
        sse_runs = int(policy.sse_runs)
    return RunCounts(runs, sse_runs)


def _sse_for_ssp(
    counts: RunCounts, sse: SSEDecision, policy: Any, ssp_runs: int, expected: int | None, notes: list[str]
) -> RunCounts:
    """The SSP runs give SSE (and interleaved) LOIs too (their execution at the SSE index, and the first one): the
    SSE decision counts the SSP budget, as before the adaptive stop. Where the stop is expected to run fewer SSP
    runs (`expected` < `ssp_runs`) and the SSE runs are measured (not skipped, no explicit sse_runs), as many SSE runs
    are added as SSP runs are expected to be saved, so that the SSE and interleaved readings rest on as many LOIs as
    with the whole budget (an SSE run costs its idle and warm-ups + 1 executions, less than an SSP run; topping up
    only to min_lois' need lost 8 of 69 SSE readings in the fidelity matrix)."""
    if expected is None or sse.skipped is not None or policy.sse_runs is not None or expected >= ssp_runs:
        return counts
    extra = ssp_runs - expected
    notes.append(f"{extra} SSE runs for the SSE LOIs of the {extra} SSP runs the adaptive stop is expected to save")
    return RunCounts(counts.runs, counts.sse_runs + extra)


def _run_shape(
    exec_time_ns: int,
    cycle_ns: int,
    sensor: PlanSensor,
    ssp_index: int,
    sse_index: int,
    runs: int,
    lois_wanted: int,
    policy: Any,
    notes: list[str],
    flat: bool = False,
) -> RunShape:
    """The SSP tail: enough steady-state executions per run to collect lois_wanted SSP LOIs over all `runs` (at
    most 4 sensor periods); trailing executions after it (never profiled): one so that every SSP execution has a
    successor and its steady-state cycle (execution + launch gap) is complete, plus as many as cover the sensor's
    group delay (window / 2 + lag), so the SSP can be read centroid-aligned (readings one group delay after the
    tail report the tail: `fingrav.analysis.differentiate`, no lag bias from a slow trend), and its content lead
    (`fingrav.contracts.sensor.PlanSensor.content_lead_ns`: readings whose content lies later than the model says,
    which would otherwise hold the drop to idle after the run: on a simulated sensor with unplaceable late stamps
    the last 2 ms of the tail read 26 % low, the method SSP 0.9 % low). An explicit executions_per_run fits all of
    it in.

    flat (an adaptive SSP stop): the tail spans TAIL_PERIODS sensor periods whatever the run count, so that each
    run, which pays its idle and its settling anyway, yields ~TAIL_PERIODS LOIs instead of a fraction of one; the
    adaptive stop then needs fewer runs. Also where the stability probe did not settle: those SSP runs stop at
    MIN_RUNS (`unsettled_ssp_budget`), and a tail spread over the guidance table's runs gave them < 1 LOI per run
    (H200 database: 10-19 LOIs in 24 runs, short of min_lois)."""
    period = max(sensor.period_ns, 1)
    tail = max(1, math.ceil(lois_wanted * period / (runs * max(exec_time_ns, 1))))
    max_tail = max(1, math.ceil(TAIL_PERIODS * period / max(cycle_ns, 1)))
    if flat:
        tail = max_tail
    elif tail > max_tail:
        notes.append(f"SSP tail capped at {max_tail} executions ({TAIL_PERIODS} sensor periods)")
        tail = max_tail
    trailing = 1 + math.ceil((sensor.window_ns / 2 + sensor.lag_ns + sensor.content_lead_ns) / max(cycle_ns, 1))
    if policy.executions_per_run is not None:
        epr = int(policy.executions_per_run)
        trailing = 1 if epr >= sse_index + 3 else 0
        ssp_index = max(min(ssp_index, epr - 1 - trailing), min(sse_index + 1, epr - 1))
        tail = epr - trailing - ssp_index
        if ssp_index <= sse_index:
            notes.append("explicit executions_per_run leaves no execution after the SSE: SSP == last execution")
    return RunShape(int(ssp_index), int(tail), int(trailing))


def _ssp_shape(
    exec_time_ns: int,
    cycle_ns: int,
    sensor: PlanSensor,
    probe: Probe | None,
    policy: Any,
    ssp_index: int,
    sse_index: int,
    lois_wanted: int,
    ssp_runs: int,
    notes: list[str],
    limited: bool = False,
) -> tuple[RunShape, int | None, int | None]:
    """The SSP runs' shape (`_run_shape`: a tail of TAIL_PERIODS where the adaptive stop runs) and, with an adaptive
    stop, the runs expected of it within the budget `ssp_runs` on a steady kernel and on this one (`limited`:
    limiter-bound, `expected_ssp_runs`; else None, None). The SSE top-up (`_sse_for_ssp`) counts the first, the price
    the second."""
    g_runs = guidance(exec_time_ns)[0]
    adaptive = adaptive_ssp(policy)
    flat = adaptive
    shape = _run_shape(
        exec_time_ns, cycle_ns, sensor, ssp_index, sse_index, min(g_runs, int(policy.max_runs)), lois_wanted, policy,
        notes, flat,
    )  # fmt: skip
    period = max(sensor.period_ns, 1)
    if not adaptive:
        return shape, None, None
    args = (shape.tail, cycle_ns, period, int(policy.min_lois), ssp_runs)
    return shape, expected_ssp_runs(*args), expected_ssp_runs(*args, limited=limited)


def unsettled_ssp_budget(policy: Any, probe: Probe | None, ssp_runs: int, notes: list[str]) -> int:
    """The SSP runs' budget. With an adaptive stop and a stability probe that did not settle, the method SSP is
    flagged `burst_unsettled` whatever the runs give (`fingrav.analysis.flags`: the probe's verdict), so it is never
    valid: runs spent on its CI and LOI targets buy no number. The SSP runs then stop at
    `fingrav.analysis.ssp_stop.MIN_RUNS`, the fewest its CI rests on (it is still reported, flagged), and say so up
    front. On the H200 database (results/h200-db4) the 10 rows of unsettled probes spent 141 GPU-s on 16-24 SSP runs
    each; every one ended with its method SSP invalid. Otherwise (no adaptive stop, a settled probe) `ssp_runs`; so
    also with explicit run_policy.sse_runs (SSE runs measured): the SSP runs' SSE LOIs would then be lost, since the
    SSE top-up (`_sse_for_ssp`) adds SSE runs for the SSP runs saved only where the SSE count is the plan's."""
    explicit_sse = policy.sse_runs is not None and policy.sse != "never"
    if not adaptive_ssp(policy) or probe is None or probe.settled or ssp_runs <= MIN_RUNS or explicit_sse:
        return ssp_runs
    notes.append(
        f"method SSP: the stability probe did not settle, so it is flagged unsettled (not valid) whatever the runs: "
        f"{MIN_RUNS} SSP runs, not up to {ssp_runs}"
    )
    return MIN_RUNS


def adaptive_ssp(policy: Any) -> bool:
    """Whether the SSP runs stop adaptively (`fingrav.analysis.ssp_stop`): run_policy.ssp_ci_pct set in mode auto
    (run_policy.runs, where given, is then the budget; mode explicit runs exactly `runs`)."""
    return getattr(policy, "ssp_ci_pct", None) is not None and policy.mode != "explicit"


def expected_ssp_runs(
    tail: int, cycle_ns: int, period_ns: int, min_lois: int, max_runs: int, limited: bool = False
) -> int:
    """SSP runs the adaptive stop is expected to take: enough for min_lois LOIs at tail x cycle / period LOIs per
    run, at least `fingrav.analysis.ssp_stop.MIN_RUNS`, at most max_runs (the CI target is assumed met by then: on
    a flat tail the LOIs of a run scatter by the sensor noise only); for a limiter-bound kernel (`limited`: the
    limiter scatters the LOIs from run to run) `fingrav.collect.estimate.LIMITED_SSP_RUNS` times as many."""
    per_run = max(tail * max(cycle_ns, 1) / max(period_ns, 1), 1e-9)
    runs = max(MIN_RUNS, math.ceil(min_lois / per_run))
    if limited:
        runs = math.ceil(runs * LIMITED_SSP_RUNS)
    return int(min(max_runs, runs))


def reference_fields(policy: Any, cycle_ns: int) -> dict[str, Any]:
    """The plan's reference run (none when run_policy.reference_ms is 0)."""
    on = bool(policy.reference_ms)
    return {
        "reference_executions": math.ceil(policy.reference_ms * NS_PER_MS / max(cycle_ns, 1)) if on else 0,
        "reference_ms": float(policy.reference_ms),
        "reference_max_ms": float(policy.reference_max_ms) if on else 0.0,
        "reference_ci_pct": float(policy.reference_ci_pct) if on else None,
    }


def make_plan(
    exec_time_ns: int,
    cycle_ns: int,
    sensor: PlanSensor,
    probe: Probe | None,
    policy: Any,
    predecessor_count: int = 0,
    pred_cycle_ns: float = 0.0,
    timing: DeviceTiming | None = None,
) -> Plan:
    """Choose runs, executions per run, idle and delay (METHOD.md steps 1, 3, 4, 5, 8), whether to run the SSE runs
    (`sse_decision`), and what it all costs (`fingrav.collect.estimate.plan_cost`).

    sensor: the total channel's calibrated sensor (ns).
    policy: a `fingrav.config.RunPolicy`. Explicit values in it override the automatic choice.
    pred_cycle_ns: the predecessor's launch-to-launch time (ns), for the cost only (0: unknown, not counted).
    timing: the device's power limit, limit cycle and host gap, for the cost only (`fingrav.collect.estimate`).
    """
    notes: list[str] = []
    g_runs, spacing_ns, _ = guidance(exec_time_ns)
    period = max(sensor.period_ns, 1)
    settle = sensor.settle_ns
    warmups = int(policy.warmups)
    sse_index = warmups
    # LOIs wanted: ~1 per `spacing` of kernel time (guidance table), at least policy.min_lois
    lois_wanted = max(int(policy.min_lois), math.ceil(exec_time_ns / spacing_ns))
    ssp_index = _ssp_index(cycle_ns, settle, probe, warmups, notes)
    # idle before each run: the sensor and the device must be back at idle (probe recovery)
    recover = probe.t_recover_ns if probe is not None else settle
    idle_ns = int(1.2 * max(settle, recover)) + period
    ssp_runs = int(policy.runs) if policy.runs is not None else min(g_runs, int(policy.max_runs))
    budget = unsettled_ssp_budget(policy, probe, ssp_runs, notes)
    shape, expected, priced = _ssp_shape(exec_time_ns, cycle_ns, sensor, probe, policy, ssp_index, sse_index,
                                         lois_wanted, budget, notes, limiter_bound(probe, timing))  # fmt: skip
    adaptive = expected is not None
    sse = sse_decision(exec_time_ns, cycle_ns, sensor, idle_ns, predecessor_count * pred_cycle_ns, policy, ssp_runs)
    counts = _sse_for_ssp(_run_counts(g_runs, sse, policy, notes), sse, policy, ssp_runs, expected, notes)
    runs = min(int(policy.runs) if policy.runs is not None else counts.runs, budget)
    plan = Plan(
        format_version=FORMAT_VERSION,
        exec_time_ns=int(exec_time_ns),
        cycle_ns=int(cycle_ns),
        warmups=warmups,
        sse_index=sse_index,
        ssp_index=shape.ssp_index,
        tail=shape.tail,
        trailing=shape.trailing,
        executions_per_run=int(shape.executions_per_run),
        runs=int(runs),
        sse_runs=int(counts.sse_runs),
        sse_executions_per_run=sse_index + 1,
        base_runs=_base_runs(policy, counts.sse_runs, sse_index, notes),
        sse_decision=sse,
        ssp_ci_pct=float(policy.ssp_ci_pct) if adaptive else None,
        ssp_min_lois=int(policy.min_lois) if adaptive else None,
        ssp_runs_expected=priced,
        **reference_fields(policy, cycle_ns),
        predecessor_count=int(predecessor_count),
        sse_targeting=getattr(policy, "sse_targeting", "off") == "on",
        idle_ns=idle_ns,
        delay_max_ns=period,
        lois_wanted=int(lois_wanted),
        sensor=sensor,
        probe=probe,
        mode=policy.mode,
        notes=notes,
    )
    return plan.model_copy(update={"cost": plan_cost(plan, policy, pred_cycle_ns, timing)})
