"""The differentiate stage as a pure function: LOIs, profiles, flags and validation -> summary.json
content; and summary.csv from many summaries.

Units: frames carry ns / mW / mJ; the summary "row" reports W (`_w`), µs (`_us`), mJ (`_mj`), %.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from fingrav.analysis._common import (
    SSE_PHASE,
    TOTAL,
    ClockParams,
    PlanView,
    channel_delays,
    sensor_channels,
    total_sensor,
)
from fingrav.analysis.flags import FlagInputs, compute_flags, count_gaps, sample_phase_ks
from fingrav.analysis.loi import assign_lois, host_executions
from fingrav.analysis.profiles import compute_profiles
from fingrav.analysis.reference import reference_stats
from fingrav.analysis.validation import validate

logger = logging.getLogger(__name__)

ROW_HEAD: tuple[str, ...] = (
    "scenario",
    "kernel",
    "backend",
    "predecessor",
    "exec_time_us",
    "exec_time_ci_low_us",
    "exec_time_ci_high_us",
    "ssp_power_w",
    "ssp_power_ci_low_w",
    "ssp_power_ci_high_w",
    "sse_power_w",
    "sse_power_ci_low_w",
    "sse_power_ci_high_w",
    "sse_vs_ssp_error_pct",
    "energy_per_exec_mj",
    "energy_per_exec_ci_low_mj",
    "energy_per_exec_ci_high_mj",
    "interleaved_power_w",
    "interleaved_power_ci_low_w",
    "interleaved_power_ci_high_w",
    "interleaved_vs_ssp_pct",
)  # then ssp_<channel>_power_w for every non-total channel (sorted)
ROW_TAIL: tuple[str, ...] = ("runs_total", "runs_golden", "lois", "lois_sse", "valid", "flags")
ROW_TRUTH: tuple[str, ...] = (
    "truth_ssp_power_w",
    "ssp_error_pct",
    "truth_sse_power_w",
    "truth_energy_per_exec_mj",
    "energy_error_pct",
    "truth_interleaved_power_w",
)
# after the contract's columns (ARCHITECTURE.md "summary.csv"): the SSP cycle time (start to the next
# start) behind the energy, the SSE runs (runs_total / runs_golden count SSP runs), the reference run
ROW_EXTRA: tuple[str, ...] = (
    "cycle_time_us",
    "cycle_time_ci_low_us",
    "cycle_time_ci_high_us",
    "sse_runs_total",
    "sse_runs_golden",
    "reference_power_w",
    "reference_power_ci_low_w",
    "reference_power_ci_high_w",
    "ssp_vs_reference_pct",
    "reference_energy_power_w",
    "reference_counter_vs_samples_pct",
    "sse_vs_ssp_error_ci_low_pct",
    "sse_vs_ssp_error_ci_high_pct",
    "interleaved_vs_ssp_ci_low_pct",
    "interleaved_vs_ssp_ci_high_pct",
)
# simulator only, after ROW_EXTRA: the reference power's error against the SSP truth
ROW_TRUTH_EXTRA: tuple[str, ...] = ("reference_error_pct",)
STRING_COLUMNS = frozenset({"scenario", "kernel", "backend", "predecessor", "flags"})
INT_COLUMNS = frozenset({"runs_total", "runs_golden", "lois", "lois_sse", "sse_runs_total", "sse_runs_golden"})
BOOL_COLUMNS = frozenset({"valid"})
_CHANNEL_COL = re.compile(r"^ssp_(.+)_power_w$")
_CHANNEL_CI_COL = re.compile(r"^ssp_(.+)_power_ci_(low|high)_w$")
DEFAULT_MAX_CLOCK_RESIDUAL_US = 20.0


def channel_column(channel: str) -> str:
    """summary.csv column of a non-total channel's SSP power (W)."""
    return f"ssp_{channel}_power_w"


def _kernel_label(k: Any) -> str | None:
    """A readable label for a kernel given as a label string or a fingrav.config kernel dict."""
    if k is None:
        return None
    if isinstance(k, str):
        return k
    if isinstance(k, Mapping):
        if k.get("label"):
            return str(k["label"])
        kind = k.get("kind")
        if kind == "gemm":
            return f"gemm {k.get('m')}x{k.get('n')}x{k.get('k')} {k.get('dtype', 'bf16')}"
        if kind == "gemv":
            return f"gemv {k.get('m')}x{k.get('k')} {k.get('dtype', 'bf16')}"
        if kind in ("allreduce", "allgather") and isinstance(k.get("size_bytes"), int):
            from fingrav.config import size_label

            return f"{kind} {size_label(k['size_bytes'])} {k.get('dtype', 'bf16')}"
        return ",".join(f"{a}={b}" for a, b in sorted(k.items()))
    return str(k)


def describe_plan(plan: Mapping[str, Any]) -> dict[str, str | None]:
    """kernel / predecessor / backend / scenario labels found in plan.json (None when absent).

    Looks at plan["kernel"], plan["predecessor"] ({kernel, count}), plan["scenario"] (a name or a
    fingrav.config.Scenario dict), plan["backend"], and the collect stage's provenance record in
    plan["provenance"] (its "scenario" dict and "device" {"backend", ...})."""
    prov = plan.get("provenance") if isinstance(plan.get("provenance"), Mapping) else {}
    scen = plan.get("scenario", prov.get("scenario"))
    scen_d = scen if isinstance(scen, Mapping) else {}
    kernel = _kernel_label(plan.get("kernel_label") or plan.get("kernel") or scen_d.get("kernel"))
    pred = plan.get("predecessor", scen_d.get("predecessor"))
    if isinstance(pred, Mapping):
        lab = _kernel_label(pred.get("kernel") or pred.get("label"))
        pred_s: str | None = f"{lab} x{pred['count']}" if pred.get("count") is not None else lab
    else:
        pred_s = _kernel_label(pred)
    name = scen if isinstance(scen, str) else scen_d.get("name")
    device = prov.get("device") if isinstance(prov.get("device"), Mapping) else {}
    backend = plan.get("backend") or device.get("backend")
    return {
        "scenario": name,
        "kernel": kernel,
        "predecessor": pred_s,
        "backend": str(backend) if backend is not None else None,
    }


def _w(mw: float | None) -> float | None:
    return None if mw is None else mw / 1e3


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e3


def _pct(value: float | None, ref: float | None) -> float | None:
    """(value - ref) / ref x 100, None when either is missing or ref is 0."""
    if value is None or ref is None or ref == 0:
        return None
    return (value - ref) / ref * 100.0


def run_counts(binned: pl.DataFrame) -> dict[str, dict[str, int]]:
    """{"ssp": {"total", "golden"}, "sse": {...}}: measure runs per kind in the binned frame (no phase
    column: every run is an SSP run)."""
    is_sse = pl.col("phase").cast(pl.String) == SSE_PHASE if "phase" in binned.columns else pl.lit(False)
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
    plan: Mapping[str, Any],
    binned: pl.DataFrame,
    clock: Mapping[str, Any] | Any,
    sensor: Mapping[str, Any],
    analysis: Mapping[str, Any],
    truth: pl.DataFrame | None = None,
    *,
    scenario: str | None = None,
    backend: str | None = None,
    gaps: Sequence[Sequence[int]] = (),
    max_clock_residual_us: float | None = None,
    binning: Mapping[str, Any] | None = None,
    provenance: Mapping[str, Any] | None = None,
    seed: int = 0,
) -> tuple[pl.DataFrame, dict[str, Any]]:
    """LOIs and the summary of one scenario.

    executions / runs / samples: raw frames (rawio.SCHEMAS); plan: plan.json; binned: bin stage
    output; clock: ClockFit or its dict (offset_ns, gpu_ref_ns, drift | drift_ppm, residual_ns);
    sensor: calibrated sensor, flat {delay_ns, window_ns, lag_ns, period_ns, ...} or per channel
    ({"total": {...}, "memory": {...}}; `*_ms` keys accepted), each channel's samples are shifted
    back by its own delay (channels without an entry: the total channel's); analysis:
    AnalysisConfig dict (may also hold max_clock_residual_us); truth: simulator truth frame or None;
    gaps: known sample gaps [[from_ns, to_ns], ...] (raw sample clock); max_clock_residual_us:
    clock_residual limit (µs; None -> analysis["max_clock_residual_us"] or 20); binning: bin-stage
    metadata, copied into the summary.
    The reference run (phase "reference"), when there is one, gives the reference_* columns
    (reference.reference_stats); without one they are null.
    Returns (lois frame per loi.LOIS_SCHEMA, summary.json dict per ARCHITECTURE.md)."""
    view = PlanView.from_plan(plan)
    cp = ClockParams.from_any(clock)
    tot_sensor = total_sensor(sensor)
    if analysis.get("delay_correction", True):
        delay_ns, delays = channel_delays(sensor)
    else:
        delay_ns, delays = 0, {}
    if max_clock_residual_us is None:
        max_clock_residual_us = float(analysis.get("max_clock_residual_us") or DEFAULT_MAX_CLOCK_RESIDUAL_US)

    hx = host_executions(executions, runs, plan, cp, binned)
    lois = assign_lois(samples, hx, delays if len(delays) > 1 else delay_ns, default_delay_ns=delay_ns)
    prof = compute_profiles(lois, hx, plan, analysis, seed=seed)
    ch_stats = prof.channels
    d = prof.derived

    def stat(ch: str, g: str, key: str) -> Any:
        return ch_stats.get(ch, {}).get(g, {}).get(key)

    counts = run_counts(binned)
    runs_total, runs_golden = counts["ssp"]["total"], counts["ssp"]["golden"]
    ref = reference_stats(executions, runs, samples, plan, cp, delay_ns, float(analysis.get("ci_level", 0.95)))
    ref_mw = ref["power_mw"] if ref is not None else None
    ssp_lois = int(stat(TOTAL, "ssp", "lois") or 0)
    sse_lois = int(stat(TOTAL, "sse", "lois") or 0)
    exec_time_ns = d["exec_time_ns"]["value"]
    if exec_time_ns is None:
        exec_time_ns = view.exec_time_ns
    gap_counts = count_gaps(samples, hx, gaps, delay_ns)
    phase_ks = sample_phase_ks(samples, runs, tot_sensor.get("period_ns"))
    flags, valid = compute_flags(
        FlagInputs(
            ssp_lois=ssp_lois,
            sse_lois=sse_lois,
            exec_time_ns=exec_time_ns,
            sensor=tot_sensor,
            clock=cp,
            probe=plan.get("probe") if isinstance(plan.get("probe"), Mapping) else None,
            runs_total=runs_total,
            runs_golden=runs_golden,
            gaps_in_golden_runs=gap_counts["known_in_golden_runs"] + gap_counts["detected_in_golden_runs"],
            min_lois=int(analysis.get("min_lois", 10)),
            max_drift_ppm=float(analysis.get("max_drift_ppm", 200.0)),
            max_clock_residual_us=float(max_clock_residual_us),
            sse_runs_total=counts["sse"]["total"],
            sse_runs_golden=counts["sse"]["golden"],
            reference_unsettled=bool(ref is not None and ref["unsettled"]),
            reference_block_spread_pct=ref.get("block_spread_pct") if ref is not None else None,
            ssp_ci_mw=(stat(TOTAL, "ssp", "ci_low_mw"), stat(TOTAL, "ssp", "ci_high_mw")),
            reference_ci_mw=(ref["ci_low_mw"], ref["ci_high_mw"]) if ref is not None else (None, None),
            ssp_vs_reference_pct=_pct(stat(TOTAL, "ssp", "mean_mw"), ref["power_mw"] if ref is not None else None),
            sample_phase_ks=phase_ks,
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
        row[channel_column(ch)] = _w(stat(ch, "ssp", "mean_mw"))
    for ch in sorted(c for c in ch_stats if c != TOTAL):  # at the end of the table (summary_columns)
        row[f"ssp_{ch}_power_ci_low_w"] = _w(stat(ch, "ssp", "ci_low_mw"))
        row[f"ssp_{ch}_power_ci_high_w"] = _w(stat(ch, "ssp", "ci_high_mw"))
    row.update(
        runs_total=runs_total,
        runs_golden=runs_golden,
        lois=ssp_lois,
        lois_sse=sse_lois,
        valid=valid,
        flags=";".join(flags),
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
        for key in (*ROW_TRUTH, *ROW_TRUTH_EXTRA):
            row[key] = validation[key]
        for ch, per_group in validation["groups"].items():
            for g, v in per_group.items():
                if g in ch_stats.get(ch, {}):
                    ch_stats[ch][g]["truth_mw"] = v

    summary: dict[str, Any] = {
        "scenario": row["scenario"],
        "row": row,
        "channels": ch_stats,
        "clock": cp.to_summary(),
        "flags": flags,
        "valid": valid,
        "plan": dict(plan),
        "provenance": prov,
        "sensor": {
            **tot_sensor,
            "delay_correction_ns": delay_ns,
            "delay_correction_by_channel_ns": delays or {ch: 0 for ch in sensor_channels(sensor)},
            "channels": sensor_channels(sensor),
        },
        "binning": dict(binning) if binning is not None else None,
        "runs": counts,
        "reference": ref,
        "gaps": gap_counts,
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
    logger.info(
        "differentiate %s: SSP %.4g W (%d LOIs), SSE %.4g W (%d LOIs), reference %.4g W, valid=%s",
        row["scenario"],
        row["ssp_power_w"] or math.nan,
        ssp_lois,
        row["sse_power_w"] or math.nan,
        sse_lois,
        row["reference_power_w"] or math.nan,
        valid,
    )
    return lois, summary


def _dtype(col: str) -> pl.DataType:
    if col in STRING_COLUMNS:
        return pl.String()
    if col in INT_COLUMNS:
        return pl.Int64()
    if col in BOOL_COLUMNS:
        return pl.Boolean()
    return pl.Float64()


def summary_columns(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """The summary.csv column order for these rows: ROW_HEAD, ssp_<channel>_power_w (sorted union),
    ROW_TAIL, ROW_TRUTH when any row has truth, ROW_EXTRA, ROW_TRUTH_EXTRA when any row has
    truth, then ssp_<channel>_power_ci_{low,high}_w (sorted union)."""
    known = set(ROW_HEAD) | set(ROW_TAIL) | set(ROW_TRUTH) | set(ROW_EXTRA) | set(ROW_TRUTH_EXTRA)
    chans = sorted({k for r in rows for k in r if k not in known and _CHANNEL_COL.match(k)})
    cols = [*ROW_HEAD, *chans, *ROW_TAIL]
    truth = any(k in r for r in rows for k in ROW_TRUTH)
    if truth:
        cols += ROW_TRUTH
    cols += ROW_EXTRA
    if truth:
        cols += ROW_TRUTH_EXTRA
    # last: the CIs of the per-channel SSP powers
    return cols + sorted({k for r in rows for k in r if k not in known and _CHANNEL_CI_COL.match(k)})


def summary_table(summaries: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """summary.csv: one row per summary (its "row"; a bare row dict is accepted too), stable column
    order (summary_columns), typed
    columns (str / float64 / int64 / bool); missing values are null."""
    rows = [s["row"] if isinstance(s.get("row"), Mapping) else s for s in summaries]
    cols = summary_columns(rows)
    schema = {c: _dtype(c) for c in cols}
    data = {c: [r.get(c) for r in rows] for c in cols}
    return pl.DataFrame(data, schema=schema)
