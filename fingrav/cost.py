"""What a sweep will cost in GPU time, bounded from below before anything runs (`SweepConfig.max_gpu_hours`).

GPU-side module (stdlib). The kernels' times and the sensor are measured only once the sweep runs, so this is a
*lower bound* from what the config fixes: the calibration's load steps, each scenario's stability probe and
shortest reference run, its runs (each preceded by an idle gap of at least `MIN_IDLE_MS`, two periods of the fastest
sensor fingrav reads) and its executions (each at least `MIN_EXEC_US`, or the kernel's declared work at rates no GPU
reaches: `PEAK_FLOP_S`, `PEAK_BYTES_S`). A sweep whose bound exceeds the config's `max_gpu_hours` is refused when it
is validated (a month of GPU time, or a simulator run that ends in MemoryError, is a typo, not a measurement);
replays measure nothing and are never refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from fingrav.config import CalibrationConfig, RunPolicy, Scenario

MIN_IDLE_MS: Final = 2.0  # idle before each run: >= 2 periods of a 1 kHz sensor (fingrav.collect.plan: settle + period)
MIN_EXEC_US: Final = 1.0  # one kernel execution, launch included
PEAK_FLOP_S: Final = 1e16  # above any GPU's dense peak (an H200: ~2e15 bf16): a lower bound on a kernel's time
PEAK_BYTES_S: Final = 2e13  # above any GPU's memory bandwidth (an H200: 4.8e12 B/s)
GUIDANCE_RUNS: Final = 200  # the fewest runs METHOD.md's guidance table asks for (fingrav.contracts.plan.GUIDANCE)
S_PER_H: Final = 3600.0


@dataclass(frozen=True)
class Cost:
    """A lower bound on GPU time (s) and what it is made of (for the message)."""

    seconds: float
    executions: float
    runs: float

    @property
    def hours(self) -> float:
        return self.seconds / S_PER_H


def exec_floor_s(kernel: Any) -> float:
    """The shortest time one execution of `kernel` can take (s): its declared or modelled work at rates above any
    GPU's, at least MIN_EXEC_US."""
    floor = MIN_EXEC_US * 1e-6
    work = kernel.work() if hasattr(kernel, "work") else None
    if work is not None:
        floor = max(floor, (work.flop or 0.0) / PEAK_FLOP_S, (work.bytes or 0.0) / PEAK_BYTES_S)
    return floor


def calibration_cost(cal: CalibrationConfig) -> Cost:
    """The calibration's load steps (on + off each)."""
    return Cost(seconds=cal.steps * (cal.step_on_ms + cal.step_off_ms) / 1e3, executions=0.0, runs=float(cal.steps))


def scenario_cost(scenario: Scenario, policy: RunPolicy) -> Cost:
    """A lower bound on one scenario's collection (see the module docstring)."""
    ssp_runs = policy.runs if policy.runs is not None else min(GUIDANCE_RUNS, policy.max_runs)
    sse_runs = policy.sse_runs if policy.sse_runs is not None else min(GUIDANCE_RUNS, policy.max_runs)
    per_ssp_run = policy.executions_per_run if policy.executions_per_run is not None else policy.warmups + 2
    base_runs = policy.sse_base_runs if policy.warmups > 0 else 0  # SSE runs without the SSE
    executions = float(ssp_runs) * per_ssp_run + float(sse_runs) * (policy.warmups + 1)
    executions += float(base_runs) * policy.warmups
    seconds = executions * exec_floor_s(scenario.kernel)
    runs = float(ssp_runs + sse_runs + base_runs)
    if scenario.predecessor is not None:
        pred = runs * scenario.predecessor.count
        executions += pred
        seconds += pred * exec_floor_s(scenario.predecessor.kernel)
    seconds += runs * MIN_IDLE_MS / 1e3 + (policy.probe_ms + policy.reference_ms) / 1e3
    return Cost(seconds=seconds, executions=executions, runs=runs)
