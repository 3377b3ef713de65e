"""Differentiate (METHOD.md steps 7-9) as a pure function: LOIs, profiles, SSE vs SSP, energy, flags and
validation -> the summary.json content of one scenario on one GPU.

Units: frames carry ns / mW / mJ; the summary "row" reports W (`_w`), µs (`_us`), mJ (`_mj`), %.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis.flags import FlagInputs, compute_flags, count_gaps, sample_phase_ks
from fingrav.analysis.kernel_power import estimate_kernel_power, target_samples
from fingrav.analysis.loi import assign_lois, host_executions
from fingrav.analysis.profiles import compute_profiles
from fingrav.analysis.reference import reference_stats
from fingrav.analysis.samples import screen_samples
from fingrav.analysis.sustained import Headline, headline
from fingrav.analysis.throughput import row_columns, throughput
from fingrav.analysis.validation import validate
from fingrav.config import AnalysisConfig, Scenario
from fingrav.contracts import summary as S
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import KernelPowerEstimate, ScenarioSummary
from fingrav.contracts.roles import SSE, TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import MW_PER_W
from fingrav.contracts.units import pct as _pct
from fingrav.contracts.units import us as _us
from fingrav.contracts.units import w as _w
from fingrav.contracts.work import Work

logger = logging.getLogger(__name__)


def describe_plan(plan: Plan) -> dict[str, str | None]:
    """scenario / kernel / predecessor / backend labels from the collect stage's provenance record in plan.json
    (its "scenario", a `fingrav.config.Scenario`, and "device" {"backend", ...}); None when absent."""
    prov = plan.provenance
    scen = prov.get("scenario")
    device = prov.get("device") if isinstance(prov.get("device"), dict) else {}
    backend = device.get("backend")
    out: dict[str, str | None] = {"scenario": None, "kernel": None, "predecessor": None, "backend": None}
    out["backend"] = str(backend) if backend is not None else None
    if isinstance(scen, dict):
        sc = Scenario.model_validate(scen)
        out["scenario"] = sc.name
        out["kernel"] = sc.kernel.label()
        if sc.predecessor is not None:
            out["predecessor"] = f"{sc.predecessor.kernel.label()} x{sc.predecessor.count}"
    return out


def plan_work(plan: Plan) -> Work | None:
    """The measured kernel's work per execution (`fingrav.contracts.work`), from the scenario in plan.json's
    provenance; None when unknown (no scenario recorded, a collective, a callable that declares none)."""
    scen = plan.provenance.get("scenario")
    if not isinstance(scen, dict):
        return None
    return Scenario.model_validate(scen).kernel.work()


def _mw_of(watts: float | None) -> float | None:
    return None if watts is None else watts * MW_PER_W


def sustained_columns(
    hl: Headline,
    ref: Mapping[str, Any] | None,
    burst_mw: float | None,
    burst_lo_mw: float | None,
    burst_hi_mw: float | None,
    burst_cycle_ns: tuple[float | None, float | None, float | None],
    max_ci_pct: float,
    plan: Plan | None = None,
) -> dict[str, Any]:
    """The `contracts.summary.SUSTAINED` columns: the headline's source; the burst SSP (the FinGraV SSP of the
    short stamped runs after idle) and how far it is from the sustained power; the uninstrumented cycle and what
    the stamps add to it (%; burst_cycle_ns: the stamped SSP cycle's value, CI low, CI high; the uninstrumented one
    is timed over the whole run by two stamps, exact to their resolution); the sustained run's length and the
    length a CI of ±max_ci_pct would take (s: the half-width shrinks as 1 / sqrt(time)); why the adaptive run
    stopped (plan.json `reference_stop`); what the stamps do to the power (the burst SSP vs the reference run's
    uninstrumented power at the same time after idle, before the first clamp: `analysis.reference.early_power`);
    and the limit cycle (`analysis.sustained.LimitCycle`; W, ms, %). Differences in % with CIs by interval
    arithmetic (`vs_ssp`)."""
    out: dict[str, Any] = dict.fromkeys(S.SUSTAINED)
    out.update(
        ssp_source=hl.source,
        burst_power_w=_w(burst_mw),
        burst_power_ci_low_w=_w(burst_lo_mw),
        burst_power_ci_high_w=_w(burst_hi_mw),
    )
    if hl.source == "burst":
        return out
    (
        out["burst_vs_sustained_pct"],
        out["burst_vs_sustained_ci_low_pct"],
        out["burst_vs_sustained_ci_high_pct"],
    ) = vs_ssp(burst_mw, burst_lo_mw, burst_hi_mw, hl.power_mw, (hl.ci_low_mw, hl.ci_high_mw))
    # GPU time: the sustained run's, and what a CI of ±max_ci_pct would need (the half-width shrinks as 1 / sqrt(time))
    busy_s = float((ref or {}).get("busy_ns") or 0.0) / 1e9
    out["sustained_run_s"] = busy_s or None
    if busy_s and hl.power_mw and hl.ci_low_mw is not None and hl.ci_high_mw is not None:
        half_pct = 50.0 * (hl.ci_high_mw - hl.ci_low_mw) / hl.power_mw
        out["sustained_run_s_for_max_ci"] = busy_s * (half_pct / max_ci_pct) ** 2
    out["sustained_cycle_time_us"] = _us(hl.cycle_ns)
    stop = plan.reference_stop if plan is not None else None
    out["sustained_stop"] = stop.get("reason") if stop else ("fixed_length" if ref else None)
    if hl.source == "sustained" and burst_cycle_ns[0] and hl.cycle_ns:
        (
            out["instrumentation_cycle_pct"],
            out["instrumentation_cycle_ci_low_pct"],
            out["instrumentation_cycle_ci_high_pct"],
        ) = vs_ssp(*burst_cycle_ns, hl.cycle_ns, (hl.cycle_ns, hl.cycle_ns))
    dr = (ref or {}).get("drift")
    if dr is not None and not (ref or {}).get("limit_cycle"):
        out["sustained_drift_pct"] = float(dr["change_pct"])
    early = (ref or {}).get("early")
    if hl.source == "sustained" and early:
        out["unstamped_burst_power_w"] = _w(early["power_mw"])
        out["unstamped_burst_power_ci_low_w"] = _w(early["ci_low_mw"])
        out["unstamped_burst_power_ci_high_w"] = _w(early["ci_high_mw"])
        pct = vs_ssp(burst_mw, burst_lo_mw, burst_hi_mw, early["power_mw"], (early["ci_low_mw"], early["ci_high_mw"]))
        out["instrumentation_power_pct"], out["instrumentation_power_ci_low_pct"] = pct[0], pct[1]
        out["instrumentation_power_ci_high_pct"] = pct[2]
    lc = (ref or {}).get("limit_cycle")
    if lc:
        out["limit_cycles"] = int(lc["cycles"])
        for key, name, scale in (
            ("period_ns", "limit_cycle_period", "ms"),
            ("duty", "limit_cycle_duty", "pct"),
            ("high_mw", "limit_cycle_high", "w"),
            ("low_mw", "limit_cycle_low", "w"),
        ):
            conv = {"ms": lambda v: v / 1e6, "pct": lambda v: v * 100.0, "w": lambda v: v / 1e3}[scale]
            for part, col in (("value", f"{name}_{scale}"), ("ci_low", f"{name}_ci_low_{scale}"),
                              ("ci_high", f"{name}_ci_high_{scale}")):  # fmt: skip
                v = lc[key].get(part)
                out[col] = conv(float(v)) if v is not None else None
    return out


def gpu_seconds(samples: pl.DataFrame) -> float | None:
    """How long the scenario's collection held the GPU (s): its power samples' span, from the start of sampling
    (before the timing run) to its end (after the last run), idle waits included."""
    if samples.height < 2:
        return None
    t = samples["t_ns"]
    return float(t.max() - t.min()) / 1e9


def vs_ssp(
    value_mw: float | None,
    lo_mw: float | None,
    hi_mw: float | None,
    ssp_mw: float | None,
    ssp_ci_mw: tuple[float | None, float | None],
) -> tuple[float | None, float | None, float | None]:
    """(value - SSP) / SSP in % with a conservative CI from the two intervals (interval arithmetic: the
    kernel-power estimate and the SSP have no shared replicates once their systematic parts are added)."""
    if value_mw is None or not ssp_mw:
        return None, None, None
    v = (value_mw - ssp_mw) / ssp_mw * 100.0
    s_lo, s_hi = ssp_ci_mw
    if lo_mw is None or hi_mw is None or s_lo is None or s_hi is None or s_lo <= 0:
        return v, None, None
    return v, (lo_mw / s_hi - 1.0) * 100.0, (hi_mw / s_lo - 1.0) * 100.0


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


def run_counts(binned: pl.DataFrame) -> dict[str, dict[str, int]]:
    """{"ssp": {"total", "golden"}, "sse": {...}}: measure runs per kind in the binned frame (no phase
    column: every run is an SSP run)."""
    is_sse = pl.col("phase").cast(pl.String) == SSE if "phase" in binned.columns else pl.lit(False)
    c = binned.select(
        ssp_total=(~is_sse).sum(),
        ssp_golden=(~is_sse & pl.col("golden")).sum(),
        sse_total=is_sse.sum(),
        sse_golden=(is_sse & pl.col("golden")).sum(),
    ).row(0, named=True)
    return {k: {"total": int(c[f"{k}_total"] or 0), "golden": int(c[f"{k}_golden"] or 0)} for k in ("ssp", "sse")}


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
    binning: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> tuple[pl.DataFrame, ScenarioSummary]:
    """LOIs and the summary of one scenario.

    executions / runs / samples: raw frames (`fingrav.contracts.tables.RAW`); plan: plan.json; binned: bin
    stage output; clock: the scenario's clock map; sensors: the calibrated sensor of every channel ("total"
    required); each channel's samples are shifted back by its own delay (channels without a sensor: the
    total channel's); analysis: the sweep's analysis settings; truth: simulator truth frame or None;
    reading_truth: the simulator's noise-free reading of every sample (the truth of sensor readings) or None;
    max_clock_residual_us: the clock_residual limit (µs); gaps: known sample gaps [[from_ns, to_ns], ...]
    (raw sample clock); binning: bin-stage metadata, copied into the summary.
    The reference run (phase "reference"), when there is one, gives the reference_* columns
    (reference.reference_stats); without one they are null.
    Returns (lois frame per `fingrav.contracts.tables.LOIS`, the typed summary.json)."""
    view = plan
    cp = clock
    tot_sensor = sensors[TOTAL]
    if analysis.delay_correction:
        delays = {ch: int(round(float(s.delay_ns or 0.0))) for ch, s in sensors.items()}
        delay_ns = delays[TOTAL]
    else:
        delay_ns, delays = 0, {}

    samples, sample_counts = screen_samples(samples)
    hx = host_executions(executions, runs, plan, cp, binned)
    lois = assign_lois(samples, hx, delays if len(delays) > 1 else delay_ns, default_delay_ns=delay_ns)
    group_delay_ns = float(tot_sensor.window_ns or 0.0) / 2.0 + float(tot_sensor.lag_ns or 0.0)
    ssp_lois = centroid_lois(samples, hx, plan, sensors, delays, delay_ns) if analysis.delay_correction else None
    prof = compute_profiles(
        lois, hx, plan, analysis, seed=seed, group_delay_ns=group_delay_ns, sensors=sensors, ssp_lois=ssp_lois
    )
    ch_stats = prof.channels
    d = prof.derived

    def stat(ch: str, g: str, key: str) -> Any:
        return ch_stats.get(ch, {}).get(g, {}).get(key)

    # the SSE's (and the interleaved execution's) kernel power through the sensor model, next to the readings
    has_pred = view.predecessor_count > 0
    kernel: dict[str, KernelPowerEstimate] = {}
    if prof.boot is not None and prof.golden_runs.size:
        for target in ("sse", "first") if has_pred else ("sse",):
            kernel[target] = estimate_kernel_power(
                target_samples(samples, hx, runs, plan, tot_sensor, delay_ns, target),
                tot_sensor,
                prof.golden_runs,
                prof.boot.counts,
                analysis.ci_level,
                target,
                analysis.kernel_power_max_ci_pct,
                min_seen=float(analysis.min_lois),
            )
    ssp_mw_point = stat(TOTAL, "ssp", "mean_mw")
    ssp_ci = (stat(TOTAL, "ssp", "ci_low_mw"), stat(TOTAL, "ssp", "ci_high_mw"))

    def kernel_cols(target: str, prefix: str) -> dict[str, float | None]:
        k = kernel.get(target)
        ok = k is not None and k.measurable
        vs = vs_ssp(k.value_mw, k.ci_low_mw, k.ci_high_mw, ssp_mw_point, ssp_ci) if ok else (None, None, None)
        return {
            f"{prefix}_kernel_power_w": _w(k.value_mw) if ok else None,
            f"{prefix}_kernel_power_ci_low_w": _w(k.ci_low_mw) if ok else None,
            f"{prefix}_kernel_power_ci_high_w": _w(k.ci_high_mw) if ok else None,
            f"{prefix}_kernel_vs_ssp_pct": vs[0],
            f"{prefix}_kernel_vs_ssp_ci_low_pct": vs[1],
            f"{prefix}_kernel_vs_ssp_ci_high_pct": vs[2],
        }

    counts = run_counts(binned)
    runs_total, runs_golden = counts["ssp"]["total"], counts["ssp"]["golden"]
    ref = reference_stats(executions, runs, samples, plan, cp, delay_ns, analysis.ci_level)
    ref_mw = ref["power_mw"] if ref is not None else None
    ssp_lois = int(stat(TOTAL, "ssp", "lois") or 0)
    sse_lois = int(stat(TOTAL, "sse", "lois") or 0)
    exec_time_ns = d["exec_time_ns"]["value"]
    if exec_time_ns is None:
        exec_time_ns = view.exec_time_ns
    # the headline: sustained (reference run) where there is one, else the burst SSP of the short runs
    hl = headline(
        ref,
        (stat(TOTAL, "ssp", "mean_mw"), stat(TOTAL, "ssp", "ci_low_mw"), stat(TOTAL, "ssp", "ci_high_mw")),
        d["cycle_time_ns"]["value"],
        (d["energy_per_exec_mj"]["value"], d["energy_per_exec_mj"]["ci_low"], d["energy_per_exec_mj"]["ci_high"]),
    )
    gap_counts = count_gaps(samples, hx, gaps, delay_ns)
    phase_ks = sample_phase_ks(samples, runs, tot_sensor.period_ns)
    flags, valid = compute_flags(
        FlagInputs(
            ssp_lois=ssp_lois,
            sse_lois=sse_lois,
            exec_time_ns=exec_time_ns,
            sensor=tot_sensor,
            clock=cp,
            probe=plan.probe,
            runs_total=runs_total,
            runs_golden=runs_golden,
            gaps_in_golden_runs=gap_counts["known_in_golden_runs"] + gap_counts["detected_in_golden_runs"],
            min_lois=analysis.min_lois,
            max_drift_ppm=analysis.max_drift_ppm,
            max_clock_residual_us=float(max_clock_residual_us),
            sse_runs_total=counts["sse"]["total"],
            sse_runs_golden=counts["sse"]["golden"],
            reference_unsettled=bool(ref is not None and ref["unsettled"]),
            reference_block_spread_pct=ref.get("block_spread_pct") if ref is not None else None,
            ssp_ci_mw=(stat(TOTAL, "ssp", "ci_low_mw"), stat(TOTAL, "ssp", "ci_high_mw")),
            reference_ci_mw=(ref["ci_low_mw"], ref["ci_high_mw"]) if ref is not None else (None, None),
            ssp_vs_reference_pct=_pct(stat(TOTAL, "ssp", "mean_mw"), ref["power_mw"] if ref is not None else None),
            sample_phase_ks=phase_ks,
            samples_rejected=sample_counts["rejected"],
            tail_unsettled=bool(d.get("tail_unsettled")),
            max_ci_pct=analysis.max_ci_pct,
            headline_source=hl.source,
            reference_drifting=bool(ref is not None and ref.get("drifting") and not ref.get("limit_cycle")),
            ssp_mw=hl.power_mw,
            headline_ci_mw=(hl.ci_low_mw, hl.ci_high_mw),
            energy_mj=(hl.energy_mj, hl.energy_ci_low_mj, hl.energy_ci_high_mj),
        )
    )

    labels = describe_plan(plan)
    prov = dict(provenance or {})
    backend = backend or labels["backend"] or (prov.get("device") or {}).get("backend")
    row: dict[str, Any] = {
        "scenario": scenario or labels["scenario"],
        "kernel": labels["kernel"],
        "backend": backend,
        "predecessor": labels["predecessor"],
        "exec_time_us": _us(d["exec_time_ns"]["value"]),
        "exec_time_ci_low_us": _us(d["exec_time_ns"]["ci_low"]),
        "exec_time_ci_high_us": _us(d["exec_time_ns"]["ci_high"]),
        "cycle_time_us": _us(d["cycle_time_ns"]["value"]),
        "cycle_time_ci_low_us": _us(d["cycle_time_ns"]["ci_low"]),
        "cycle_time_ci_high_us": _us(d["cycle_time_ns"]["ci_high"]),
        "ssp_power_w": _w(hl.power_mw),
        "ssp_power_ci_low_w": _w(hl.ci_low_mw),
        "ssp_power_ci_high_w": _w(hl.ci_high_mw),
        "sse_reading_w": _w(stat(TOTAL, "sse", "mean_mw")),
        "sse_reading_ci_low_w": _w(stat(TOTAL, "sse", "ci_low_mw")),
        "sse_reading_ci_high_w": _w(stat(TOTAL, "sse", "ci_high_mw")),
        "sse_reading_vs_ssp_pct": d["sse_reading_vs_ssp_pct"]["value"],
        "energy_per_exec_mj": hl.energy_mj,
        "energy_per_exec_ci_low_mj": hl.energy_ci_low_mj,
        "energy_per_exec_ci_high_mj": hl.energy_ci_high_mj,
        "interleaved_reading_w": _w(stat(TOTAL, "first", "mean_mw")) if has_pred else None,
        "interleaved_reading_ci_low_w": _w(stat(TOTAL, "first", "ci_low_mw")) if has_pred else None,
        "interleaved_reading_ci_high_w": _w(stat(TOTAL, "first", "ci_high_mw")) if has_pred else None,
        "interleaved_reading_vs_ssp_pct": d["interleaved_reading_vs_ssp_pct"]["value"] if has_pred else None,
        "sse_reading_vs_ssp_ci_low_pct": d["sse_reading_vs_ssp_pct"]["ci_low"],
        "sse_reading_vs_ssp_ci_high_pct": d["sse_reading_vs_ssp_pct"]["ci_high"],
        "interleaved_reading_vs_ssp_ci_low_pct": d["interleaved_reading_vs_ssp_pct"]["ci_low"] if has_pred else None,
        "interleaved_reading_vs_ssp_ci_high_pct": d["interleaved_reading_vs_ssp_pct"]["ci_high"] if has_pred else None,
        **kernel_cols("sse", "sse"),
        **kernel_cols("first", "interleaved"),
    }
    # a reading from fewer than min_lois LOIs is not measurable (too_few_lois_sse; the report says so): no number
    for prefix, group in (("sse", "sse"), ("interleaved", "first")):
        if int(stat(TOTAL, group, "lois") or 0) < analysis.min_lois:
            for suffix in ("_w", "_ci_low_w", "_ci_high_w", "_vs_ssp_pct", "_vs_ssp_ci_low_pct", "_vs_ssp_ci_high_pct"):
                row[f"{prefix}_reading{suffix}"] = None
    for ch in sorted(c for c in ch_stats if c != TOTAL):
        row[S.channel_column(ch)] = _w(stat(ch, "ssp", "mean_mw"))
    for ch in sorted(c for c in ch_stats if c != TOTAL):  # at the end of the table (summary_columns)
        row[f"ssp_{ch}_power_ci_low_w"] = _w(stat(ch, "ssp", "ci_low_mw"))
        row[f"ssp_{ch}_power_ci_high_w"] = _w(stat(ch, "ssp", "ci_high_mw"))
    row.update(
        runs_total=runs_total,
        runs_golden=runs_golden,
        lois=ssp_lois,
        lois_sse=sse_lois,
        valid=valid,
        flags=S.join_flags(flags),
    )
    ssp_mw = stat(TOTAL, "ssp", "mean_mw")
    ref_energy_mw = ref["energy_power_mw"] if ref is not None else None
    row.update(
        sse_runs_total=counts["sse"]["total"],
        sse_runs_golden=counts["sse"]["golden"],
        reference_power_w=_w(ref_mw),
        reference_power_ci_low_w=_w(ref["ci_low_mw"]) if ref is not None else None,
        reference_power_ci_high_w=_w(ref["ci_high_mw"]) if ref is not None else None,
        ssp_vs_reference_pct=_pct(ssp_mw, ref_mw),
        reference_energy_power_w=_w(ref_energy_mw),
        reference_counter_vs_samples_pct=ref["counter_vs_samples_pct"] if ref is not None else None,
    )
    row.update(sustained_columns(hl, ref, stat(TOTAL, "ssp", "mean_mw"), stat(TOTAL, "ssp", "ci_low_mw"),
                                 stat(TOTAL, "ssp", "ci_high_mw"),
                                 tuple(d["cycle_time_ns"][k] for k in ("value", "ci_low", "ci_high")),
                                 analysis.max_ci_pct, plan))  # fmt: skip
    row["collect_gpu_s"] = gpu_seconds(samples)
    work = plan_work(plan)
    if hl.source == "burst":  # rates over the stamped SSP cycle, efficiencies from the burst energy
        rates = throughput(
            work, d["cycle_time_mean_ns"], prof.cycle_replicates, d["energy_per_exec_mj"], analysis.ci_level
        )
    else:  # as users run it: the uninstrumented sustained cycle (two GPU stamps over the whole run) and energy
        cyc = np.array([hl.cycle_ns]) if hl.cycle_ns else None
        energy = {"value": hl.energy_mj, "ci_low": hl.energy_ci_low_mj, "ci_high": hl.energy_ci_high_mj}
        rates = throughput(work, hl.cycle_ns, cyc, energy, analysis.ci_level)
    row.update(row_columns(work, rates))

    validation = None
    if truth is not None:
        validation = validate(
            truth,
            binned,
            plan,
            ssp_power_mw=hl.power_mw,
            sse_reading_mw=_mw_of(row["sse_reading_w"]),
            energy_per_exec_mj=hl.energy_mj,
            interleaved_reading_mw=_mw_of(row["interleaved_reading_w"]),
            host_execs=hx,
            reference_power_mw=ref_mw,
            sse_kernel_mw=kernel["sse"].value_mw if "sse" in kernel else None,
            interleaved_kernel_mw=kernel["first"].value_mw if "first" in kernel else None,
            reading_truth=reading_truth,
            lois=lois,
            delay_ns=delay_ns,
            burst_power_mw=stat(TOTAL, "ssp", "mean_mw"),
            sustained_run=int(ref["run"]) if ref is not None and hl.source != "burst" else None,
        )
        for key in (*S.TRUTH, *S.TRUTH_EXTRA, *S.TRUTH_SUSTAINED):
            row[key] = validation[key]
        for ch, per_group in validation["groups"].items():
            for g, v in per_group.items():
                if g in ch_stats.get(ch, {}):
                    ch_stats[ch][g]["truth_mw"] = v
        for target, k in kernel.items():
            kernel[target] = k.model_copy(update={"truth_mw": validation["groups"].get(TOTAL, {}).get(target)})

    summary = {
        "scenario": row["scenario"],
        "row": row,
        "channels": ch_stats,
        "clock": cp.to_summary(),
        "flags": flags,
        "valid": valid,
        "plan": plan.to_json(),
        "provenance": prov,
        "sensor": {
            **tot_sensor.model_dump(mode="json", exclude={"response"}),
            "delay_correction_ns": delay_ns,
            "delay_correction_by_channel_ns": delays or {ch: 0 for ch in sensors},
            "channels": {ch: s.model_dump(mode="json", exclude={"response"}) for ch, s in sensors.items()},
        },
        "binning": dict(binning) if binning is not None else None,
        "runs": counts,
        "reference": ref,
        "gaps": gap_counts,
        "samples": {"total": samples.height + sample_counts["rejected"], **sample_counts},
        "sample_phase": {
            "ks_d": phase_ks[0],
            "runs": phase_ks[1],
            "note": "first sample after each run start, as a fraction of the sensor period, vs uniform",
        },
        "exec_time_ns": d["exec_time_ns"],
        "exec_time_mean_ns": d["exec_time_mean_ns"],
        "cycle_time_ns": d["cycle_time_ns"],
        "cycle_time_mean_ns": d["cycle_time_mean_ns"],
        "energy_per_exec_mj": d["energy_per_exec_mj"],
        "sse_reading_vs_ssp_pct": d["sse_reading_vs_ssp_pct"],
        "interleaved_reading_vs_ssp_pct": d["interleaved_reading_vs_ssp_pct"],
        "kernel_power": kernel,
        "validation": validation,
        "work": work,
        "throughput": rates,
    }

    def watts(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g} W"

    logger.info(
        "differentiate %s: SSP %s (%d LOIs), SSE reading %s (%d LOIs), SSE kernel power %s, reference %s, "
        "margin %s, valid=%s, flags %s",
        row["scenario"],
        watts(row["ssp_power_w"]),
        ssp_lois,
        watts(row["sse_reading_w"]),
        sse_lois,
        watts(row["sse_kernel_power_w"]) if row["sse_kernel_power_w"] is not None else "not measurable",
        watts(row["reference_power_w"]),
        "n/a" if not binning else f"{100 * float(binning.get('margin', 0.0)):g} %",
        valid,
        ";".join(flags) or "none",
    )
    return lois, ScenarioSummary.model_validate(summary)
