"""What a plan costs in GPU time, by run kind, from the plan alone (`plan_cost`): the same waits and executions
`fingrav.collect.runner.collect_scenario` then issues, so the estimate is known before the GPU time is spent.

GPU-side module (stdlib). All times in ns unless a name ends in `_s`. What a plan cannot know is priced at its
bounds: the adaptive reference run lies between reference_ms and reference_max_ms (`PlanCost.reference_s` /
`reference_max_s`), the adaptively stopped SSP runs between the expected count and the budget (`ssp_s` /
`ssp_max_s`); before the stability probe (`fingrav plan`), `fingrav.collect.sweep_estimate` prices the
plan made with the sensor's settling in place of the probe's.
"""

from __future__ import annotations

from typing import Any, Final

from fingrav.contracts.plan import Plan, PlanCost
from fingrav.contracts.tables import READ_GUARD_NS  # the runner's idle after its pre-run reads (one home)
from fingrav.contracts.units import NS_PER_MS

CLOCK_BURST_NS: Final = 1_000_000  # a burst of GPU-clock reads (50 round trips of ~10 us; at both ends)
NS_PER_S: Final = 1e9


def run_ns(idle_ns: float, busy_ns: float, delay_max_ns: float) -> float:
    """One stamped run (`GPUDevice.measure_runs`): its idle, the read guard, the mean random delay (uniform in
    [0, delay_max_ns)) and its executions back to back (ns)."""
    return float(idle_ns) + READ_GUARD_NS + 0.5 * float(delay_max_ns) + float(busy_ns)


def settle_wait_ns(plan: Plan) -> int:
    """The runner's wait before the timing run, around the probe and after the last run: the sensor's settling plus
    one period (`collect_scenario`)."""
    return int(plan.sensor.settle_ns + plan.sensor.period_ns)


def plan_cost(plan: Plan, policy: Any, pred_cycle_ns: float = 0.0) -> PlanCost:
    """The GPU time (s) `plan` will take, by run kind, as `collect_scenario` issues it:

    * probe: the timing run (a settle wait, the guard, warm-ups + timing_reps executions) and the stability probe
      (a settle wait, the guard, probe_ms of executions, then max(2 settle waits, probe_ms) of idle);
    * reference: its idle, the guard and reference_ms (at most reference_max_ms) of executions;
    * SSE / SSP: each run's idle, guard, mean random delay and executions (predecessor included: `pred_cycle_ns`,
      its launch-to-launch time; 0 when unknown); with an adaptive SSP stop, the SSP runs the plan expects
      (`Plan.ssp_runs_expected`) and, in `ssp_max_s`, the budget (`Plan.runs`);
    * other: the settle wait after the last run and the two clock bursts.

    `policy` is the `fingrav.config.RunPolicy` the plan was made with."""
    settle = settle_wait_ns(plan)
    cycle = max(plan.cycle_ns, 1)
    timing = settle + READ_GUARD_NS + (int(policy.warmups) + int(policy.timing_reps)) * cycle
    n_probe = max(int(policy.warmups) + 2, -(-int(policy.probe_ms * NS_PER_MS) // cycle))
    probe = settle + READ_GUARD_NS + n_probe * cycle + max(2 * settle, int(policy.probe_ms * NS_PER_MS))
    ref_lo = ref_hi = 0.0
    if plan.reference_executions:
        ref_lo = plan.idle_ns + READ_GUARD_NS + plan.reference_executions * cycle
        ref_hi = max(ref_lo, plan.idle_ns + READ_GUARD_NS + plan.reference_max_ms * NS_PER_MS)
    pred = plan.predecessor_count * float(pred_cycle_ns)
    sse = plan.sse_runs * run_ns(plan.idle_ns, pred + plan.sse_executions_per_run * cycle, plan.delay_max_ns)
    per_ssp = run_ns(plan.idle_ns, pred + plan.executions_per_run * cycle, plan.delay_max_ns)
    ssp_runs = plan.ssp_runs_expected if plan.ssp_runs_expected is not None else plan.runs
    ssp, ssp_max = ssp_runs * per_ssp, plan.runs * per_ssp
    other = settle + 2 * CLOCK_BURST_NS
    return PlanCost(
        probe_s=(timing + probe) / NS_PER_S,
        reference_s=ref_lo / NS_PER_S,
        reference_max_s=ref_hi / NS_PER_S,
        sse_s=sse / NS_PER_S,
        ssp_s=ssp / NS_PER_S,
        ssp_max_s=ssp_max / NS_PER_S if plan.ssp_runs_expected is not None else None,
        other_s=other / NS_PER_S,
    )
