"""Differentiate (METHOD.md steps 7-9) as a composition of typed steps, one scenario on one GPU:

    lois_step -> profiles_step -> method_ssp -> sustained_headline -> kernel_powers -> flag_step -> validation_step

each a named function returning a dataclass (or a `fingrav.contracts.result` group); `assemble` puts them into the
`ScenarioResult` and `summary_of` into summary.json (`ScenarioSummary`). No untyped dict crosses a step.

Units: frames carry ns / mW / mJ; the result reports W, µs, mJ, % (`fingrav.contracts.result`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from fingrav.analysis.card_state import CardStateTerm, card_state_of
from fingrav.analysis.consistency import Consistency, check, steady_kernel_power
from fingrav.analysis.flags import FlagInputs, compute_flags, count_gaps, sample_phase_ks, ssp_invalidating
from fingrav.analysis.kernel_power import (
    GridView,
    base_samples,
    estimate_kernel_power,
    grid_view,
    target_samples,
    with_base_runs,
)
from fingrav.analysis.loi import assign_lois, host_executions
from fingrav.analysis.profiles import ProfileResult, compute_profiles
from fingrav.analysis.reference import energy_counter_of, reference_stats
from fingrav.analysis.samples import screen_samples
from fingrav.analysis.sources import SourceTerm, collection_counter_vs_samples, collection_mean_power_mw
from fingrav.analysis.ssp_stop import SSPStopDecision, ssp_stop_decision
from fingrav.analysis.sustained import BATCHES, SustainedHeadline, headline
from fingrav.analysis.tdist import t_critical
from fingrav.analysis.throughput import cycle_estimate, throughput
from fingrav.analysis.validation import Validation, validate
from fingrav.config import AnalysisConfig, RunPolicy, Scenario
from fingrav.contracts import result as R
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.flags import BY_NAME as FLAG_BY_NAME
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import (
    KernelPower,
    LimitCycleStats,
    ReferenceStats,
    RoleStats,
    RunCount,
    SamplePhase,
    ScenarioSummary,
    TruthGroups,
)
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.result import Estimate
from fingrav.contracts.roles import SSE, SSP, TOTAL
from fingrav.contracts.sensor import SensorModel, SensorSummary
from fingrav.contracts.work import Work

logger = logging.getLogger(__name__)

W_PER_MW = 1e-3
US_PER_NS = 1e-3


def describe_plan(plan: Plan) -> R.Labels:
    """scenario / kernel / predecessor / backend labels from the collect stage's provenance record in plan.json
    (its "scenario", a `fingrav.config.Scenario`, and "device" {"backend", ...}); None when absent (scenario:
    "")."""
    prov = plan.provenance
    scen = prov.scenario
    backend = prov.device.backend if prov.device is not None else None
    out: dict[str, str | None] = {"scenario": "", "kernel": None, "predecessor": None}
    if scen is not None:
        sc = Scenario.model_validate(scen)
        out["scenario"] = sc.name
        out["kernel"] = sc.kernel.label()
        if sc.predecessor is not None:
            out["predecessor"] = f"{sc.predecessor.kernel.label()} x{sc.predecessor.count}"
    return R.Labels(
        scenario=out["scenario"] or "",
        kernel=out["kernel"],
        predecessor=out["predecessor"],
        backend=str(backend) if backend is not None else None,
    )


def plan_work(plan: Plan) -> Work | None:
    """The measured kernel's work per execution (`fingrav.contracts.work`), from the scenario in plan.json's
    provenance; None when unknown (no scenario recorded, a collective, a callable that declares none)."""
    scen = plan.provenance.scenario
    if scen is None:
        return None
    return Scenario.model_validate(scen).kernel.work()


def gpu_seconds(samples: pl.DataFrame) -> float | None:
    """How long the scenario's collection held the GPU (s): its power samples' span, from the start of sampling
    (before the timing run) to its end (after the last run), idle waits included."""
    if samples.height < 2:
        return None
    t = samples["t_ns"]
    return float(t.max() - t.min()) / 1e9


def centroid_lois(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    plan: Plan,
    sensors: Mapping[str, SensorModel],
    delays: Mapping[str, int],
    delay_ns: int,
) -> pl.DataFrame | None:
    """The LOIs with every sample placed at its reading's centroid: shifted back by its channel's dead time +
    group delay (window / 2 + lag), so a reading counts for the execution whose power it mostly reports. A
    reading is a weighted mean of the power before it; for a linear trend it equals the power exactly one
    group delay earlier, so the SSP mean over these LOIs carries no lag bias. Needs trailing executions that
    cover the group delay (plans from format 2 have them); else None (the SSP then uses the dead-time-corrected
    LOIs and bounds the lag bias in its CI: `fingrav.analysis.settling`)."""
    gd = {ch: float(s.window_ns or 0.0) / 2.0 + float(s.lag_ns or 0.0) for ch, s in sensors.items()}
    if max(gd.values(), default=0.0) > plan.trailing * plan.cycle_ns or TOTAL not in gd:
        return None
    shift = {ch: int(delays.get(ch, delay_ns)) + int(round(g)) for ch, g in gd.items()}
    return assign_lois(samples, host_execs, shift, default_delay_ns=shift[TOTAL])


def ssp_stop_check(loi: LoiStep, plan: Plan, level: float) -> SSPStopDecision:
    """The adaptive SSP stop (`fingrav.analysis.ssp_stop.ssp_stop_decision`) asked again on the golden SSP runs and
    their SSP LOIs on the total channel (centroid-aligned where there are some, as the method SSP), with the plan's
    targets; a plan without an adaptive stop (older data, ssp_ci_pct None) with run_policy's default targets
    (min_lois, ssp_ci_pct): would these runs have stopped there."""
    lois = loi.ssp_lois if loi.ssp_lois is not None else loi.lois
    runs = (
        loi.host_execs.filter(pl.col("golden") & (pl.col("phase") == SSP)).select(pl.col("run").cast(pl.Int32)).unique()
    )
    per = (
        lois.filter(pl.col("golden") & (pl.col("channel") == TOTAL) & (pl.col("role").cast(pl.String) == SSP))
        .group_by(pl.col("run").cast(pl.Int32))
        .agg(pl.col("power_mw").sum().alias("sum_mw"), pl.len().alias("n"))
    )
    per = runs.join(per, on="run", how="left").fill_null(0).sort("run")
    defaults = RunPolicy.model_fields
    min_lois = plan.ssp_min_lois if plan.ssp_min_lois is not None else int(defaults["min_lois"].default)
    ci_pct = plan.ssp_ci_pct if plan.ssp_ci_pct is not None else float(defaults["ssp_ci_pct"].default)
    return ssp_stop_decision(
        per["sum_mw"].to_numpy().astype(float), per["n"].to_numpy(), min_lois, ci_pct, plan.runs, level
    )


def run_counts(binned: pl.DataFrame) -> dict[str, RunCount]:
    """{"ssp": RunCount(total, golden), "sse": ...}: measure runs per kind in the binned frame (no phase column:
    every run is an SSP run)."""
    is_sse = pl.col("phase").cast(pl.String) == SSE if "phase" in binned.columns else pl.lit(False)
    c = binned.select(
        ssp_total=(~is_sse).sum(),
        ssp_golden=(~is_sse & pl.col("golden")).sum(),
        sse_total=is_sse.sum(),
        sse_golden=(is_sse & pl.col("golden")).sum(),
    ).row(0, named=True)
    return {k: RunCount(total=int(c[f"{k}_total"] or 0), golden=int(c[f"{k}_golden"] or 0)) for k in ("ssp", "sse")}


# ------------------------------------------------------------------------------------------------ the steps
@dataclass(frozen=True)
class LoiStep:
    """Step 1: screened samples (and what was set aside), host-clock executions, the LOIs (each channel's samples
    shifted back by its dead time) and the centroid-aligned LOIs of the SSP (None without delay correction or
    trailing executions), the delays used (ns) and the total channel's group delay (ns)."""

    samples: pl.DataFrame
    sample_counts: dict[str, int]
    host_execs: pl.DataFrame
    lois: pl.DataFrame
    ssp_lois: pl.DataFrame | None
    delays: dict[str, int]
    delay_ns: int
    group_delay_ns: float


def lois_step(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    samples: pl.DataFrame,
    plan: Plan,
    binned: pl.DataFrame,
    clock: ClockMap,
    sensors: Mapping[str, SensorModel],
    analysis: AnalysisConfig,
) -> LoiStep:
    """Step 1: screen the samples, map executions to the host clock, assign LOIs (METHOD.md step 7)."""
    tot = sensors[TOTAL]
    if analysis.delay_correction:
        delays = {ch: int(round(float(s.delay_ns or 0.0))) for ch, s in sensors.items()}
        delay_ns = delays[TOTAL]
    else:
        delay_ns, delays = 0, {}
    samples, counts = screen_samples(samples)
    hx = host_executions(executions, runs, plan, clock, binned)
    lois = assign_lois(samples, hx, delays if len(delays) > 1 else delay_ns, default_delay_ns=delay_ns)
    group_delay_ns = float(tot.window_ns or 0.0) / 2.0 + float(tot.lag_ns or 0.0)
    ssp_lois = centroid_lois(samples, hx, plan, sensors, delays, delay_ns) if analysis.delay_correction else None
    return LoiStep(samples, dict(counts), hx, lois, ssp_lois, delays, delay_ns, group_delay_ns)


def profiles_step(
    loi: LoiStep, plan: Plan, analysis: AnalysisConfig, sensors: Mapping[str, SensorModel], seed: int
) -> ProfileResult:
    """Step 2: the profiles of the golden runs (`fingrav.analysis.profiles.compute_profiles`)."""
    return compute_profiles(
        loi.lois,
        loi.host_execs,
        plan,
        analysis,
        seed=seed,
        group_delay_ns=loi.group_delay_ns,
        sensors=sensors,
        ssp_lois=loi.ssp_lois,
        input_sets=input_sets_of(plan),
    )


def input_sets_of(plan: Plan) -> int:
    """The input sets the scenario's kernel rotated through (its provenance, `GPUDevice.prepare(...).describe()`);
    1 where the raw data do not say (data from before the sets were recorded)."""
    main = (plan.provenance.kernels or {}).get("main") or {}
    try:
        return max(1, int(main.get("input_sets") or 1))
    except (TypeError, ValueError):
        return 1


def _power(st: RoleStats | None) -> Estimate:
    """A group's mean power with its CI, mW (`RoleStats.power`)."""
    return st.power if st is not None else Estimate(unit="mW")


def method_ssp(prof: ProfileResult) -> R.MethodSSP:
    """Step 3: the method's SSP (W) of the short stamped runs after idle, per channel, its cycle (µs) and energy
    per execution (mJ). Its validity is set by `flag_step`."""
    n = prof.numbers
    tot = prof.channels.get(TOTAL, {})
    return R.MethodSSP(
        power=_power(tot.get("ssp")).scaled(W_PER_MW, "W"),
        cycle_time=n.cycle_time_ns.scaled(US_PER_NS, "µs"),
        energy_per_exec=n.energy_per_exec_mj,
        channels={
            ch: _power(per.get("ssp")).scaled(W_PER_MW, "W") for ch, per in sorted(prof.channels.items()) if ch != TOTAL
        },
    )


@dataclass(frozen=True)
class HeadlineStep:
    """Step 4: the reference run's statistics (None without one) and the headline drawn from it (else the SSP)."""

    reference: ReferenceStats | None
    headline: SustainedHeadline


def sustained_headline(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    loi: LoiStep,
    plan: Plan,
    clock: ClockMap,
    analysis: AnalysisConfig,
    prof: ProfileResult,
) -> HeadlineStep:
    """Step 4: the reference run (`fingrav.analysis.reference`) and the headline (`fingrav.analysis.sustained`):
    sustained where there is a settled reference run, else the method SSP (burst)."""
    ref = reference_stats(executions, runs, loi.samples, plan, clock, loi.delay_ns, analysis.ci_level)
    n = prof.numbers
    ssp = _power(prof.channels.get(TOTAL, {}).get("ssp"))
    return HeadlineStep(ref, headline(ref, ssp, n.cycle_time_ns.value, n.energy_per_exec_mj))


def kernel_powers(
    loi: LoiStep,
    runs: pl.DataFrame,
    plan: Plan,
    grid: GridView,
    prof: ProfileResult,
    analysis: AnalysisConfig,
    base: BaseRuns | None = None,
) -> dict[str, KernelPower]:
    """Step 5: the SSE's (and the interleaved execution's, target "first") kernel power through the sensor model
    (`fingrav.analysis.kernel_power`; `grid`: the samples and sensor it reads, `grid_view`), next to the
    readings; the SSE's with its base runs where there are some (`base`: the raw executions, the clock and the seed
    they need)."""
    out: dict[str, KernelPower] = {}
    if prof.boot is None or not prof.golden_runs.size:
        return out
    samples, tot, delay_ns = grid
    for target in ("sse", "first") if plan.predecessor_count > 0 else ("sse",):
        frame = target_samples(samples, loi.host_execs, runs, plan, tot, delay_ns, target)
        run_ids, counts = prof.golden_runs, prof.boot.counts
        if target == "sse" and base is not None and plan.base_runs:
            margin = plan.margin_for_binning(analysis.margin)  # the bin stage's
            rows = base_samples(samples, base.executions, runs, plan, base.clock, tot, delay_ns, frame, margin)
            frame, run_ids, counts = with_base_runs(frame, rows, run_ids, counts, analysis.ci_level, base.seed)
        out[target] = estimate_kernel_power(
            frame,
            tot,
            run_ids,
            counts,
            analysis.ci_level,
            target,
            analysis.kernel_power_max_ci_pct,
            min_seen=float(analysis.min_lois),
        )
    return out


@dataclass(frozen=True)
class BaseRuns:
    """What the SSE's kernel power needs to read the base runs (`fingrav.analysis.kernel_power.base_samples`): the raw
    executions, the scenario's clock map and its seed (the base runs' bootstrap stream)."""

    executions: pl.DataFrame
    clock: ClockMap
    seed: int


def ssp_consistency(
    loi: LoiStep, runs: pl.DataFrame, plan: Plan, grid: GridView, prof: ProfileResult, analysis: AnalysisConfig
) -> tuple[KernelPower | None, Consistency]:
    """Step 5b: the self-consistency check of the method SSP (`fingrav.analysis.consistency`): the sensor-model
    estimator's power of the SSP tail (mW; None without golden runs; `grid` as in `kernel_powers`) and whether it
    equals the SSP within their combined CI."""
    ssp = _power(prof.channels.get(TOTAL, {}).get("ssp"))
    if prof.boot is None or not prof.golden_runs.size:
        return None, check(KernelPower(target="ssp_steady", measurable=False, reason="no golden runs"), ssp)
    samples, tot, delay_ns = grid
    kp = steady_kernel_power(
        samples,
        loi.host_execs,
        runs,
        plan,
        tot,
        delay_ns,
        prof.golden_runs,
        prof.boot.counts,
        analysis.ci_level,
        float(analysis.min_lois),
    )
    return kp, check(kp, ssp)


@dataclass(frozen=True)
class FlagStep:
    """Step 6: the flags (invalidating / notes), whether the row is valid, which flags invalidate the method SSP
    itself, the run counts, the sample gaps and the sampling-phase test they rest on."""

    flags: R.Flags
    valid: bool
    ssp_invalid_by: list[str]
    counts: dict[str, RunCount]
    gaps: dict[str, int]
    phase_ks: tuple[float | None, int]


def flag_step(
    loi: LoiStep,
    runs: pl.DataFrame,
    binned: pl.DataFrame,
    plan: Plan,
    clock: ClockMap,
    sensors: Mapping[str, SensorModel],
    analysis: AnalysisConfig,
    prof: ProfileResult,
    hs: HeadlineStep,
    ssp: R.MethodSSP,
    max_clock_residual_us: float,
    gaps: Sequence[Sequence[int]],
    consistency: Consistency | None = None,
) -> FlagStep:
    """Step 6: every flag of the registry (`fingrav.analysis.flags`), split into invalidating and notes."""
    tot = prof.channels.get(TOTAL, {})
    st_ssp = tot.get("ssp")
    counts = run_counts(binned)
    n = prof.numbers
    exec_time_ns = n.exec_time_ns.value if n.exec_time_ns.value is not None else plan.exec_time_ns
    gap_counts = count_gaps(loi.samples, loi.host_execs, gaps, loi.delay_ns)
    phase_ks = sample_phase_ks(loi.samples, runs, sensors[TOTAL].period_ns)
    ref, hl = hs.reference, hs.headline
    ssp_mw = _power(st_ssp)
    e = n.energy_per_exec_mj
    inp = FlagInputs(
        ssp_lois=int(st_ssp.lois if st_ssp else 0),
        sse_lois=int(tot["sse"].lois if "sse" in tot else 0),
        exec_time_ns=exec_time_ns,
        sensor=sensors[TOTAL],
        clock=clock,
        probe=plan.probe,
        runs_total=counts["ssp"].total,
        runs_golden=counts["ssp"].golden,
        gaps_in_golden_runs=gap_counts["known_in_golden_runs"] + gap_counts["detected_in_golden_runs"],
        min_lois=analysis.min_lois,
        max_drift_ppm=analysis.max_drift_ppm,
        max_clock_residual_us=float(max_clock_residual_us),
        sse_runs_total=counts["sse"].total,
        sse_runs_golden=counts["sse"].golden,
        reference_unsettled=bool(ref is not None and ref.unsettled),
        reference_block_spread_pct=ref.block_spread_pct if ref is not None else None,
        ssp_ci_mw=(ssp_mw.ci_low, ssp_mw.ci_high),
        reference_ci_mw=(ref.ci_low_mw, ref.ci_high_mw) if ref is not None else (None, None),
        ssp_vs_reference_pct=ssp_mw.vs(ref.power).value if ref is not None else None,
        sample_phase_ks=phase_ks,
        samples_rejected=loi.sample_counts["rejected"],
        tail_unsettled=n.tail_unsettled,
        sse_skipped=plan.sse_decision is not None and plan.sse_decision.skipped is not None,
        max_ci_pct=analysis.max_ci_pct,
        headline_source=hl.source,
        reference_drifting=bool(ref is not None and ref.drifting and ref.limit_cycle is None),
        ssp_mw=hl.power.value,
        headline_ci_mw=(hl.power.ci_low, hl.power.ci_high),
        energy_mj=(hl.energy.value, hl.energy.ci_low, hl.energy.ci_high),
        method_ssp_mw=ssp_mw.value,
        method_ssp_energy_mj=(e.value, e.ci_low, e.ci_high),
        ssp_consistent=consistency.passed if consistency is not None else None,
    )
    flags, valid = compute_flags(inp)
    split = R.Flags(
        invalidating=[f for f in flags if f in FLAG_BY_NAME and FLAG_BY_NAME[f].invalidates],
        notes=[f for f in flags if not (f in FLAG_BY_NAME and FLAG_BY_NAME[f].invalidates)],
    )
    return FlagStep(split, valid, ssp_invalidating(inp, flags), counts, gap_counts, phase_ks)


def validation_step(
    truth: pl.DataFrame | None,
    reading_truth: pl.DataFrame | None,
    binned: pl.DataFrame,
    plan: Plan,
    loi: LoiStep,
    prof: ProfileResult,
    hs: HeadlineStep,
    readings: tuple[R.Execution, R.Execution],
    kernel: Mapping[str, KernelPower],
) -> Validation | None:
    """Step 7 (simulator): the truths of the measured numbers and their errors (`fingrav.analysis.validation`)."""
    if truth is None:
        return None
    ref, hl = hs.reference, hs.headline
    sse, inter = readings
    return validate(
        truth,
        binned,
        plan,
        power_mw=hl.power.value,
        sse_reading_mw=sse.reading.value * 1e3 if sse.reading.value is not None else None,
        energy_per_exec_mj=hl.energy.value,
        interleaved_reading_mw=inter.reading.value * 1e3 if inter.reading.value is not None else None,
        host_execs=loi.host_execs,
        reference_power_mw=ref.power_mw if ref is not None else None,
        sse_kernel_mw=kernel["sse"].power.value if "sse" in kernel else None,
        interleaved_kernel_mw=kernel["first"].power.value if "first" in kernel else None,
        reading_truth=reading_truth,
        lois=loi.lois,
        delay_ns=loi.delay_ns,
        ssp_power_mw=_power(prof.channels.get(TOTAL, {}).get("ssp")).value,
        sustained_run=ref.run if ref is not None and hl.source != "burst" else None,
    )


# ------------------------------------------------------------------------------------------------ the groups
def executions_vs_ssp(
    prof: ProfileResult, kernel: Mapping[str, KernelPower], min_lois: int, has_pred: bool
) -> tuple[R.Execution, R.Execution]:
    """The SSE and interleaved groups: readings (null below min_lois LOIs: too_few_lois_sse), kernel powers (null
    where not measurable), each vs the method SSP (%)."""
    tot = prof.channels.get(TOTAL, {})
    ssp = _power(tot.get("ssp"))
    n = prof.numbers

    def one(group: str, vs: Estimate) -> R.Execution:
        st = tot.get(group)
        k = kernel.get(group)
        kp = k.power if k is not None and k.measurable else Estimate(unit="mW")
        measurable = st is not None and st.lois >= min_lois
        return R.Execution(
            reading=_power(st).scaled(W_PER_MW, "W") if measurable else Estimate(unit="W"),
            reading_vs_ssp=vs if measurable else Estimate(unit="%"),
            kernel_power=kp.scaled(W_PER_MW, "W"),
            kernel_power_vs_ssp=kp.vs(ssp),
        )

    sse = one("sse", n.sse_reading_vs_ssp_pct)
    inter = one("first", n.interleaved_reading_vs_ssp_pct) if has_pred else R.Execution()
    return sse, inter


def counter_vs_samples(ref: ReferenceStats | None) -> Estimate:
    """The reference run's energy counter vs its samples over the same span (%; CI: interval arithmetic of the
    counter's bounds and the samples' batch-means CI); no value without a reference run or a counter."""
    if ref is None:
        return Estimate(unit="%")
    counter = ref.counter_power or Estimate.of(ref.energy_power_mw, unit="mW", method="energy counter / span")
    samples = ref.samples_power or Estimate(unit="mW")
    return counter.vs(samples, "counter vs samples: interval arithmetic of the two CIs")


def with_systematics(
    hs: HeadlineStep,
    ssp: R.MethodSSP,
    term: SourceTerm,
    state: CardStateTerm | None = None,
    level: float = 0.95,
) -> tuple[HeadlineStep, R.MethodSSP]:
    """The systematic terms no run count narrows: the headline and the method SSP with the sensor-source term in the
    CIs of their absolute numbers (power, energy per execution: `fingrav.analysis.sources`), and the headline with the
    card's state between runs where it does not limit-cycle (`state`: `fingrav.analysis.card_state`, at the CI
    `level`); the comparisons between them keep theirs."""
    hl = hs.headline
    widened = dataclasses.replace(hl, power=term.widen(hl.power), energy=term.widen(hl.energy, hl.power))
    if state is not None:
        cycling = hs.reference is not None and hs.reference.limit_cycle is not None
        widened = state.widen(widened, cycling, level)
    return HeadlineStep(hs.reference, widened), ssp.model_copy(
        update={"power": term.widen(ssp.power), "energy_per_exec": term.widen(ssp.energy_per_exec, ssp.power)}
    )


def sustained_group(
    hs: HeadlineStep, prof: ProfileResult, ssp: Estimate, plan: Plan, analysis: AnalysisConfig
) -> R.Sustained:
    """The reference run's numbers (`fingrav.contracts.result.Sustained`): its settled power and energy counter,
    the method SSP against it and against the headline, and, where the headline is sustained, its cycle and what
    the stamps add to it, its length, why it stopped, its drift, the unstamped burst power and the limit cycle.
    Differences in % with CIs by interval arithmetic. ssp: the method SSP (mW)."""
    ref, hl = hs.reference, hs.headline
    if ref is None:
        return R.Sustained()
    counter = ref.counter_power or Estimate.of(ref.energy_power_mw, unit="mW", method="energy counter / span")
    out: dict[str, Any] = {
        "reference_power": ref.power.scaled(W_PER_MW, "W"),
        "reference_counter_power": counter.scaled(W_PER_MW, "W"),
        "reference_counter_vs_samples": counter_vs_samples(ref),
        "ssp_vs_reference": ssp.vs(ref.power),
    }
    if hl.source == "burst":
        return R.Sustained(**out)
    out["ssp_vs_power"] = ssp.vs(hl.power)
    busy_s = float(ref.busy_ns or 0.0) / 1e9
    out["run_s"] = busy_s or None
    half_pct = hl.power.half_width_pct
    if busy_s and half_pct is not None:
        out["recommended_run_s"] = busy_s * (half_pct / analysis.max_ci_pct) ** 2  # a plan: `R.Sustained`
    n = prof.numbers
    out["cycle_time"] = cycle_estimate(
        n.cycle_time_mean_ns, prof.cycle_replicates, analysis.ci_level, scale_to_ns=hl.cycle_ns
    ).scaled(US_PER_NS, "µs")
    stop = plan.reference_stop
    out["stop"] = stop.reason if stop is not None else "fixed_length"
    if hl.source == "sustained" and n.cycle_time_ns.value and hl.cycle_ns:
        exact = Estimate.of(hl.cycle_ns, hl.cycle_ns, hl.cycle_ns, "ns", "two stamps over the whole run")
        out["ssp_cycle_vs_sustained_cycle"] = n.cycle_time_ns.vs(exact)
    if ref.drift is not None and ref.limit_cycle is None:
        dr = ref.drift
        half = t_critical(analysis.ci_level, BATCHES - 2) * dr.se_pct
        out["drift"] = Estimate.of(
            dr.change_pct, dr.change_pct - half, dr.change_pct + half, "%", "batch-means slope; t-interval"
        )
    if hl.source == "sustained" and ref.early is not None:
        early = ref.early.power
        out["unstamped_burst_power"] = early.scaled(W_PER_MW, "W")
        out["ssp_vs_unstamped_burst"] = ssp.vs(early)
    if ref.limit_cycle is not None:
        out["limit_cycle"] = limit_cycle_group(ref.limit_cycle)
    return R.Sustained(**out)


def limit_cycle_group(lc: LimitCycleStats) -> R.LimitCycle:
    """The reference run's limit cycle in the result's units: period (ms), duty (%), levels and mean (W)."""
    return R.LimitCycle(
        cycles=lc.cycles,
        start_ns=lc.start_ns,
        end_ns=lc.end_ns,
        period=lc.period_ns.scaled(1e-6, "ms"),
        duty=lc.duty.scaled(100.0, "%"),
        high=lc.high_mw.scaled(W_PER_MW, "W"),
        low=lc.low_mw.scaled(W_PER_MW, "W"),
        mean=lc.mean_mw.scaled(W_PER_MW, "W"),
    )


def throughput_group(
    work: Work | None, hs: HeadlineStep, prof: ProfileResult, analysis: AnalysisConfig
) -> R.Throughput:
    """Rates and efficiencies over the headline's cycle and energy (`fingrav.analysis.throughput`): the stamped
    SSP cycle and the SSP's energy for a burst headline, else the uninstrumented cycle and the sustained energy."""
    hl, n = hs.headline, prof.numbers
    if hl.source == "burst":
        cycle = cycle_estimate(n.cycle_time_mean_ns, prof.cycle_replicates, analysis.ci_level)
        return throughput(work, cycle, hl.energy)  # the SSP's energy (with its sensor-source term)
    cycle = cycle_estimate(n.cycle_time_mean_ns, prof.cycle_replicates, analysis.ci_level, scale_to_ns=hl.cycle_ns)
    return throughput(work, cycle, hl.energy)


def truth_group(v: Validation, result: R.ScenarioResult, hs: HeadlineStep) -> R.Truth:
    """The simulator's truths under the result's names, and every measured number vs its truth (%, the measured
    CI mapped through: the truth is exact)."""

    def t(value: float | None, unit: str) -> Estimate:
        return Estimate.of(value, unit=unit, method="simulator truth")

    def err(measured: Estimate, truth: float | None) -> Estimate:
        return measured.vs_exact(truth)

    ref = hs.reference
    t_power = v.truth_power_w
    return R.Truth(
        power=t(t_power, "W"),
        ssp_power=t(v.truth_ssp_power_w, "W"),
        energy_per_exec=t(v.truth_energy_per_exec_mj, "mJ"),
        sse_reading=t(v.truth_sse_reading_w, "W"),
        sse_kernel_power=t(v.truth_sse_kernel_power_w, "W"),
        interleaved_reading=t(v.truth_interleaved_reading_w, "W"),
        interleaved_kernel_power=t(v.truth_interleaved_kernel_power_w, "W"),
        power_vs_truth=err(hs.headline.power, _mw(t_power)),
        ssp_vs_truth=err(_mw_est(result.ssp.power), _mw(v.truth_ssp_power_w)),
        energy_per_exec_vs_truth=err(hs.headline.energy, v.truth_energy_per_exec_mj),
        reference_vs_truth=err(ref.power if ref is not None else Estimate(), _mw(t_power)),
        sse_reading_vs_truth=err(_mw_est(result.sse.reading), _mw(v.truth_sse_reading_w)),
        sse_kernel_power_vs_truth=err(_mw_est(result.sse.kernel_power), _mw(v.truth_sse_kernel_power_w)),
        interleaved_reading_vs_truth=err(_mw_est(result.interleaved.reading), _mw(v.truth_interleaved_reading_w)),
        interleaved_kernel_power_vs_truth=err(
            _mw_est(result.interleaved.kernel_power), _mw(v.truth_interleaved_kernel_power_w)
        ),
        energy_truth=v.energy_truth,
    )


def _mw(watts: float | None) -> float | None:
    return None if watts is None else watts * 1e3


def _mw_est(e: Estimate) -> Estimate:
    return e.scaled(1e3, "mW")


def assemble(
    labels: R.Labels,
    prof: ProfileResult,
    ssp: R.MethodSSP,
    hs: HeadlineStep,
    readings: tuple[R.Execution, R.Execution],
    fl: FlagStep,
    plan: Plan,
    analysis: AnalysisConfig,
    loi: LoiStep,
    consistency: tuple[KernelPower | None, Consistency] | None = None,
    source: SourceTerm | None = None,
    state: CardStateTerm | None = None,
) -> R.ScenarioResult:
    """The `ScenarioResult` of the steps (without truth: `truth_group` adds it); from `loi` the collection's GPU time
    (`gpu_seconds`) and the SSP stop asked again (`ssp_stop_check`); `source`: the sensor-source term of the
    absolute numbers' CIs and `state` the card's state in the headline's (`with_systematics`; comparisons, the sustained
    group's, keep theirs)."""
    hs_abs = hs
    if source is not None or state is not None:
        hs_abs, ssp = with_systematics(hs, ssp, source or SourceTerm(None), state, analysis.ci_level)
    hl, n = hs_abs.headline, prof.numbers
    stop = ssp_stop_check(loi, plan, analysis.ci_level)
    tot = prof.channels.get(TOTAL, {})
    ssp_mw = _power(tot.get("ssp"))
    tail: dict[str, Any] = {}
    if consistency is not None:
        kp, cons = consistency
        if kp is not None and kp.measurable:
            tail["steady_kernel_power"] = kp.power.scaled(W_PER_MW, "W")
        tail["steady_kernel_power_vs_ssp"] = cons.vs_ssp
        tail["consistent"] = cons.passed
    return R.ScenarioResult(
        labels=labels,
        valid=fl.valid,
        headline=R.Headline(
            power=hl.power.scaled(W_PER_MW, "W"),
            power_source=hl.source,
            energy_per_exec=hl.energy,
            exec_time=n.exec_time_ns.scaled(US_PER_NS, "µs"),
        ),
        ssp=ssp.model_copy(update={"valid": not fl.ssp_invalid_by, "invalid_by": fl.ssp_invalid_by, **tail}),
        sse=readings[0],
        interleaved=readings[1],
        sustained=sustained_group(hs, prof, ssp_mw, plan, analysis),
        throughput=throughput_group(plan_work(plan), hs_abs, prof, analysis),
        counts=R.Counts(
            ssp_runs_total=fl.counts["ssp"].total,
            ssp_runs_golden=fl.counts["ssp"].golden,
            sse_runs_total=fl.counts["sse"].total,
            sse_runs_golden=fl.counts["sse"].golden,
            ssp_lois=int(tot["ssp"].lois if "ssp" in tot else 0),
            sse_lois=int(tot["sse"].lois if "sse" in tot else 0),
            collect_gpu_s=gpu_seconds(loi.samples),
            ssp_stop=plan.ssp_stop.reason if plan.ssp_stop is not None else "fixed_count",
            ssp_stop_check=stop.reason,
            ssp_stat_ci_pct=stop.ci_pct,
        ),
        flags=fl.flags,
    )


def scenario_labels(plan: Plan, scenario: str | None, backend: str | None, prov: Provenance) -> R.Labels:
    """The plan's labels (`describe_plan`), the scenario and backend given by the caller first."""
    labels = describe_plan(plan)
    return labels.model_copy(
        update={
            "scenario": scenario or labels.scenario,
            "backend": backend or labels.backend or (prov.device.backend if prov.device is not None else None),
        }
    )


def with_truths(
    channels: Mapping[str, Mapping[str, RoleStats]], kernel: Mapping[str, KernelPower], validation: Validation
) -> tuple[dict[str, dict[str, RoleStats]], dict[str, KernelPower]]:
    """The statistic groups and kernel powers with the simulator's truth of each (mW) where it has one."""
    out = {
        ch: {
            g: st.model_copy(update={"truth_mw": validation.groups.get(ch, {}).get(g)})
            if g in validation.groups.get(ch, {})
            else st
            for g, st in per.items()
        }
        for ch, per in channels.items()
    }
    truths = validation.groups.get(TOTAL, {})
    return out, {t: k.model_copy(update={"truth_mw": truths.get(t)}) for t, k in kernel.items()}


def differentiate(
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    samples: pl.DataFrame,
    plan: Plan,
    binned: pl.DataFrame,
    clock: ClockMap,
    sensors: Mapping[str, SensorModel],
    analysis: AnalysisConfig,
    truth: pl.DataFrame | None = None,
    *,
    reading_truth: pl.DataFrame | None = None,
    max_clock_residual_us: float,
    scenario: str | None = None,
    backend: str | None = None,
    gaps: Sequence[Sequence[int]] = (),
    binning: BinningSummary | None = None,
    provenance: Provenance | None = None,
    seed: int = 0,
) -> tuple[pl.DataFrame, ScenarioSummary]:
    """LOIs and the summary of one scenario: the steps of the module docstring.

    executions / runs / samples: raw frames (`fingrav.contracts.tables.RAW`); plan: plan.json; binned: bin
    stage output; clock: the scenario's clock map; sensors: the calibrated sensor of every channel ("total"
    required); each channel's samples are shifted back by its own delay (channels without a sensor: the
    total channel's); analysis: the sweep's analysis settings; truth: simulator truth frame or None;
    reading_truth: the simulator's noise-free reading of every sample (the truth of sensor readings) or None;
    max_clock_residual_us: the clock_residual limit (µs); gaps: known sample gaps [[from_ns, to_ns], ...]
    (raw sample clock); binning: bin-stage metadata, copied into the summary.
    Returns (lois frame per `fingrav.contracts.tables.LOIS`, the typed summary.json)."""
    loi = lois_step(executions, runs, samples, plan, binned, clock, sensors, analysis)
    prof = profiles_step(loi, plan, analysis, sensors, seed)
    ssp = method_ssp(prof)
    hs = sustained_headline(executions, runs, loi, plan, clock, analysis, prof)
    grid = grid_view(loi.samples, sensors[TOTAL], loi.delay_ns)  # once: both estimators read the grid times
    kernel = kernel_powers(loi, runs, plan, grid, prof, analysis, BaseRuns(executions, clock, seed))
    readings = executions_vs_ssp(prof, kernel, analysis.min_lois, plan.predecessor_count > 0)
    cons = ssp_consistency(loi, runs, plan, grid, prof, analysis)
    fl = flag_step(
        loi, runs, binned, plan, clock, sensors, analysis, prof, hs, ssp, max_clock_residual_us, gaps, cons[1]
    )
    prov = provenance if provenance is not None else Provenance()
    labels = scenario_labels(plan, scenario, backend, prov)
    sources = collection_counter_vs_samples(runs, loi.host_execs, loi.samples, loi.delay_ns, energy_counter_of(plan))
    source = SourceTerm.of(sources, collection_mean_power_mw(runs, loi.host_execs, loi.samples, loi.delay_ns))
    state = CardStateTerm(card_state_of(plan), sensors[TOTAL].idle_mw)
    result = assemble(labels, prof, ssp, hs, readings, fl, plan, analysis, loi, cons, source, state)
    result = result.model_copy(update={"headline": result.headline.model_copy(update={"counter_vs_samples": sources})})
    validation = validation_step(truth, reading_truth, binned, plan, loi, prof, hs, readings, kernel)
    channels = prof.channels
    if validation is not None:
        widened = with_systematics(hs, ssp, source, state, analysis.ci_level)[0]
        result = result.model_copy(update={"truth": truth_group(validation, result, widened)})
        channels, kernel = with_truths(channels, kernel, validation)
    if cons[0] is not None:
        kernel = {**kernel, cons[0].target: cons[0]}
    summary = summary_of(result, prof, channels, loi, hs, fl, kernel, validation, plan, sensors, clock, binning, prov)
    logger.info(
        "differentiate %s: power %s (%s), SSP %s (%d LOIs), SSE reading %s (%d LOIs), SSE kernel power %s, "
        "reference %s, margin %s, valid=%s, flags %s",
        result.labels.scenario,
        result.headline.power,
        result.headline.power_source,
        result.ssp.power,
        result.counts.ssp_lois,
        result.sse.reading,
        result.counts.sse_lois,
        result.sse.kernel_power if result.sse.kernel_power.has_value else "not measurable",
        result.sustained.reference_power,
        "n/a" if binning is None else f"{100 * binning.margin:g} %",
        result.valid,
        ";".join(result.flags.all) or "none",
    )
    return loi.lois, summary


def summary_of(
    result: R.ScenarioResult,
    prof: ProfileResult,
    channels: Mapping[str, Mapping[str, RoleStats]],
    loi: LoiStep,
    hs: HeadlineStep,
    fl: FlagStep,
    kernel: Mapping[str, KernelPower],
    validation: Validation | None,
    plan: Plan,
    sensors: Mapping[str, SensorModel],
    clock: ClockMap,
    binning: BinningSummary | None,
    provenance: Provenance,
) -> ScenarioSummary:
    """summary.json: the result and what it rests on (profiles, the reference run, counts, sensor, clock)."""
    tot = sensors[TOTAL]
    return ScenarioSummary(
        scenario=result.labels.scenario,
        result=result,
        channels={ch: dict(per) for ch, per in channels.items()},
        clock=clock.to_summary(),
        plan=plan,
        provenance=provenance,
        sensor=SensorSummary(
            **tot.model_dump(exclude={"response"}),
            delay_correction_ns=loi.delay_ns,
            delay_correction_by_channel_ns=loi.delays or {ch: 0 for ch in sensors},
            channels=dict(sensors),
        ),
        binning=binning,
        runs=fl.counts,
        reference=hs.reference,
        gaps=fl.gaps,
        samples={"total": loi.samples.height + loi.sample_counts["rejected"], **loi.sample_counts},
        sample_phase=SamplePhase(ks_d=fl.phase_ks[0], runs=fl.phase_ks[1]),
        exec_time_mean_ns=prof.numbers.exec_time_mean_ns,
        cycle_time_mean_ns=prof.numbers.cycle_time_mean_ns,
        kernel_power=dict(kernel),
        validation=TruthGroups(
            groups=validation.groups,
            reading_groups=validation.reading_groups,
            truth_exec_energy_mj=validation.truth_exec_energy_mj,
        )
        if validation is not None
        else None,
        work=plan_work(plan),
    )
