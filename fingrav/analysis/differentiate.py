"""Differentiate (METHOD.md steps 7-9) as a pure function: LOIs, profiles, SSE vs SSP, energy, flags and
validation -> the summary.json content of one scenario on one GPU.

Units: frames carry ns / mW / mJ; the summary "row" reports W (`_w`), µs (`_us`), mJ (`_mj`), %.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from fingrav.analysis.flags import FlagInputs, compute_flags, count_gaps, sample_phase_ks
from fingrav.analysis.loi import assign_lois, host_executions
from fingrav.analysis.profiles import compute_profiles
from fingrav.analysis.reference import reference_stats
from fingrav.analysis.samples import screen_samples
from fingrav.analysis.validation import validate
from fingrav.config import AnalysisConfig, Scenario
from fingrav.contracts import summary as S
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.roles import SSE, TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import pct as _pct
from fingrav.contracts.units import us as _us
from fingrav.contracts.units import w as _w

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
    prof = compute_profiles(lois, hx, plan, analysis, seed=seed, group_delay_ns=group_delay_ns, sensors=sensors)
    ch_stats = prof.channels
    d = prof.derived

    def stat(ch: str, g: str, key: str) -> Any:
        return ch_stats.get(ch, {}).get(g, {}).get(key)

    counts = run_counts(binned)
    runs_total, runs_golden = counts["ssp"]["total"], counts["ssp"]["golden"]
    ref = reference_stats(executions, runs, samples, plan, cp, delay_ns, analysis.ci_level)
    ref_mw = ref["power_mw"] if ref is not None else None
    ssp_lois = int(stat(TOTAL, "ssp", "lois") or 0)
    sse_lois = int(stat(TOTAL, "sse", "lois") or 0)
    exec_time_ns = d["exec_time_ns"]["value"]
    if exec_time_ns is None:
        exec_time_ns = view.exec_time_ns
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
            ssp_mw=stat(TOTAL, "ssp", "mean_mw"),
            energy_mj=(
                d["energy_per_exec_mj"]["value"],
                d["energy_per_exec_mj"]["ci_low"],
                d["energy_per_exec_mj"]["ci_high"],
            ),
        )
    )

    labels = describe_plan(plan)
    prov = dict(provenance or {})
    backend = backend or labels["backend"] or (prov.get("device") or {}).get("backend")
    has_pred = view.predecessor_count > 0
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
        "ssp_power_w": _w(stat(TOTAL, "ssp", "mean_mw")),
        "ssp_power_ci_low_w": _w(stat(TOTAL, "ssp", "ci_low_mw")),
        "ssp_power_ci_high_w": _w(stat(TOTAL, "ssp", "ci_high_mw")),
        "sse_power_w": _w(stat(TOTAL, "sse", "mean_mw")),
        "sse_power_ci_low_w": _w(stat(TOTAL, "sse", "ci_low_mw")),
        "sse_power_ci_high_w": _w(stat(TOTAL, "sse", "ci_high_mw")),
        "sse_vs_ssp_error_pct": d["sse_vs_ssp_error_pct"]["value"],
        "energy_per_exec_mj": d["energy_per_exec_mj"]["value"],
        "energy_per_exec_ci_low_mj": d["energy_per_exec_mj"]["ci_low"],
        "energy_per_exec_ci_high_mj": d["energy_per_exec_mj"]["ci_high"],
        "interleaved_power_w": _w(stat(TOTAL, "first", "mean_mw")) if has_pred else None,
        "interleaved_power_ci_low_w": _w(stat(TOTAL, "first", "ci_low_mw")) if has_pred else None,
        "interleaved_power_ci_high_w": _w(stat(TOTAL, "first", "ci_high_mw")) if has_pred else None,
        "interleaved_vs_ssp_pct": d["interleaved_vs_ssp_pct"]["value"] if has_pred else None,
        "sse_vs_ssp_error_ci_low_pct": d["sse_vs_ssp_error_pct"]["ci_low"],
        "sse_vs_ssp_error_ci_high_pct": d["sse_vs_ssp_error_pct"]["ci_high"],
        "interleaved_vs_ssp_ci_low_pct": d["interleaved_vs_ssp_pct"]["ci_low"] if has_pred else None,
        "interleaved_vs_ssp_ci_high_pct": d["interleaved_vs_ssp_pct"]["ci_high"] if has_pred else None,
    }
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

    validation = None
    if truth is not None:
        validation = validate(
            truth,
            binned,
            plan,
            ssp_power_mw=stat(TOTAL, "ssp", "mean_mw"),
            sse_power_mw=stat(TOTAL, "sse", "mean_mw"),
            energy_per_exec_mj=d["energy_per_exec_mj"]["value"],
            interleaved_power_mw=stat(TOTAL, "first", "mean_mw") if has_pred else None,
            host_execs=hx,
            reference_power_mw=ref_mw,
        )
        for key in (*S.TRUTH, *S.TRUTH_EXTRA):
            row[key] = validation[key]
        for ch, per_group in validation["groups"].items():
            for g, v in per_group.items():
                if g in ch_stats.get(ch, {}):
                    ch_stats[ch][g]["truth_mw"] = v

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
        "sse_vs_ssp_error_pct": d["sse_vs_ssp_error_pct"],
        "interleaved_vs_ssp_pct": d["interleaved_vs_ssp_pct"],
        "validation": validation,
    }

    def watts(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.4g} W"

    logger.info(
        "differentiate %s: SSP %s (%d LOIs), SSE reading %s (%d LOIs), reference %s, margin %s, valid=%s, flags %s",
        row["scenario"],
        watts(row["ssp_power_w"]),
        ssp_lois,
        watts(row["sse_power_w"]),
        sse_lois,
        watts(row["reference_power_w"]),
        "n/a" if not binning else f"{100 * float(binning.get('margin', 0.0)):g} %",
        valid,
        ";".join(flags) or "none",
    )
    return lois, ScenarioSummary.model_validate(summary)
