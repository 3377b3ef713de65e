"""Tests of the report stage on a small synthetic sweep that follows docs/ARCHITECTURE.md's contracts.

`make_sweep` writes what calibrate, collect, bin and differentiate would, where `fingrav.layout.SweepLayout`
puts it: calibration/gpu0.json, raw/gpu0/<scenario>/{executions,runs,clock,samples}.parquet + plan.json,
binned/gpu0/<scenario>.parquet and profiles/gpu0/<scenario>/{lois.parquet,summary.json}. The power is a
step response through a first-order lag sampled every millisecond, so the figures look like the real thing.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import struct
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq
import pytest

from fingrav import rawio
from fingrav.contracts import result as RM
from fingrav.contracts import summary as S
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import RunCount, ScenarioSummary
from fingrav.contracts.result import Estimate
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.replay_check import replayed_columns
from fingrav.report import build_report, summary_frame
from fingrav.report.build import PNG_KEYS
from fingrav.report.figures import binning_chart, pick_run, reference_data, sse_error_data, validation_data
from fingrav.report.lazy import unpack_spec
from fingrav.report.load import ScenarioData, fair_quotas, load_scenario, load_scenarios, subsample
from fingrav.report.table import metrics_frame

logger = logging.getLogger(__name__)

OFFSET_NS = 2_500_000  # GPU clock is 2.5 ms behind the host clock
DRIFT = 20e-6
PERIOD_NS = 500_000
DELAY_NS = 500_000
LAG_NS = 300_000
T0_NS = 1_700_000_000_000_000_000
GPU_REF_NS = T0_NS - OFFSET_NS  # the calibration's reference point, on the GPU clock


@dataclass
class Spec:
    """One synthetic scenario."""

    name: str
    kernel: str
    exec_ns: int
    ssp_mw: float
    channels: dict[str, float] = field(default_factory=lambda: {"total": 1.0})
    pred: tuple[str, int, int, float] | None = None  # (label, count, exec_ns, power_mw)
    runs: int = 36
    sse_runs: int = 24
    reference_ms: float = 0.0  # back-to-back reference run length (0: none)
    flags: tuple[str, ...] = ()
    valid: bool = True


def make_plan(**kw: Any) -> Plan:
    """A plan like the collect stage writes (3 warm-ups, SSP tail 8..11, 2 trailing executions); `kw` overrides."""
    fields: dict[str, Any] = {
        "exec_time_ns": 100_000,
        "cycle_ns": 100_000,
        "warmups": 3,
        "sse_index": 3,
        "ssp_index": 8,
        "tail": 4,
        "trailing": 2,
        "executions_per_run": 14,
        "runs": 36,
        "sse_runs": 24,
        "sse_executions_per_run": 4,
        "idle_ns": 15_000_000,
        "delay_max_ns": PERIOD_NS,
        "lois_wanted": 30,
        "sensor": {
            "period_ns": PERIOD_NS,
            "delay_ns": DELAY_NS,
            "window_ns": 1_000_000,
            "lag_ns": LAG_NS,
            "settle_ns": 10_000_000,
        },
    }
    return Plan.model_validate({**fields, **kw})


def summary_of(
    name: str,
    row: dict[str, Any],
    channels: dict[str, Any] | None = None,
    *,
    plan: Plan | None = None,
    flags: Sequence[str] = (),
    valid: bool = True,
    **fields: Any,
) -> ScenarioSummary:
    """A summary.json model with `row` and `channels` ({channel: {role: RoleStats fields}}); everything else
    empty unless given in `fields`."""
    none = Estimate()
    base: dict[str, Any] = {
        "clock": {},
        "provenance": {},
        "sensor": {},
        "runs": {},
        "gaps": {},
        "samples": {},
        "sample_phase": {},
        "exec_time_ns": none,
        "cycle_time_ns": none,
        "energy_per_exec_mj": none,
        "sse_reading_vs_ssp_pct": none,
        "interleaved_reading_vs_ssp_pct": none,
    }
    return ScenarioSummary(
        scenario=name,
        row=row,
        channels=channels or {},
        flags=list(flags),
        valid=valid,
        plan=plan or make_plan(),
        **{**base, **fields},
    )


def _polyfit(x: np.ndarray, y: np.ndarray) -> list[float]:
    if x.size < 6:
        return []
    return [float(c) for c in np.polyfit(x, y, 4)]


def _ci(values: np.ndarray, runs: np.ndarray) -> tuple[float, float, float]:
    """Mean and a normal-approximation CI over run means (stands in for the cluster bootstrap)."""
    mean = float(values.mean())
    per_run = pl.DataFrame({"r": runs, "v": values}).group_by("r").agg(pl.col("v").mean())["v"].to_numpy()
    se = float(per_run.std(ddof=1) / np.sqrt(per_run.size)) if per_run.size > 1 else 0.0
    return mean, mean - 1.96 * se, mean + 1.96 * se


def _write_parquet_with_meta(df: pl.DataFrame, path: Path, meta: dict[str, Any]) -> None:
    table = df.to_arrow()
    table = table.replace_schema_metadata({rawio.META_KEY: rawio.dumps(meta).encode()})
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _lag(level: np.ndarray, dt: int) -> np.ndarray:
    """A first-order lag (time constant LAG_NS) on a level sampled every dt ns."""
    filt = np.empty_like(level)
    acc = level[0]
    a = dt / LAG_NS
    for j, x in enumerate(level):
        acc += (x - acc) * a
        filt[j] = acc
    return filt


def make_scenario(sweep: SweepLayout, spec: Spec, *, truth: bool, backend: str, seed: int) -> None:
    """Write every file of one scenario (GPU 0): SSP runs (ids 0..runs-1), SSE runs (next ids), the reference
    run (last id, when spec.reference_ms), in that time order. SSP runs end with 2 trailing executions."""
    rng = np.random.default_rng(seed)
    warmups, ssp_index, tail, trailing = 3, 8, 4, 2
    n_main = ssp_index + tail + trailing
    pred_count = spec.pred[1] if spec.pred else 0
    pred_ns = spec.pred[2] if spec.pred else 0
    idle_ns, spacing_ns = 15_000_000, 40_000_000
    dt = 10_000  # 10 µs simulation grid
    t_stable_ns = 8_000_000
    n_ref = int(spec.reference_ms * 1e6 // spec.exec_ns) if spec.reference_ms else 0

    ex_rows: dict[str, list[Any]] = {k: [] for k in ("run", "segment", "exec_index", "gpu_start_ns", "gpu_end_ns")}
    run_rows: dict[str, list[Any]] = {
        k: [] for k in ("run", "phase", "host_start_ns", "delay_ns", "idle_ns", "energy_start_mj", "energy_end_mj")
    }
    s_t: list[np.ndarray] = []
    s_p: list[np.ndarray] = []
    host_execs = []  # (run, phase, segment, index, role, start, end)
    truth_rows = []  # (run, segment, index, power_mw, duration_ns)
    bin_time = {}
    kinds = [(r, "ssp") for r in range(spec.runs)] + [(spec.runs + k, "sse") for k in range(spec.sse_runs)]
    if n_ref:
        kinds.append((spec.runs + spec.sse_runs, "reference"))
    begin = T0_NS
    energy = 0.0
    ref_info: dict[str, Any] = {}

    def gpu(h: int) -> int:
        return int(round((h - OFFSET_NS - GPU_REF_NS) / (1 + DRIFT))) + GPU_REF_NS

    for r, kind in kinds:
        delay = int(rng.integers(0, PERIOD_NS)) if kind != "reference" else 0
        start = begin + idle_ns + delay
        span_ns = spacing_ns if kind != "reference" else idle_ns + n_ref * spec.exec_ns + 25_000_000
        grid = np.arange(begin, begin + span_ns, dt, dtype=np.int64)
        level = np.full(grid.size, 80_000.0)
        if kind == "reference":
            end = start + n_ref * spec.exec_ns
            level[(grid >= start) & (grid < end)] = spec.ssp_mw
            level[(grid >= start) & (grid < start + 5_000_000)] = spec.ssp_mw * 1.3  # initial transient
            for i, (t0, t1) in ((0, (start, start + spec.exec_ns)), (n_ref - 1, (end - spec.exec_ns, end))):
                for k, v in zip(ex_rows, (r, "main", i, gpu(t0), gpu(t1)), strict=True):
                    ex_rows[k].append(v)
            inside = (grid >= start) & (grid < end)
            e0 = energy + float(level[grid < start].sum()) * dt * 1e-9
            e1 = e0 + float(level[inside].sum()) * dt * 1e-9
            ref_info = {"run": r, "start": start, "end": end, "e0": e0, "e1": e1}
        else:
            slow = 1.25 if r in (5, 17) else 1.0
            main_ns = int(spec.exec_ns * slow * (1 + 0.003 * rng.standard_normal()))
            n = n_main if kind == "ssp" else warmups + 1
            durs = [("pred", i, pred_ns) for i in range(pred_count)] + [("main", i, main_ns) for i in range(n)]
            t = start
            for seg, i, d in durs:
                if seg == "pred":
                    role, p = "pred", spec.pred[3] if spec.pred else 0.0
                else:
                    role = (
                        "trail"
                        if (i >= ssp_index + tail and kind == "ssp")
                        else "ssp"
                        if (i >= ssp_index and kind == "ssp")
                        else "sse"
                        if i == warmups
                        else "first"
                        if (i == 0 and pred_count)
                        else "warmup"
                    )
                    p = spec.ssp_mw * (0.9 if role == "warmup" else 1.0)
                level[(grid >= t) & (grid < t + d)] = p
                host_execs.append((r, kind, seg, i, role, t, t + d))
                truth_rows.append((r, seg, i, p, d))
                for k, v in zip(ex_rows, (r, seg, i, gpu(t), gpu(t + d)), strict=True):
                    ex_rows[k].append(v)
                t += d
            bin_time[r] = (kind, main_ns)
            e0 = e1 = float("nan")
        energy += float(level.sum()) * dt * 1e-9
        filt = _lag(level, dt)
        ts = np.arange(begin + int(rng.integers(0, PERIOD_NS)), begin + span_ns, PERIOD_NS, dtype=np.int64)
        src = np.clip(((ts - DELAY_NS) - begin) // dt, 0, grid.size - 1)
        s_t.append(ts)
        s_p.append(filt[src] + rng.normal(0, 1500.0, ts.size))
        for k, v in zip(run_rows, (r, kind, start, delay, idle_ns, e0, e1), strict=True):
            run_rows[k].append(v)
        begin += span_ns

    raw = sweep.scenario_dir(spec.name)
    prov = {"stage": "collect", "git_commit": "abc123", "device": {"backend": backend, "name": "synthetic"}}
    rawio.write_table(raw / "executions.parquet", "executions", {k: np.asarray(v) for k, v in ex_rows.items()}, prov)
    rawio.write_table(raw / "runs.parquet", "runs", {k: np.asarray(v) for k, v in run_rows.items()}, prov)
    t_all, p_all = np.concatenate(s_t), np.concatenate(s_p)
    chans = list(spec.channels)
    rawio.write_table(
        raw / "samples.parquet",
        "samples",
        {
            "t_ns": np.tile(t_all, len(chans)),
            "channel": np.repeat(np.array(chans, dtype=object), t_all.size),
            "power_mw": np.concatenate([p_all * spec.channels[c] for c in chans]),
        },
        {**prov, "gaps": []},
    )
    g = np.linspace(T0_NS - OFFSET_NS, begin, 20).astype(np.int64)
    h = g + OFFSET_NS + np.rint(DRIFT * (g - GPU_REF_NS)).astype(np.int64)
    rawio.write_table(
        raw / "clock.parquet",
        "clock",
        {
            "host_before_ns": h - 4000,
            "gpu_ns": g,
            "host_after_ns": h + 4000,
            "source": np.array(["burst"] * g.size, dtype=object),
            "run": np.full(g.size, -1, np.int32),
        },
        prov,
    )
    if truth:
        # only the executions that matter, like the collector: SSE, first and the SSP tail
        rel = [
            x
            for x in truth_rows
            if x[1] == "main"
            and (
                x[2] == warmups
                or (x[2] == 0 and pred_count)
                or (ssp_index <= x[2] < ssp_index + tail and x[0] < spec.runs)
            )
        ]
        tr = list(zip(*rel, strict=True))
        n_t = len(rel)
        rawio.write_table(
            sweep.truth(spec.name),
            "truth",
            {
                "run": np.tile(np.asarray(tr[0], np.int32), len(chans)),
                "segment": np.tile(np.asarray(tr[1], dtype=object), len(chans)),
                "exec_index": np.tile(np.asarray(tr[2], np.int32), len(chans)),
                "channel": np.repeat(np.array(chans, dtype=object), n_t),
                "power_mw": np.concatenate([np.asarray(tr[3]) * spec.channels[c] for c in chans]),
                "energy_mj": np.concatenate(
                    [np.asarray(tr[3]) * spec.channels[c] * np.asarray(tr[4]) * 1e-9 for c in chans]
                ),
                # back to back: an execution's cycle is its duration
                "cycle_ns": np.tile(np.asarray(tr[4], np.float64), len(chans)),
                "cycle_energy_mj": np.concatenate(
                    [np.asarray(tr[3]) * spec.channels[c] * np.asarray(tr[4]) * 1e-9 for c in chans]
                ),
            },
            prov,
        )
    probe = {
        "busy_ns": 50_000_000,
        "executions": 50_000_000 // spec.exec_ns,
        "idle_level_mw": 80_000.0,
        "level_mw": spec.ssp_mw,
        "peak_mw": spec.ssp_mw,
        "tol_mw": 2_000.0,
        "t_stable_ns": t_stable_ns,
        "t_recover_ns": 5_000_000,
        "settled": True,
        "samples": 100,
    }
    plan = make_plan(
        exec_time_ns=spec.exec_ns,
        cycle_ns=spec.exec_ns,
        warmups=warmups,
        sse_index=warmups,
        ssp_index=ssp_index,
        tail=tail,
        trailing=trailing,
        executions_per_run=n_main,
        runs=spec.runs,
        sse_runs=spec.sse_runs,
        sse_executions_per_run=warmups + 1,
        reference_executions=n_ref,
        reference_ms=float(spec.reference_ms),
        predecessor_count=pred_count,
        idle_ns=idle_ns,
        probe=probe,
    )
    rawio.write_json(sweep.plan(spec.name), plan.to_json())
    rawio.write_manifest(raw, [p.name for p in raw.iterdir() if p.is_file()])  # as collect writes it

    # binning, each kind on its own
    binned_rows, bins = [], {}
    for kind in ("ssp", "sse"):
        runs_k = [r for r, (k, _) in bin_time.items() if k == kind]
        times = np.array([bin_time[r][1] for r in runs_k], dtype=np.int64)
        low = float(np.median(times)) * 0.98 if times.size else 0.0
        gold = (times >= low) & (times <= low * 1.05)
        bins[kind] = {
            "bin_low_ns": low,
            "bin_high_ns": low * 1.05,
            "runs_total": len(runs_k),
            "runs_golden": int(gold.sum()),
        }
        binned_rows += [
            (r, kind, int(t), int(t) if kind == "ssp" else None, bool(gd), None if gd else "outside_bin")
            for r, t, gd in zip(runs_k, times, gold, strict=True)
        ]
    binned = pl.DataFrame(
        binned_rows,
        schema={
            "run": pl.Int32,
            "phase": pl.String,
            "bin_exec_time_ns": pl.Int64,
            "ssp_exec_time_ns": pl.Int64,
            "golden": pl.Boolean,
            "reason": pl.String,
        },
        orient="row",
    ).sort("run")
    _write_parquet_with_meta(
        binned, sweep.binned(spec.name), {"margin": 0.05, **{k: v for k, v in bins["ssp"].items()}, "bins": bins}
    )
    golden_runs = binned.filter(pl.col("golden"))["run"].to_list()

    # LOIs: delay-corrected samples inside an execution of a measure run
    hx = pl.DataFrame(
        host_execs,
        schema=["run", "phase", "segment", "exec_index", "role", "exec_start_ns", "exec_end_ns"],
        orient="row",
    ).sort("exec_start_ns")
    samples = pl.DataFrame({"t_ns": t_all - DELAY_NS, "p": p_all}).sort("t_ns")
    j = samples.join_asof(hx, left_on="t_ns", right_on="exec_start_ns").filter(pl.col("t_ns") < pl.col("exec_end_ns"))
    j = j.with_columns(
        (pl.col("t_ns") - pl.col("exec_start_ns")).alias("toi_ns"),
        ((pl.col("t_ns") - pl.col("exec_start_ns")) / (pl.col("exec_end_ns") - pl.col("exec_start_ns"))).alias(
            "toi_frac"
        ),
        pl.col("run").cast(pl.Int32),
        pl.col("exec_index").cast(pl.Int32),
        pl.col("run").is_in(golden_runs).alias("golden"),
    )
    lois = pl.concat(
        [
            j.select(
                "run",
                "phase",
                "golden",
                "role",
                "segment",
                "exec_index",
                pl.lit(c).alias("channel"),
                "t_ns",
                "exec_start_ns",
                "toi_ns",
                "toi_frac",
                (pl.col("p") * s).alias("power_mw"),
            )
            for c, s in spec.channels.items()
        ]
    )
    sweep.lois(spec.name).parent.mkdir(parents=True, exist_ok=True)
    lois.write_parquet(sweep.lois(spec.name))

    stats: dict[str, dict[str, Any]] = {}
    for c in chans:
        stats[c] = {}
        for role in ("ssp", "sse", "first", "warmup"):
            sel = lois.filter(pl.col("golden") & (pl.col("channel") == c) & (pl.col("role") == role))
            if sel.height == 0:
                continue
            m, lo, hi = _ci(sel["power_mw"].to_numpy(), sel["run"].to_numpy())
            stats[c][role] = {
                "mean_mw": m,
                "ci_low_mw": lo,
                "ci_high_mw": hi,
                "lois": sel.height,
                "fit_coeffs": _polyfit(sel["toi_frac"].to_numpy(), sel["power_mw"].to_numpy()),
            }
            if truth:
                stats[c][role]["truth_mw"] = spec.ssp_mw * spec.channels[c]

    def w(c: str, role: str, key: str) -> float | None:
        v = stats.get(c, {}).get(role, {}).get(key)
        return None if v is None else v / 1000.0

    ssp_times = np.array([t for k, t in bin_time.values() if k == "ssp"])
    ex_us = float(np.median(ssp_times)) / 1000.0
    ssp = w("total", "ssp", "mean_mw")
    sse = w("total", "sse", "mean_mw")
    row: dict[str, Any] = {
        "scenario": spec.name,
        "kernel": spec.kernel,
        "backend": backend,
        "predecessor": f"{spec.pred[0]} x{spec.pred[1]}" if spec.pred else None,
        "exec_time_us": ex_us,
        "exec_time_ci_low_us": ex_us * 0.998,
        "exec_time_ci_high_us": ex_us * 1.002,
        "ssp_power_w": ssp,
        "ssp_power_ci_low_w": w("total", "ssp", "ci_low_mw"),
        "ssp_power_ci_high_w": w("total", "ssp", "ci_high_mw"),
        "sse_reading_w": sse,
        "sse_reading_ci_low_w": w("total", "sse", "ci_low_mw"),
        "sse_reading_ci_high_w": w("total", "sse", "ci_high_mw"),
        "sse_reading_vs_ssp_pct": (sse - ssp) / ssp * 100 if sse and ssp else None,
        "energy_per_exec_mj": ssp * ex_us * 1e-3 if ssp else None,
        "energy_per_exec_ci_low_mj": ssp * ex_us * 1e-3 * 0.99 if ssp else None,
        "energy_per_exec_ci_high_mj": ssp * ex_us * 1e-3 * 1.01 if ssp else None,
        "interleaved_reading_w": w("total", "first", "mean_mw") if spec.pred else None,
        "interleaved_reading_ci_low_w": w("total", "first", "ci_low_mw") if spec.pred else None,
        "interleaved_reading_ci_high_w": w("total", "first", "ci_high_mw") if spec.pred else None,
        "interleaved_reading_vs_ssp_pct": None,
    }
    for c in sorted(x for x in chans if x != "total"):
        row[f"ssp_{c}_power_w"] = w(c, "ssp", "mean_mw")
    row.update(
        runs_total=bins["ssp"]["runs_total"],
        runs_golden=bins["ssp"]["runs_golden"],
        lois=stats["total"].get("ssp", {}).get("lois", 0),
        lois_sse=stats["total"].get("sse", {}).get("lois", 0),
        valid=spec.valid,
        flags=";".join(spec.flags),
    )
    if truth:
        t_ssp = spec.ssp_mw / 1000.0
        row.update(
            truth_ssp_power_w=t_ssp,
            ssp_error_pct=(ssp - t_ssp) / t_ssp * 100,
            truth_sse_kernel_power_w=t_ssp,
            truth_energy_per_exec_mj=t_ssp * ex_us * 1e-3,
            energy_error_pct=(ssp - t_ssp) / t_ssp * 100,
            truth_interleaved_kernel_power_w=t_ssp if spec.pred else None,
        )
    row.update(
        sse_runs_total=bins["sse"]["runs_total"],
        sse_runs_golden=bins["sse"]["runs_golden"],
        reference_power_w=None,
        reference_power_ci_low_w=None,
        reference_power_ci_high_w=None,
        ssp_vs_reference_pct=None,
        reference_energy_power_w=None,
        reference_counter_vs_samples_pct=None,
    )
    reference = None
    if ref_info:
        settled = p_all[(t_all - DELAY_NS >= ref_info["start"] + t_stable_ns) & (t_all - DELAY_NS <= ref_info["end"])]
        ref_w = float(settled.mean()) / 1000.0
        counter_w = (ref_info["e1"] - ref_info["e0"]) / (ref_info["end"] - ref_info["start"]) * 1e6
        row.update(
            reference_power_w=ref_w,
            reference_power_ci_low_w=ref_w * 0.997,
            reference_power_ci_high_w=ref_w * 1.003,
            ssp_vs_reference_pct=(ssp - ref_w) / ref_w * 100,
            reference_energy_power_w=counter_w,
            reference_counter_vs_samples_pct=0.12,
        )
        if truth:
            row["reference_error_pct"] = (ref_w - spec.ssp_mw / 1000.0) / (spec.ssp_mw / 1000.0) * 100
        reference = {"run": ref_info["run"], "settled_samples": int(settled.size), "t_stable_ns": t_stable_ns}
    summary = summary_of(
        spec.name,
        row,
        stats,
        plan=plan,
        flags=spec.flags,
        valid=spec.valid,
        clock={"offset_ns": OFFSET_NS, "gpu_ref_ns": GPU_REF_NS, "drift_ppm": DRIFT * 1e6, "residual_ns": 800.0},
        provenance={"stage": "differentiate"},
        reference=reference,
        runs={k: RunCount(total=b["runs_total"], golden=b["runs_golden"]) for k, b in bins.items()},
    )
    rawio.write_json(sweep.summary_json(spec.name), summary)


def default_specs() -> list[Spec]:
    return [
        Spec(
            "gemm2k",
            "gemm 2048x2048x2048 bf16",
            180_000,
            400_000.0,
            flags=("kernel_shorter_than_window",),
            reference_ms=120.0,
        ),
        Spec(
            "gemm2k_after_gemv",
            "gemm 2048x2048x2048 bf16",
            180_000,
            400_000.0,
            pred=("gemv 4096x4096 bf16", 40, 30_000, 250_000.0),
            flags=("kernel_shorter_than_window",),
        ),
        Spec(
            "gemv4k",
            "gemv 4096x4096 bf16",
            450_000,
            300_000.0,
            channels={"total": 1.0, "memory": 0.35, "compute": 0.5},
            flags=("too_few_lois", "too_few_lois_sse"),
            valid=False,
        ),
    ]


def make_sweep(
    root: Path, specs: list[Spec], *, truth: bool, backend: str, calibration: bool = True, sensor_units: str = "ns"
) -> SweepLayout:
    """A synthetic sweep with every scenario of `specs`; its calibration's sensor times in `sensor_units`
    ("ns": the contract; "ms": calibration files from before it)."""
    sweep = SweepLayout(root / "sweep")
    for k, spec in enumerate(specs):
        make_scenario(sweep, spec, truth=truth, backend=backend, seed=k)
    if calibration:
        f = 1e6 if sensor_units == "ns" else 1.0
        times = {"period": 0.5, "delay": 0.5, "window": 1.0, "lag": 0.3, "settle": 10.0}
        sensor = {
            ch: {**{f"{k}_{sensor_units}": v * f for k, v in times.items()}, "noise_mw": noise}
            for ch, noise in (("total", 1500.0), ("memory", 600.0))
        }
        rawio.write_json(
            sweep.calibration_json(),
            {
                "clock": {
                    "offset_ns": OFFSET_NS,
                    "gpu_ref_ns": GPU_REF_NS,
                    "drift": DRIFT,
                    "drift_ppm": DRIFT * 1e6,
                    "residual_ns": 800.0,
                    "n_kept": 120,
                },
                "sensor": sensor,
                "channels": list(sensor),
                "steps": {"count": 0},
                "flags": [],
                "provenance": {"stage": "calibrate"},
            },
        )
    return sweep


def sweep_meta(backend: str) -> dict[str, Any]:
    return {
        "sweep": "synthetic",
        "backend": backend,
        "config_hash": "0123456789abcdef",
        "provenance": {
            "git_commit": "deadbeef",
            "fingrav_version": "0.1.0",
            "python": "3.11",
            "packages": {"polars": pl.__version__},
            "device": {"name": "Simulated MI300X", "index": 0},
        },
        "paper_sse_vs_ssp_pct": {"CB-2K": 80.0, "CB-4K": 36.0, "CB-8K": 20.0},
    }


# --------------------------------------------------------------------------- PNG check
def assert_valid_png(data: bytes) -> tuple[int, int]:
    """Walk the PNG's chunks, checking signature, CRCs, IHDR and IEND; return (width, height)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG signature"
    pos, kinds, size = 8, [], (0, 0)
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) & 0xFFFFFFFF == crc, f"bad CRC in {kind!r}"
        if kind == b"IHDR":
            size = struct.unpack(">II", body[:8])
        kinds.append(kind)
        pos += 12 + length
    assert kinds[0] == b"IHDR" and kinds[-1] == b"IEND" and b"IDAT" in kinds
    assert size[0] > 50 and size[1] > 50
    return size


EXTERNAL = re.compile(r"""(?:src|href)\s*=\s*["']?\s*(?:https?:)?//""", re.IGNORECASE)


# --------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def sim_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("sim")
    specs = default_specs()
    sweep = make_sweep(root, specs, truth=True, backend="sim")
    out = sweep.report_dir
    t = time.perf_counter()
    written = build_report(sweep, [s.name for s in specs], sweep_meta("sim"), strict=True)
    elapsed = time.perf_counter() - t
    logger.info("sim report rendered in %.1f s", elapsed)
    return {"sweep": sweep, "out": out, "specs": specs, "elapsed": elapsed, "written": written}


@pytest.fixture(scope="module")
def hw_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """No truth, no calibration.json, and one scenario without raw data."""
    root = tmp_path_factory.mktemp("hw")
    specs = default_specs()[:2]
    sweep = make_sweep(root, specs, truth=False, backend="nvml", calibration=False)
    for f in sweep.scenario_dir(specs[0].name).glob("*.parquet"):
        f.unlink()
    out = sweep.report_dir
    build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
    return {"sweep": sweep, "out": out, "specs": specs}


# --------------------------------------------------------------------------- report tests
def test_summary_csv(sim_report: dict[str, Any]) -> None:
    """summary.csv: the narrow columns of the result model (<= 30 with the simulator's truths); every other number
    in metrics.csv, long form."""
    sweep: SweepLayout = sim_report["sweep"]
    df = pl.read_csv(sweep.summary_csv)
    assert df["scenario"].to_list() == [s.name for s in sim_report["specs"]]
    assert tuple(df.columns) == RM.summary_columns(truth=True) and len(df.columns) <= RM.MAX_SUMMARY_COLUMNS_TRUTH
    assert df["valid"].to_list() == [True, True, False]
    gemv = df.filter(pl.col("scenario") == "gemv4k").row(0, named=True)
    assert gemv["flags"] == "too_few_lois" and gemv["notes"] == "too_few_lois_sse"  # invalidating vs notes
    assert df["power_w"].is_not_null().all()
    m = pl.read_csv(sweep.metrics_csv)
    assert m.columns == list(RM.METRICS_COLUMNS) and m.equals(pl.read_parquet(sweep.metrics_parquet))
    metrics = set(m["metric"].to_list())
    for c in ("ssp_memory_power_w", "ssp_compute_power_w", "sse_runs_total", "reference_power_w",
              "ssp_vs_reference_pct", "reference_counter_power_w", "reference_counter_vs_samples_pct",
              "reference_vs_truth_pct", "power_vs_truth_pct"):  # fmt: skip
        assert c in metrics, c
    ref = m.filter(pl.col("metric") == "reference_power_w")
    assert ref["scenario"].to_list() == ["gemm2k"] and ref["unit"].to_list() == ["W"]
    assert (m["ci_low"].is_null() | (m["ci_low"] <= m["value"])).all()


def test_html_self_contained(sim_report: dict[str, Any]) -> None:
    html = (sim_report["out"] / "index.html").read_text(encoding="utf-8")
    assert not EXTERNAL.findall(html), EXTERNAL.findall(html)
    assert not re.search(r"<script[^>]*\bsrc=", html, re.I)  # scripts inline only (table sorting, lazy figures)
    assert "<link" not in html.lower()
    assert "@import" not in html
    pngs = sorted(sim_report["out"].glob("*.png"))
    uris = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(uris) == len(pngs)
    embedded = {base64.b64decode(u) for u in uris}
    for p in pngs:
        assert p.read_bytes() in embedded, f"{p.name} is not embedded"
    # sweep meta, provenance, calibration and the guide are on the page
    for text in (
        "deadbeef",
        "0123456789abcdef",
        "Simulated MI300X",
        "How to read this",
        "drift",
        "lag_ms",
        "window_ms",
        "kernel_shorter_than_window",
    ):
        assert text in html, text
    assert "could not be drawn" not in html


def test_every_figure_is_a_valid_png(sim_report: dict[str, Any]) -> None:
    out: Path = sim_report["out"]
    names = {p.name for p in out.glob("*.png")}
    expected = {  # the profiles are folded and drawn by the browser when opened: packed specs, no PNG
        "timeline_sync_gemm2k.png",
        "timeline_binning_gemm2k.png",
        "components_ssp.png",
        "interleaved_vs_ssp.png",
        "sse_vs_ssp_error.png",
        "validation_truth.png",
        "ssp_vs_reference.png",
        "sensor_readings.png",
    }
    assert names == expected
    for name in names:
        assert_valid_png((out / name).read_bytes())
    assert not list(out.glob("*.tmp*"))
    html = (out / "index.html").read_text(encoding="utf-8")
    for spec in sim_report["specs"]:
        m = re.search(rf'id="fig-profile_{re.escape(spec.name)}".*?class="spec">([^<]+)<', html, re.S)
        assert m is not None, spec.name
        assert unpack_spec(m.group(1))["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


def test_invalid_rows_marked_and_truth_table(sim_report: dict[str, Any]) -> None:
    """The invalid scenario's row is red in the headline, the core table and the folded table of every column."""
    html = (sim_report["out"] / "index.html").read_text(encoding="utf-8")
    headline = html[html.index('id="headline"') : html.index('id="summary"')]
    core = html[html.index('class="core"') : html.index('class="all"')]
    every = html[html.index('class="all"') : html.index('id="how"')]
    assert headline.count('<tr class="invalid">') == core.count('<tr class="invalid">') == 1
    assert every.count('<tr class="invalid">') == 1
    assert "✗ invalid" in html
    assert 'class="validation"' in html
    assert "Validation against the simulator" in html


def test_render_time_is_reported_truthfully(sim_report: dict[str, Any]) -> None:
    """The page says how long it took to render, and that is no more than the call took (the report's speed is a
    benchmark, benchmarks/stage_profile.py, not a test: wall-clock limits fail on a busy machine)."""
    html = (sim_report["out"] / "index.html").read_text(encoding="utf-8")
    m = re.search(r"Report rendered by fingrav in ([0-9.]+) s; (\d+) figures", html)
    assert m is not None
    assert 0.0 < float(m.group(1)) <= sim_report["elapsed"] + 0.05
    assert int(m.group(2)) == len([p for p in sim_report["written"] if p.suffix == ".png"])  # one PNG per figure


def test_hardware_report_without_truth(hw_report: dict[str, Any]) -> None:
    out: Path = hw_report["out"]
    html = (out / "index.html").read_text(encoding="utf-8")
    assert 'class="validation"' not in html
    assert "Validation against the simulator" not in html
    assert not (out / "validation_truth.png").exists()
    assert "No calibration (calibration/gpu0.json)" in html
    # the timeline falls back to the scenario that still has raw data; truth columns are absent
    assert (out / "timeline_sync_gemm2k_after_gemv.png").exists()
    cols = pl.read_csv(hw_report["sweep"].summary_csv).columns
    assert tuple(cols) == RM.summary_columns(truth=False) and len(cols) <= RM.MAX_SUMMARY_COLUMNS
    for p in out.glob("*.png"):
        assert_valid_png(p.read_bytes())
    assert not EXTERNAL.findall(html)


def test_rerun_removes_stale_figures(tmp_path: Path) -> None:
    specs = [Spec("gemm2k", "gemm 2048x2048x2048 bf16", 180_000, 400_000.0)]
    sweep = make_sweep(tmp_path, specs, truth=False, backend="nvml")
    out = sweep.report_dir
    out.mkdir(parents=True)
    (out / "profile_gone.png").write_bytes(b"old")
    (out / "keep_me.png").write_bytes(b"not ours")
    build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
    assert not (out / "profile_gone.png").exists()
    assert (out / "keep_me.png").exists()
    assert not (out / "interleaved_vs_ssp.png").exists()  # no predecessor in this sweep
    assert not (out / "ssp_vs_reference.png").exists()  # nor a reference run


def test_an_unchanged_figure_reuses_its_png(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A report whose figure specs did not change writes the earlier PNGs again (same bytes, not rendered); a PNG
    whose bytes are not what the record says is rendered again."""
    specs = [Spec("gemm2k", "gemm 2048x2048x2048 bf16", 180_000, 400_000.0)]
    sweep = make_sweep(tmp_path, specs, truth=False, backend="nvml")
    out = sweep.report_dir
    build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
    first = {p.name: p.read_bytes() for p in out.glob("*.png")}
    assert first and json.loads((out / PNG_KEYS).read_text()).keys() == first.keys()
    caplog.set_level(logging.DEBUG, logger="fingrav.report.build")
    build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
    reused = {m.split(":")[0].removeprefix("figure ") + ".png" for m in caplog.messages if "PNG reused" in m}
    assert reused == first.keys()
    assert {p.name: p.read_bytes() for p in out.glob("*.png")} == first
    tampered = sorted(first)[0]
    (out / tampered).write_bytes(b"not the rendered PNG")
    caplog.clear()
    build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
    reused = {m.split(":")[0].removeprefix("figure ") + ".png" for m in caplog.messages if "PNG reused" in m}
    assert reused == first.keys() - {tampered}
    assert (out / tampered).read_bytes() == first[tampered]  # rendered again: the same bytes as the first time


def test_missing_summary_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="summary.json"):
        build_report(SweepLayout(tmp_path), ["nope"], sweep_meta("sim"))


def test_summary_is_read_as_its_model(sim_report: dict[str, Any]) -> None:
    """load_scenario keeps the typed summary.json (ScenarioSummary) and reads its typed result."""
    scn = load_scenario(sim_report["sweep"], "gemv4k")
    assert isinstance(scn.summary, ScenarioSummary) and isinstance(scn.summary.plan, Plan)
    assert scn.channels == ["total", "compute", "memory"]  # "total" first, then as summary.json has them
    assert scn.summary.role("memory", "ssp").power.value == pytest.approx(
        0.35 * scn.summary.role("total", "ssp").power.value, rel=0.05
    )
    assert scn.summary.role("nope", "ssp") is None and scn.summary.role("total", "nope") is None
    assert scn.flags == ["too_few_lois", "too_few_lois_sse"] and not scn.valid and not scn.sse_measurable
    assert scn.result is scn.summary.result  # the report reads the typed result (no flat row of its own)
    assert not scn.has_predecessor and load_scenario(sim_report["sweep"], "gemm2k_after_gemv").has_predecessor


@pytest.mark.parametrize(
    ("change", "field_name"),
    [
        (lambda d: d["plan"].pop("runs"), "plan.runs"),
        (lambda d: d["channels"]["total"]["ssp"]["power"].update(value="lots"), "channels.total.ssp.power.value"),
        (lambda d: d.update(surprise=1), "surprise"),
        (lambda d: d.pop("result"), "result"),
    ],
)
def test_invalid_summary_is_a_data_error_naming_file_and_field(tmp_path: Path, change: Any, field_name: str) -> None:
    sweep = SweepLayout(tmp_path)
    data = summary_of("s", {"scenario": "s"}, {"total": {"ssp": {"mean_mw": 1.0}}}).model_dump(mode="json")
    change(data)
    path = rawio.write_json(sweep.summary_json("s"), data)
    with pytest.raises(DataError, match=re.escape(str(path))) as err:
        load_scenario(sweep, "s")
    assert field_name in str(err.value)
    path.write_text("{not json")
    with pytest.raises(DataError, match="not valid JSON"):
        load_scenario(sweep, "s")


# --------------------------------------------------------------------------- units
def test_fair_quotas() -> None:
    assert fair_quotas([10, 1000, 1000], 510) == [10, 250, 250]
    assert fair_quotas([3, 4], 100) == [3, 4]
    assert sum(fair_quotas([7, 9, 11], 10)) <= 10


def test_subsample_is_deterministic_and_bounded() -> None:
    rng = np.random.default_rng(1)
    df = pl.DataFrame({"role": ["ssp"] * 9000 + ["sse"] * 40, "v": rng.random(9040)})
    a = subsample(df, 1000, by=("role",))
    b = subsample(df, 1000, by=("role",))
    assert a.height == 1000
    assert a.equals(b)
    assert a.filter(pl.col("role") == "sse").height == 40


def test_summary_frame_follows_the_contract() -> None:
    results = [
        summary_of("b", {"flags": "", "scenario": "b", "ssp_xcd_power_w": 1.0, "runs_total": 3}).result,
        summary_of("a", {"scenario": "a", "ssp_hbm_power_w": 2.0, "valid": True, "truth_ssp_power_w": 2.5}).result,
    ]
    df = summary_frame(results)
    assert tuple(df.columns) == RM.summary_columns(truth=True)
    types = {"str": pl.String, "int": pl.Int64, "bool": pl.Boolean, "float": pl.Float64}
    assert all(df[c].dtype == types[S.column_type(c)] for c in df.columns)
    assert df["flags"].to_list() == ["", ""] and df["truth_power_w"].to_list() == [None, 2.5]
    m = metrics_frame(results)
    got = {(r["scenario"], r["metric"]): r["value"] for r in m.iter_rows(named=True)}
    assert got[("b", "ssp_xcd_power_w")] == 1.0 and got[("a", "ssp_hbm_power_w")] == 2.0
    assert got[("b", "ssp_runs_total")] == 3.0


def test_timeline_draws_trailing_executions(sim_report: dict[str, Any]) -> None:
    """The SSP run's executions after the SSP tail are "trail" (fingrav.analysis.roles.role_expr), drawn as
    their own role, not as SSP."""
    from fingrav.report.figures import ROLE_COLORS, timeline_sync_chart
    from fingrav.report.load import clock_map, load_raw, load_scenario

    layout: SweepLayout = sim_report["sweep"]
    scn = load_scenario(layout, "gemm2k")
    chart = timeline_sync_chart(scn, load_raw(scn.raw_dir), clock_map(scn, None), None, {})
    spec = chart.to_dict()
    spans = [r for v in spec["datasets"].values() for r in v if "role_label" in r and "x1" in r]
    labels = [r["role_label"] for r in sorted(spans, key=lambda r: r["x0"])]
    assert labels[-2:] == ["SSP", "trailing"]
    assert "trailing" in json.dumps(spec["vconcat"][0]) or "trailing" in json.dumps(spec)
    assert ROLE_COLORS["trailing"] in json.dumps(spec)


def test_calibration_sensor_in_ms_is_still_read(tmp_path: Path) -> None:
    """Calibration files from before the ns contract (`*_ms` sensor keys) show the same table."""
    specs = [Spec("gemm2k", "gemm 2048x2048x2048 bf16", 180_000, 400_000.0)]
    pages = []
    for units in ("ns", "ms"):
        sweep = make_sweep(tmp_path / units, specs, truth=False, backend="nvml", sensor_units=units)
        build_report(sweep, [s.name for s in specs], sweep_meta("nvml"), strict=True)
        html = sweep.report_html.read_text(encoding="utf-8")
        pages.append(html[html.index('id="calibration"') : html.index("Power sensor") + 2000])
    assert "lag_ms" in pages[0] and "0.300" in pages[0]
    assert pages[0] == pages[1]


def test_paper_values_match_scenarios_by_name() -> None:
    scn = ScenarioData("cb-2k", summary_of("cb-2k", {"sse_reading_vs_ssp_pct": -75.0}), SweepLayout(Path(".")))
    df = sse_error_data([scn], {"CB-2K": 80.0, "CB-8K": 20.0}, "this sweep")
    groups = dict(zip(df["group"].to_list(), df["source"].to_list(), strict=True))
    assert "cb-2k" in df["group"].to_list() and "CB-8K (paper)" in groups
    assert df.filter(pl.col("source") == "this sweep")["pct"].item() == 75.0
    # signed (an under-read is negative, like the paper's), labelled with its sign
    mine = df.filter(pl.col("source") == "this sweep").row(0, named=True)
    assert mine["signed"] == -75.0 and mine["label"] == "-75"
    assert df.filter(pl.col("group") == "cb-2k", pl.col("source") != "this sweep")["signed"].item() == -80.0


def test_pa_schema_of_fixture_matches_contract(sim_report: dict[str, Any]) -> None:
    for kind in ("executions", "runs", "samples"):
        schema = pq.read_schema(sim_report["sweep"].scenario_dir("gemm2k") / f"{kind}.parquet")
        assert schema.remove_metadata().equals(rawio.SCHEMAS[kind]), kind


def test_report_on_real_analysis_output(tmp_path: Path) -> None:
    """The contract end to end: the analysis' own bin and differentiate stages on the synthetic raw data,
    then the report."""
    from fingrav.config import AnalysisConfig
    from fingrav.contracts.calibration import Calibration
    from fingrav.stages import bin as bin_stage
    from fingrav.stages import differentiate

    specs = default_specs()
    sweep = make_sweep(tmp_path, specs, truth=True, backend="sim")
    cal = rawio.read_json(sweep.calibration_json())  # the calibrate stage's contract: every channel named
    cal["sensor"] = {ch: {"channel": ch, **v} for ch, v in cal["sensor"].items()}
    cal.update(channels=list(cal["sensor"]), steps={"count": 0, "on_ns": 0, "off_ns": 0})
    rawio.write_json(sweep.calibration_json(), Calibration.model_validate(cal))
    analysis = AnalysisConfig()
    for s in specs:
        bin_stage.run(sweep, s.name, 0, analysis)
        differentiate.run(sweep, s.name, 0, analysis, max_clock_residual_us=20.0, with_truth=True)
    out = sweep.report_dir
    build_report(sweep, [s.name for s in specs], sweep_meta("sim"), strict=True)
    df = pl.read_csv(sweep.summary_csv)
    assert df["scenario"].to_list() == [s.name for s in specs]
    assert df["truth_power_w"].is_not_null().all() and df["truth_ssp_power_w"].is_not_null().all()
    rows = replayed_columns(sweep.root)  # every number (metrics.csv) and the text cells
    assert [rows[s.name]["sse_runs_total"] for s in specs] == [24, 24, 24]
    assert [rows[s.name]["ssp_runs_total"] for s in specs] == [36, 36, 36]
    # the reference run (gemm2k only): its settled power is the SSP power (the lagged sensor has settled)
    ref = rows["gemm2k"]
    assert ref["reference_power_w"] == pytest.approx(400.0, rel=0.01)
    assert ref["reference_power_ci_low_w"] <= ref["reference_power_w"] <= ref["reference_power_ci_high_w"]
    # the fixture's warm-ups run at 90 % right up to the SSP tail, so its lagged SSP reading is still a few %
    # low: the reference run shows it. With a reference run the headline power is the reference's sustained power
    # and the method SSP of the short runs is ssp_power_w (what ssp_vs_reference_pct compares)
    ssp_vs_ref = (ref["ssp_power_w"] - ref["reference_power_w"]) / ref["reference_power_w"] * 100
    assert ref["ssp_vs_reference_pct"] == pytest.approx(ssp_vs_ref) and -6 < ssp_vs_ref < 0
    assert ref["ssp_vs_reference_ci_low_pct"] < ref["ssp_vs_reference_pct"] < ref["ssp_vs_reference_ci_high_pct"]
    # (the headline is the mean of the reference run's last half, the settled power the mean after settling: the
    # same level where nothing drifts)
    assert ref["power_source"] == "sustained_stamped"
    assert ref["power_w"] == pytest.approx(ref["reference_power_w"], rel=2e-3)
    assert abs(ref["reference_counter_vs_samples_pct"]) < 1.0
    assert ref["reference_counter_power_w"] > ref["reference_power_w"]  # the 130 % transient is in the counter
    assert all("reference_power_w" not in rows[s.name] for s in specs if s.name != "gemm2k")
    assert (out / "validation_truth.png").exists() and (out / "interleaved_vs_ssp.png").exists()
    assert (out / "ssp_vs_reference.png").exists()
    html = (out / "index.html").read_text(encoding="utf-8")
    assert 'class="validation"' in html and "could not be drawn" not in html


def test_merge_spans() -> None:
    from fingrav.report.figures import merge_spans

    ex = pl.DataFrame(
        {
            "x0": [0.0, 1.0, 2.0, 3.0, 4.0],
            "x1": [1.0, 2.0, 3.0, 4.0, 5.0],
            "role_label": ["warm-up", "warm-up", "SSE", "SSP", "SSP"],
        }
    )
    spans = merge_spans(ex)
    assert spans.rows() == [(0.0, 2.0, "warm-up"), (2.0, 3.0, "SSE"), (3.0, 5.0, "SSP")]


def test_profile_chart_caps_points() -> None:
    from fingrav.report.figures import profile_chart

    rng = np.random.default_rng(0)
    n = 40_000
    lois = pl.DataFrame(
        {
            "run": rng.integers(0, 200, n).astype(np.int32),
            "golden": np.ones(n, bool),
            "role": rng.choice(["ssp", "sse", "first"], n, p=[0.9, 0.05, 0.05]),
            "channel": rng.choice(["total", "memory"], n),
            "toi_ns": rng.integers(0, 100_000, n),
            "toi_frac": rng.random(n),
            "power_mw": rng.normal(300_000, 5_000, n),
        }
    )
    stats = {
        "mean_mw": 300_000.0,
        "ci_low_mw": 299_000.0,
        "ci_high_mw": 301_000.0,
        "lois": 100,
        "fit_coeffs": [0.0, 0.0, 0.0, 0.0, 300_000.0],
    }
    summary = summary_of(
        "big",
        {"exec_time_us": 100.0, "kernel": "k", "valid": True},
        {c: {r: dict(stats) for r in ("ssp", "sse")} for c in ("total", "memory")},
    )
    spec = profile_chart(ScenarioData("big", summary, SweepLayout(Path("."))), lois, max_points=3000)
    assert spec is not None
    points = sum(len(v) for v in spec.get("datasets", {}).values() if v and "role" in v[0] and "toi_us" in v[0])
    assert 0 < points <= 3000


def test_sse_not_measurable_is_shown_as_such(sim_report: dict[str, Any]) -> None:
    """gemv4k has too few SSE LOIs: no SSE number on the page, "not measurable" with its flag instead."""
    html = (sim_report["out"] / "index.html").read_text(encoding="utf-8")
    every = html[html.index('class="all"') : html.index('id="how"')]
    row = next(r for r in every.split("<tr") if "<b>gemv4k</b>" in r)
    # SSE reading and its % vs SSP (too few SSE LOIs), and the SSE kernel power (not resolved: reason as tooltip)
    assert row.count('class="nm"') == 3 and "too_few_lois_sse" in row
    core = html[html.index('class="core"') : html.index('class="all"')]
    row = next(r for r in core.split("<tr") if "<b>gemv4k</b>" in r)
    assert row.count('class="nm"') == 1  # the SSE reading's % vs SSP
    scns = load_scenarios(sim_report["sweep"], [s.name for s in sim_report["specs"]])
    df = sse_error_data(scns, {"cb-2k": 80.0}, "this sweep")
    gemv = df.filter(pl.col("group") == "gemv4k").row(0, named=True)
    assert gemv["pct"] is None and gemv["label"] == "not measurable (too_few_lois_sse)"
    assert df.filter(pl.col("group") == "gemm2k")["pct"].item() > 0
    assert "SSE reading (W)" not in validation_data(scns).filter(pl.col("scenario") == "gemv4k")["quantity"].to_list()


def test_reference_section_and_figure_data(sim_report: dict[str, Any]) -> None:
    html = (sim_report["out"] / "index.html").read_text(encoding="utf-8")
    assert 'id="reference"' in html and "reference power, settled (W)" in html and "SSP vs reference (%)" in html
    assert "initial transient" in html
    scns = load_scenarios(sim_report["sweep"], [s.name for s in sim_report["specs"]])
    df = reference_data(scns)
    assert df["scenario"].unique().to_list() == ["gemm2k"]
    assert df["measure"].to_list() == ["method SSP (FinGraV)", "reference run (settled)", "SSE (naive)"]
    assert df.filter(pl.col("measure") == "reference run (settled)")["label"].item().startswith("SSP ")
    assert validation_data(scns).filter(pl.col("quantity").str.starts_with("reference"))["scenario"].to_list() == [
        "gemm2k"
    ]


def test_binning_chart_uses_ssp_runs() -> None:
    """The binned frame holds SSE and SSP runs: the histogram counts only the SSP runs."""
    binned = pl.DataFrame(
        {
            "run": [0, 1, 2, 3, 4],
            "phase": ["ssp", "ssp", "sse", "sse", "sse"],
            "bin_exec_time_ns": [100_000, 101_000, 60_000, 61_000, 62_000],
            "ssp_exec_time_ns": [100_000, 101_000, None, None, None],
            "golden": [True] * 5,
            "reason": [None] * 5,
        },
        schema_overrides={"reason": pl.String},
    )
    meta = {
        "margin": 0.05,
        "bin_low_ns": 100_000,
        "bin_high_ns": 105_000,
        "bins": {
            "ssp": {"bin_low_ns": 100_000, "bin_high_ns": 105_000, "runs_total": 2, "runs_golden": 2},
            "sse": {"bin_low_ns": 60_000, "bin_high_ns": 63_000, "runs_total": 3, "runs_golden": 3},
        },
    }
    binning = BinningSummary.model_validate(meta)
    chart = binning_chart(ScenarioData("s", summary_of("s", {}), SweepLayout(Path("."))), None, binned, binning)
    spec = chart.to_dict()
    hist = [v for v in spec["datasets"].values() if v and "y1" in v[0]]
    assert sum(r["y1"] - r["y0"] for r in hist[0]) == 2
    assert "SSE runs binned separately: 3 of 3 golden" in json.dumps(spec)
    raw = {
        "runs": pl.DataFrame({"run": [2, 0, 1], "phase": ["sse", "ssp", "ssp"]}),
        "executions": pl.DataFrame({"run": [0, 1, 2]}),
    }
    assert pick_run(raw, binned) == 0


def test_readings_panel_and_kernel_power_validation_axis() -> None:
    """Sensor readings have their own panel; the truth panel shows only kernel-power numbers on a ±2.5 % axis."""
    from fingrav.report import figures as F

    val = pl.DataFrame(
        {
            "scenario": ["a", "a", "a"],
            "quantity": ["power (W)", "SSE power (W)", "energy per execution (mJ)"],
            "measured": [1.0, 0.5, 1.0],
            "ci_low": [0.9, 0.4, 0.9],
            "ci_high": [1.1, 0.6, 1.1],
            "truth": [1.0, 1.0, 1.0],
            "error_pct": [0.3, -50.0, 7.0],
            "err_lo": [-0.1, -60.0, 6.0],
            "err_hi": [0.7, -40.0, 8.0],
            "covered": [True, False, False],
            "within_tol": [True, False, False],
            "valid": [True, True, True],
        }
    )
    spec = F.truth_chart(val, ["a"]).to_dict(validate=False)
    data = [v for d in spec.get("datasets", {}).values() for v in d]
    assert {r["quantity"] for r in data if "quantity" in r} == {"power (W)", "energy per execution (mJ)"}
    assert max(r["error_pct"] for r in data if "error_pct" in r) == F.TRUTH_AXIS_PCT  # clipped to the axis


def test_profile_chart_draws_the_analysis_fit_band() -> None:
    """The fit's CI band is drawn from summary.json's fit_band (W = mW / 1000) as a shaded area, not recomputed."""
    from fingrav.report.figures import profile_chart

    grid = [i / 20 for i in range(21)]
    band = {
        "toi_frac": grid,
        "ci_low_mw": [299_000.0 - 100.0 * i for i in range(21)],
        "ci_high_mw": [301_000.0 + 100.0 * i for i in range(21)],
        "level": 0.95,
        "runs": 40,
        "replicates": 1000,
    }
    stats = {"mean_mw": 300_000.0, "ci_low_mw": 299_500.0, "ci_high_mw": 300_500.0, "lois": 100}
    summary = summary_of(
        "banded",
        {"exec_time_us": 200.0, "kernel": "k", "valid": True},
        {"total": {"ssp": {**stats, "fit_coeffs": [300_000.0], "fit_band": band}}},
    )
    spec = profile_chart(ScenarioData("banded", summary, SweepLayout(Path("."))), None)
    areas = [lay for lay in spec["layer"] if (lay.get("mark") or {}).get("type") == "area"]
    assert len(areas) == 1 and areas[0]["encoding"]["y2"]["field"] == "hi_w"
    rows = spec["datasets"][areas[0]["data"]["name"]]
    assert [r["toi_us"] for r in rows] == pytest.approx([200.0 * g for g in grid])
    assert [r["lo_w"] for r in rows] == pytest.approx([299.0 - 0.1 * i for i in range(21)])
    assert [r["hi_w"] for r in rows] == pytest.approx([301.0 + 0.1 * i for i in range(21)])
    assert any("95 % CI bands" in line for line in spec["title"]["subtitle"])
    # without a band (older summaries, LOIs of one run): the fit alone
    summary = summary_of(
        "plain",
        {"exec_time_us": 200.0, "kernel": "k", "valid": True},
        {"total": {"ssp": {**stats, "fit_coeffs": [300_000.0]}}},
    )
    spec = profile_chart(ScenarioData("plain", summary, SweepLayout(Path("."))), None)
    assert not [lay for lay in spec["layer"] if (lay.get("mark") or {}).get("type") == "area"]


def _profile_scenario(channels: tuple[str, ...]) -> ScenarioData:
    stats = {"mean_mw": 300_000.0, "ci_low_mw": 299_000.0, "ci_high_mw": 301_000.0, "lois": 100}
    band = {"toi_frac": [0.0, 0.5, 1.0], "ci_low_mw": [299_000.0] * 3, "ci_high_mw": [301_000.0] * 3, "level": 0.95}
    roles = {"ssp": {**stats, "fit_coeffs": [1.0, 300_000.0], "fit_band": {**band, "runs": 9, "replicates": 99}}}
    summary = summary_of(
        "s", {"exec_time_us": 50.0, "kernel": "k", "valid": True}, {c: {**roles, "sse": dict(stats)} for c in channels}
    )
    return ScenarioData("s", summary, SweepLayout(Path(".")))


@pytest.mark.parametrize(("channels", "n"), [(("total",), 200), (("total", "memory"), 5000)])
def test_the_profile_spec_is_valid_vega_lite(channels: tuple[str, ...], n: int) -> None:
    import jsonschema

    from fingrav.report import vegalite as VL
    from fingrav.report.build import figure_spec
    from fingrav.report.figures import profile_chart

    """One channel (a layer) with points, two (a concat) with density cells: both conform to the schema, and the
    report's strict mode accepts the dict as it is."""
    rng = np.random.default_rng(1)
    lois = pl.DataFrame(
        {
            "run": rng.integers(0, 20, n).astype(np.int32),
            "golden": np.ones(n, bool),
            "role": rng.choice(["ssp", "sse"], n),
            "channel": rng.choice(list(channels), n),
            "toi_ns": rng.integers(0, 50_000, n),
            "toi_frac": rng.random(n),
            "power_mw": rng.normal(300_000, 1_000, n),
        }
    )
    spec = profile_chart(_profile_scenario(channels), lois)
    assert spec is not None
    VL.validate(spec)
    assert figure_spec(spec, validate=True) == spec
    assert ("concat" in spec) == (len(channels) > 1)
    marks = {lay["mark"]["type"] for p in spec.get("concat", [spec]) for lay in p["layer"]}
    assert marks == {"rect", "rule", "area", "line"} | (set() if n > 1000 else {"circle"})
    broken = {**spec, "layer": [{"mark": {"type": "no-such-mark"}}]} if "layer" in spec else {**spec, "concat": 3}
    with pytest.raises(jsonschema.ValidationError):
        VL.validate(broken)


def test_core_table_has_the_core_columns_signed_with_cis_and_the_paper_beside() -> None:
    """The summary's always-visible core table: ~8 columns; signed SSE/interleaved errors with their CIs, the
    paper's value (signed: its SSE under-reads) beside a scenario it reports; "not measurable" where the SSE is."""
    from fingrav.report.html import core_table

    def scn(name: str, row: dict[str, Any], flags: Sequence[str] = (), **plan: Any) -> ScenarioData:
        base = {"ssp_power_w": 600.0, "ssp_power_ci_low_w": 599.0, "ssp_power_ci_high_w": 601.0, "valid": not flags}
        summary = summary_of(name, {**base, **row}, plan=make_plan(**plan), flags=flags, valid=not flags)
        return ScenarioData(name, summary, SweepLayout(Path(".")))

    scns = [
        scn(
            "cb-2k",
            {
                "sse_reading_vs_ssp_pct": -65.2,
                "sse_reading_vs_ssp_ci_low_pct": -66.0,
                "sse_reading_vs_ssp_ci_high_pct": -64.1,
                "runs_golden": 38,
                "runs_total": 40,
            },
        ),  # fmt: skip
        scn(
            "cb-2k-after-cb-8k",
            {
                "sse_reading_vs_ssp_pct": 14.3,
                "interleaved_reading_vs_ssp_pct": 17.6,
                "interleaved_reading_vs_ssp_ci_low_pct": 16.9,
                "interleaved_reading_vs_ssp_ci_high_pct": 18.2,
            },
            predecessor_count=4,
        ),  # fmt: skip
        scn("mb-8k", {"sse_reading_vs_ssp_pct": -1.0}, flags=("too_few_lois_sse",)),
    ]
    html = core_table(scns)
    heads = re.findall(r"<th>(.*?)</th>", html)
    assert len(heads) == 9 and heads[-1] == "flags" and "interleaved reading vs SSP (%)" in heads
    rows = html.split("<tr")[2:]
    assert "-65.2" in rows[0] and "[-66.0, -64.1]" in rows[0] and "paper: -80" in rows[0] and "38 / 40" in rows[0]
    assert "+14.3" in rows[1] and "+17.6" in rows[1] and "[+16.9, +18.2]" in rows[1] and "paper" not in rows[1]
    assert "not measurable" in rows[2] and "-1.0" not in rows[2] and 'class="invalid"' in rows[2]
    assert "interleaved" not in core_table(scns[:1])  # no predecessor in the sweep: no interleaved column


def test_ci_ends_that_would_print_alike_get_more_decimals() -> None:
    """A CI of [29.89, 29.89] would read as no uncertainty: the value and its CI get the decimals that tell the
    ends apart (up to 3 more); a CI that prints apart, or a zero-width one, keeps the usual format."""
    from fingrav.report.html import fmt_ci

    assert fmt_ci(29.891, 29.887, 29.894) == '29.891<span class="ci">[29.887, 29.894]</span>'
    assert fmt_ci(608.12, 608.11, 608.14, 1, inline=True) == '608.12<span class="cii">[608.11, 608.14]</span>'
    assert fmt_ci(29.89, 29.5, 30.2) == '29.89<span class="ci">[29.50, 30.20]</span>'
    assert fmt_ci(300.0, 300.0, 300.0, 1) == '300.0<span class="ci">[300.0, 300.0]</span>'
    assert fmt_ci(None, 1.0, 2.0) == "–"
