"""What a plan costs in GPU time, by run kind, from the plan alone (`plan_cost`): the same waits and executions
`fingrav.collect.runner.collect_scenario` then issues, so the estimate is known before the GPU time is spent.

GPU-side module (stdlib). All times in ns unless a name ends in `_s`. What a plan cannot know is priced at its
bounds: the adaptive reference run lies between reference_ms and reference_max_ms (`PlanCost.reference_s` /
`reference_max_s`), the adaptively stopped SSP runs between the expected count and the budget (`ssp_s` /
`ssp_max_s`); before the stability probe (`fingrav plan`), `fingrav.collect.sweep_estimate` prices the
plan made with the sensor's settling in place of the probe's.

What the probe cannot show comes from the device (`DeviceTiming`): its power limit, when and how often its limiter
cycles, and the host's time between two runs. A kernel whose probe level reaches the power limit
(`limiter_bound`) is priced with the adaptive reference run it will take (`reference_expected_ns`: the limit cycles
the whole-cycle mean needs) and with more SSP runs (`LIMITED_SSP_RUNS`: the limiter scatters the LOIs between runs).
Fitted on results/h200-db2 (106 H200 scenarios; benchmarks/RESULTS.md "Issue 20: the plan's price and db3"):
`REFERENCE_CYCLES` and, in `fingrav.collect.sweep_estimate`, the NVML host gap; on results/h200-db4, db5 and db6:
`LIMITED_SSP_RUNS`; nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from fingrav.contracts.plan import Plan, PlanCost, Probe
from fingrav.contracts.sensor import PlanSensor
from fingrav.contracts.tables import READ_GUARD_NS  # the runner's idle after its pre-run reads (one home)
from fingrav.contracts.units import NS_PER_MS

CLOCK_BURST_NS: Final = 1_000_000  # a burst of GPU-clock reads (50 round trips of ~10 us; at both ends)
NS_PER_S: Final = 1e9
REFERENCE_PART_NS: Final = 250_000_000  # the adaptive reference run asks whether to go on every ~250 ms of GPU time
#: limit cycles an adaptive reference run of a limiter-bound kernel is expected to take past its first clamp: 3 whole
#: cycles (`fingrav.analysis.sustained.MIN_CYCLES_FOR_CI`) need 4 clamp starts; some runs need a 4th or more for the
#: CI (results/h200-db2: 74 limiter-bound kernels, median 4.1 s, mean 4.9 s of reference run; fitted to the mean)
REFERENCE_CYCLES: Final = 4.5
#: SSP runs the adaptive stop takes for a limiter-bound kernel, per run it takes for a steady one: the limiter scatters
#: the LOIs from run to run, so the CI target needs more runs. Fitted to that ratio (stop 34) where the plan priced the
#: kernels so: results/h200-db4, db5, db6 (three cards), 177 limiter-bound kernels at a mean of 15.0 SSP runs against
#: 8.7 for the 121 steady ones (1.66-1.85 per card); was 1.5 from results/h200-db2 (12.8 against 8.2). Priced before
#: db6 ran, its total went from -8.9 % to -4.6 % and the scenarios within +-25 % from 79 to 84 of 106
LIMITED_SSP_RUNS: Final = 1.75


@dataclass(frozen=True)
class DeviceTiming:
    """What a plan is priced with beyond its sensor and probe (ns, mW): the power limit (`limit_mw`; None: unknown,
    no kernel is limiter-bound), the limiter's first clamp after the start of a back-to-back run and its cycle
    (`first_clamp_ns`, `cycle_ns`; 0: it does not cycle) and the host's time per run that the next run's idle does
    not hide (`host_gap_ns`: `GPUDevice.idle_left_ns` counts the draining and the stop's decision towards the idle;
    the pre-run reads and the launch remain; 0 on a simulator's virtual clock)."""

    limit_mw: float | None = None
    first_clamp_ns: float = 0.0
    cycle_ns: float = 0.0
    host_gap_ns: float = 0.0


def limiter_bound(probe: Probe | None, timing: DeviceTiming | None) -> bool:
    """Whether the limiter will hold the kernel in limit cycles: the stability probe's level reaches the power limit
    (within its own allowance, tol_mw, or above) and its peak overshot the limit by at least that allowance (the
    limiter cycles where the chip first boosts past the cap; a kernel that levels off at the cap without
    overshooting is held steady). On the 305 probes with an adaptive reference run in eight H200 datasets
    (results/h200-db2, -db3, -db4, -probe-ab, -adaptive, -state, -check, -placement), 170 of whose reference runs
    cycled: the level alone called 12 steady kernels bound (10 decode attentions at 688-703 W in h200-db4, priced
    +53 ... +79 %) and missed 2; level and overshoot call 1 steady kernel bound and miss 6 (peaks 677-713 W, all on
    h200-db2's and -db3's cards). A probe that has not run (`fingrav.collect.sweep_estimate`: level = peak = the
    limit, no allowance) is bound."""
    if probe is None or timing is None or timing.limit_mw is None or probe.level_mw <= 0:
        return False
    return probe.level_mw + probe.tol_mw >= timing.limit_mw and probe.peak_mw >= timing.limit_mw + probe.tol_mw


def reference_expected_ns(plan: Plan, timing: DeviceTiming | None) -> float:
    """The adaptive reference run's expected length (ns of executions): reference_ms, or, for a limiter-bound kernel
    on a device whose limiter cycles, its first clamp + REFERENCE_CYCLES cycles, within [reference_ms,
    reference_max_ms]; plus the part in flight when the decision stops it (REFERENCE_PART_NS, adaptive only)."""
    lo, hi = plan.reference_ms * NS_PER_MS, plan.reference_max_ms * NS_PER_MS
    if hi <= lo:
        return lo
    t = lo
    if timing is not None and timing.cycle_ns > 0 and limiter_bound(plan.probe, timing):
        t = min(hi, max(lo, timing.first_clamp_ns + REFERENCE_CYCLES * timing.cycle_ns))
    return t + REFERENCE_PART_NS


def run_ns(idle_ns: float, busy_ns: float, delay_max_ns: float) -> float:
    """One stamped run (`GPUDevice.measure_runs`): its idle, the read guard, the mean random delay (uniform in
    [0, delay_max_ns)) and its executions back to back (ns)."""
    return float(idle_ns) + READ_GUARD_NS + 0.5 * float(delay_max_ns) + float(busy_ns)


def settle_wait_ns(plan: Plan) -> int:
    """The runner's wait before the timing run, around the probe and after the last run: the sensor's settling plus
    one period (`collect_scenario`)."""
    return int(plan.sensor.settle_ns + plan.sensor.period_ns)


#: sensor periods the stability probe's load spans past the sensor's settling, at least: its samples must show the
#: level the power settles at (`fingrav.collect.plan.ProbeLevel`: the mean of the last quarter, smoothed over >= 3
#: samples; `ProbeSamples` refuses fewer than 4). On the H200 (20 ms, 62 ms of settling) that is 182 ms, under every
#: committed config's probe_ms (>= 200 ms): unchanged. A 100 ms sensor had 3-4 samples in the default 400 ms, and the
#: scenario failed with a ConfigError after calibration (the fidelity matrix, seed 14: 4 of 200 scenarios).
PROBE_MIN_PERIODS: Final = 6


def probe_load_ns(policy: Any, sensor: PlanSensor) -> int:
    """The stability probe's load (ns): run_policy.probe_ms, at least the sensor's settling and PROBE_MIN_PERIODS of
    its sample periods (a probe read from the reference run: the reference run's first that long)."""
    need = int(sensor.settle_ns) + PROBE_MIN_PERIODS * int(sensor.period_ns)
    return max(int(policy.probe_ms * NS_PER_MS), need)


def probe_watch_ns(policy: Any, settle_ns: int) -> int:
    """The idle after the stability probe, in which its return to idle is watched (ns): run_policy.probe_idle_ms
    (None: probe_ms), at least two settle waits (`settle_ns`: the runner's, settling + one period)."""
    watch_ms = policy.probe_idle_ms if getattr(policy, "probe_idle_ms", None) is not None else policy.probe_ms
    return max(2 * int(settle_ns), int(watch_ms * NS_PER_MS))


def probe_in_reference(policy: Any) -> bool:
    """Whether the stability probe is read from the reference run's start (run_policy.probe_source 'reference'; the
    config makes sure there is a reference run of at least probe_ms) rather than run on its own
    (`fingrav.collect.runner.collect_scenario`)."""
    return getattr(policy, "probe_source", "separate") == "reference" and bool(getattr(policy, "reference_ms", 0))


def plan_cost(plan: Plan, policy: Any, pred_cycle_ns: float = 0.0, timing: DeviceTiming | None = None) -> PlanCost:
    """The GPU time (s) `plan` will take, by run kind, as `collect_scenario` issues it:

    * probe: the timing run (a settle wait, the guard, warm-ups + timing_reps executions) and the stability probe
      (a settle wait, the guard, `probe_load_ns` of executions, then `probe_watch_ns` of idle); read from the reference
      run's start (`probe_in_reference`), only its watch after the reference run;
    * reference: its idle (a settle wait where it carries the probe), the guard and the executions
      `reference_expected_ns` expects (in `reference_s`; at most reference_max_ms in `reference_max_s`);
    * SSE / SSP: each run's idle, guard, mean random delay and executions (predecessor included: `pred_cycle_ns`,
      its launch-to-launch time; 0 when unknown); with an adaptive SSP stop, the SSP runs the plan expects
      (`Plan.ssp_runs_expected`) and, in `ssp_max_s`, the budget (`Plan.runs`);
    * other: the settle wait after the last run and the two clock bursts.

    Every run also costs the device's host gap (`DeviceTiming.host_gap_ns`). `policy` is the
    `fingrav.config.RunPolicy` the plan was made with; `timing` the device's (None: no limiter, no host gap)."""
    gap = timing.host_gap_ns if timing is not None else 0.0
    settle = settle_wait_ns(plan)
    cycle = max(plan.cycle_ns, 1)
    timing_run = settle + READ_GUARD_NS + (int(policy.warmups) + int(policy.timing_reps)) * cycle + gap
    merged = bool(plan.reference_executions) and probe_in_reference(policy)
    n_probe = max(int(policy.warmups) + 2, -(-probe_load_ns(policy, plan.sensor) // cycle))
    probe = probe_watch_ns(policy, settle) + (0 if merged else settle + READ_GUARD_NS + n_probe * cycle + gap)
    ref_lo = ref_hi = 0.0
    if plan.reference_executions:
        ref_idle = settle if merged else plan.idle_ns
        busy = max(plan.reference_executions * cycle, reference_expected_ns(plan, timing))
        if merged:  # it carries the stability probe: at least the probe's load
            busy = max(busy, probe_load_ns(policy, plan.sensor))
        ref_lo = ref_idle + READ_GUARD_NS + busy + gap
        longest = plan.reference_max_ms * NS_PER_MS + (REFERENCE_PART_NS if busy > plan.reference_ms * NS_PER_MS else 0)
        ref_hi = max(ref_lo, ref_idle + READ_GUARD_NS + longest + gap)
    pred = plan.predecessor_count * float(pred_cycle_ns)
    sse = plan.sse_runs * (run_ns(plan.idle_ns, pred + plan.sse_executions_per_run * cycle, plan.delay_max_ns) + gap)
    sse += plan.base_runs * (run_ns(plan.idle_ns, pred + plan.sse_index * cycle, plan.delay_max_ns) + gap)
    per_ssp = run_ns(plan.idle_ns, pred + plan.executions_per_run * cycle, plan.delay_max_ns) + gap
    ssp_runs = plan.ssp_runs_expected if plan.ssp_runs_expected is not None else plan.runs
    ssp, ssp_max = ssp_runs * per_ssp, plan.runs * per_ssp
    other = settle + 2 * CLOCK_BURST_NS
    return PlanCost(
        probe_s=(timing_run + probe) / NS_PER_S,
        reference_s=ref_lo / NS_PER_S,
        reference_max_s=ref_hi / NS_PER_S,
        sse_s=sse / NS_PER_S,
        ssp_s=ssp / NS_PER_S,
        ssp_max_s=ssp_max / NS_PER_S if plan.ssp_runs_expected is not None else None,
        other_s=other / NS_PER_S,
    )
