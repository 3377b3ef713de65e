"""The collection plan (plan.json), the stability probe's result and METHOD.md's guidance table.

Written by collect, read by bin and differentiate (docs/ARCHITECTURE.md "Runs and roles"). All times in ns.
Indices are main-segment execution indices:

* SSP runs: main executions 0 .. executions_per_run - 1; the SSP tail is ssp_index .. trail_index - 1;
  executions from trail_index on are trailing executions (role "trail", never profiled).
* SSE runs: main executions 0 .. sse_executions_per_run - 1; the SSE execution is sse_index (the last one).
* Both kinds start with predecessor_count predecessor executions ("pred" segment).
* The reference run: reference_executions back-to-back main executions (0 = no reference run).
"""

from __future__ import annotations

import math
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from fingrav.contracts.provenance import DistributedInfo, Provenance
from fingrav.contracts.roles import FIRST, PRED, SSE, SSP, TRAIL, WARMUP
from fingrav.contracts.sensor import PlanSensor

METHOD_MIN_EXEC_NS: Final = 25_000

# (upper bound of kernel time ns, runs, LOI spacing ns, margin): METHOD.md's guidance table
GUIDANCE: Final[tuple[tuple[float, int, int, float], ...]] = (
    (50_000, 400, 5_000, 0.05),
    (200_000, 200, 10_000, 0.05),
    (1_000_000, 200, 10_000, 0.02),
    (math.inf, 200, 10_000, 0.02),
)


def guidance(exec_time_ns: float) -> tuple[int, int, float]:
    """(runs, LOI spacing in ns, binning margin) for a kernel of `exec_time_ns` (METHOD.md table).
    Kernels shorter than 25 µs use the first row (and are flagged by the analysis)."""
    for upper, runs, spacing, margin in GUIDANCE:
        if exec_time_ns < upper:
            return runs, spacing, margin
    return GUIDANCE[-1][1:]  # NaN: the last row


class Probe(BaseModel):
    """What the stability probe saw on the "total" channel (host clock, relative to the busy start).

    t_stable_ns: first time after which the sensor output stays within the tolerance of its final level;
    t_recover_ns: time after the busy end until the output is back within tolerance of idle;
    settled: whether the output was stable over the last part of the probe;
    source: "run", a probe run of its own, or "reference", the first busy_ns of the reference run (its return to
    idle timed from the reference run's end; run_policy.probe_source)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    busy_ns: int
    executions: int
    idle_level_mw: float
    level_mw: float
    peak_mw: float
    tol_mw: float
    t_stable_ns: int
    t_recover_ns: int
    settled: bool
    samples: int
    source: Literal["run", "reference"] = "run"

    @model_serializer(mode="wrap")
    def _no_default_source(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """plan.json keeps the keys it had before `source`: a probe run of its own writes no source."""
        out = handler(self)
        if out.get("source") == "run":
            del out["source"]
        return out


class ReferenceStop(BaseModel):
    """Why an adaptive reference run stopped: the last decision of `fingrav.analysis.sustained.reference_decision`
    (`extend`: whether it said go on; `reason`: a key of `fingrav.analysis.sustained.REFERENCE_REASONS`; ns since
    the run started; whole limit cycles seen; the whole-cycle mean's CI half-width in %, None without one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    extend: bool = False
    reason: str
    elapsed_ns: int
    cycles: int = 0
    ci_pct: float | None = None


class SSPStop(BaseModel):
    """Why the SSP runs stopped: the last decision of `fingrav.analysis.ssp_stop.ssp_stop_decision` (`extend`:
    whether it said go on; `reason`: a key of `fingrav.analysis.ssp_stop.SSP_STOP_REASONS`; the SSP runs and LOIs
    it saw; their pooled mean (mW) and the statistical CI half-width of the method SSP in %, None without one)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    extend: bool = False
    reason: str
    runs: int
    lois: int
    mean_mw: float | None = None
    ci_pct: float | None = None


class RankLocal(BaseModel):
    """What one rank of a multi-GPU collection measured itself before the ranks agreed on one plan: its kernel's
    median execution time and cycle (ns) and its own stability probe."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exec_time_ns: int
    cycle_ns: int
    probe: Probe | None = None


class PlanCost(BaseModel):
    """What a plan is expected to cost in GPU time (s), by run kind (`fingrav.collect.estimate.plan_cost`): the
    timing run and the stability probe (`probe_s`), the reference run at its shortest and longest length (adaptive:
    it lies in between), the SSE runs, the SSP runs and the waits between them (`other_s`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    probe_s: float = Field(description="timing run and stability probe, with the idle before and after them (s)")
    reference_s: float = Field(description="the reference run at its shortest length (reference_ms), idle included (s)")
    reference_max_s: float = Field(description="the reference run at its longest length (reference_max_ms) (s)")
    sse_s: float = Field(
        description="the SSE runs and their base runs (Plan.base_runs), each with its idle, guard and random delay (s)"
    )
    ssp_s: float = Field(description="the SSP runs, each with its idle, guard and random delay (s)")
    ssp_max_s: float | None = Field(
        None,
        description="the SSP runs at their budget (runs) where an adaptive stop prices fewer in ssp_s (s)",
        exclude_if=lambda v: v is None,
    )
    other_s: float = Field(description="clock bursts and the settle waits around the runs (s)")

    @property
    def total_s(self) -> float:
        """Expected GPU time with the reference run at its shortest length (s)."""
        return self.probe_s + self.reference_s + self.sse_s + self.ssp_s + self.other_s

    @property
    def total_max_s(self) -> float:
        """Expected GPU time with the reference run at its longest length (s)."""
        ssp_extra = self.ssp_max_s - self.ssp_s if self.ssp_max_s is not None else 0.0
        return self.total_s - self.reference_s + self.reference_max_s + ssp_extra


class SSEDecision(BaseModel):
    """What the SSE runs can resolve on this sensor (`fingrav.collect.plan.sse_decision`): LOIs per run (the SSE
    execution's share of a sample period, at most 1), the runs min_lois LOIs need, the LOIs expected in the runs
    the budget allows (max_runs) and the SSP runs, and whether the SSE runs are measured (run_policy.sse) and why
    not."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policy: str = Field(description="run_policy.sse: auto | always | never")
    lois_per_run: float = Field(description="expected SSE LOIs per SSE run (execution time / sensor period, <= 1)")
    runs_for_min_lois: int = Field(description="SSE runs run_policy.min_lois LOIs need at that rate")
    runs_for_min_lois_s: float = Field(description="GPU time those runs would take (s)")
    budget_runs: int = Field(description="SSE runs the budget allows (run_policy.sse_runs, else max_runs)")
    expected_lois: float = Field(
        description="SSE LOIs expected in budget_runs SSE runs and the SSP runs (their execution at the SSE index "
        "gives SSE LOIs too)"
    )
    skipped: str | None = Field(None, description="why the SSE runs were skipped (None: measured)")


class Plan(BaseModel):
    """plan.json: how the runs of one scenario (on one GPU) were built."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = 1
    exec_time_ns: int = Field(description="median execution time of the timing runs")
    cycle_ns: int = Field(description="median start-to-start time of back-to-back executions")
    warmups: int
    sse_index: int
    ssp_index: int
    tail: int = Field(ge=1)
    trailing: int = Field(ge=0)
    executions_per_run: int
    runs: int = Field(description="SSP runs (with an adaptive stop, ssp_ci_pct set: at most this many; ssp_stop)")
    sse_runs: int
    sse_executions_per_run: int
    base_runs: int = Field(
        0,
        ge=0,
        description="base runs: SSE runs without the SSE execution (sse_index main executions; run_policy."
        "sse_base_runs), read by the SSE's kernel power only",
        exclude_if=lambda v: v == 0,  # plans without them write the keys they had
    )
    sse_decision: SSEDecision | None = Field(
        None,
        description="what the SSE runs can resolve and whether they ran (plans before run_policy.sse: None)",
        exclude_if=lambda v: v is None,  # a plan from before it writes back the keys it had
    )
    cost: PlanCost | None = Field(
        None,
        description="the GPU time this plan was expected to cost, by run kind (fingrav.collect.estimate.plan_cost; "
        "the runner does not time the predecessor, so its executions are not counted here; plans before it: None)",
        exclude_if=lambda v: v is None,
    )
    ssp_ci_pct: float | None = Field(
        None,
        description="the adaptive SSP stop's CI target (run_policy.ssp_ci_pct; None: a fixed count of SSP runs)",
        exclude_if=lambda v: v is None,
    )
    ssp_min_lois: int | None = Field(
        None, description="the adaptive SSP stop's LOI target (run_policy.min_lois)", exclude_if=lambda v: v is None
    )
    ssp_runs_expected: int | None = Field(
        None,
        description="SSP runs the plan expects the adaptive stop to need (priced in cost.ssp_s)",
        exclude_if=lambda v: v is None,
    )
    ssp_stop: SSPStop | None = Field(
        None,
        description="why the adaptive SSP runs stopped: its last decision (reason, runs, lois, ci_pct); None: fixed",
        exclude_if=lambda v: v is None,
    )
    reference_executions: int = Field(0, description="executions planned for the reference run's shortest length")
    reference_ms: float = Field(0.0, description="the reference run's shortest length (run_policy.reference_ms)")
    reference_max_ms: float = Field(
        0.0, description="its longest length (run_policy.reference_max_ms; <= reference_ms: a fixed length)"
    )
    reference_ci_pct: float | None = Field(None, description="its stopping CI target (run_policy.reference_ci_pct)")
    reference_executed: int | None = Field(
        None, description="executions the reference run really had (adaptive: reference_executions or more)"
    )
    reference_stop: ReferenceStop | None = Field(
        None, description="why the adaptive reference run stopped: its last decision (reason, elapsed_ns, cycles, ...)"
    )
    reference_unstamped: bool = Field(
        False,
        description="the reference run ran as a user runs it, no stamp between executions (executions.parquet: one "
        "row spanning it, exec_index = reference_executions - 1)",
    )
    predecessor_count: int = 0
    sse_targeting: bool = Field(
        False,
        description="the SSE runs' delays were aimed at the sensor's next sample (run_policy.sse_targeting; "
        "fingrav.collect.targeting); plans before it: absent, False",
        exclude_if=lambda v: not v,
    )
    idle_ns: int
    delay_max_ns: int
    lois_wanted: int
    sensor: PlanSensor
    probe: Probe | None = None
    mode: str = "auto"
    notes: list[str] = []
    margin: float | None = Field(
        None, description="format 1 only: the margin the GPU side chose; the bin stage decides it now"
    )
    # multi-GPU collection (one plan for every rank; each rank's plan.json also says which rank it is)
    distributed: DistributedInfo | None = None
    rank: int | None = None
    world_size: int | None = None
    rank_local: RankLocal | None = None
    probes_by_rank: list[Probe] | None = None
    provenance: Provenance = Provenance()

    def settle_time_ns(self) -> tuple[int, str]:
        """(ns, source) after which a back-to-back run's power is settled: the probe's t_stable_ns ("probe"),
        else the planned sensor's settle_ns ("sensor_settle"). The reference run's statistics and its adaptive
        length both start there."""
        if self.probe is not None:
            return self.probe.t_stable_ns, "probe"
        return self.sensor.settle_ns, "sensor_settle"

    @field_validator("probe", mode="before")
    @classmethod
    def _empty_probe(cls, v: Any) -> Any:
        return None if v == {} else v

    @model_validator(mode="after")
    def _indices(self) -> Plan:
        epr, ssp, sse = self.executions_per_run, self.ssp_index, self.sse_index
        if not 0 <= ssp < epr:
            raise ValueError(f"ssp_index={ssp} outside [0, executions_per_run={epr})")
        if not 0 <= sse < self.sse_executions_per_run:
            raise ValueError(f"sse_index={sse} outside [0, sse_executions_per_run={self.sse_executions_per_run})")
        if self.base_runs and sse == 0:
            raise ValueError("base_runs need warm-ups (sse_index >= 1): a base run is the SSE run without the SSE")
        if ssp + self.tail + self.trailing != epr:
            raise ValueError(f"ssp_index + tail + trailing = {ssp + self.tail + self.trailing} != executions_per_run")
        return self

    @property
    def trail_index(self) -> int:
        """First main-segment index after the SSP tail (SSP runs)."""
        return self.ssp_index + self.tail

    def executions_of(self, phase: str) -> int:
        """Main-segment executions per run of a measure-run kind ("sse" | "ssp")."""
        return self.sse_executions_per_run if phase == SSE else self.executions_per_run

    def bin_index(self, phase: str) -> int:
        """Main-segment index of the execution whose duration bins runs of this kind."""
        return self.sse_index if phase == SSE else self.ssp_index

    def role_of(self, segment: str, exec_index: int, phase: str) -> str:
        """The role of one execution (`fingrav.contracts.roles`); `fingrav.analysis.roles.role_expr` is the
        same rule over a polars frame."""
        if segment == PRED:
            return PRED
        if phase == SSP and exec_index >= self.trail_index:
            return TRAIL
        if phase == SSP and exec_index >= self.ssp_index:
            return SSP
        if exec_index == self.sse_index:
            return SSE
        if exec_index == 0 and self.predecessor_count > 0:
            return FIRST
        return WARMUP

    def margin_for_binning(self, margin: float | None) -> float:
        """The binning margin: analysis.margin when set, else the guidance table's for the measured time."""
        return float(margin) if margin is not None else guidance(self.exec_time_ns)[2]

    def to_json(self) -> dict[str, Any]:
        """plan.json content (fields at their defaults included; unset multi-GPU fields left out)."""
        out = self.model_dump(mode="json", exclude_none=False)
        for key in ("distributed", "rank", "world_size", "rank_local", "probes_by_rank", "margin"):
            if out.get(key) is None:
                out.pop(key, None)
        return out
