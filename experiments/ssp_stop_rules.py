"""SSP stop rules replayed on committed H200 databases (issue 20, stop 34): how many SSP runs and GPU-seconds another
rule for the adaptive SSP stop would have saved, and the raw data cut where it would have stopped, for the analysis.

The collector decides after MIN_RUNS SSP runs and then every SSP_CHECK_EVERY more, on the "total" samples that fall
in each SSP run's tail (`fingrav.collect.runner._SSPLois`). This script rebuilds those per-run LOI sums from a
dataset's raw tables (executions, the run's own clock read, samples, the plan's sensor shift) and asks, at each
check, the rule named by `--rule`:

* `current`: `fingrav.analysis.ssp_stop.ssp_stop_decision` as the collector asks it (the statistical CI within
  the plan's ssp_ci_pct). Replayed on results/h200-db2, db4 and db5 it reproduces the stop of all 318 rows.
* `stat`: `current` with the statistical CI within `--target` % instead of the plan's ssp_ci_pct (a looser or
  tighter target of the same stop; stop 40: at 0.7 and 1.0 % on results/h200-db5 and db6).
* `unsettled`: `current`, and stop where the tail's trend (first half vs second half of each run's tail, delta-method
  z over runs) is beyond TREND_Z and its change across the tail exceeds the statistical CI: the analysis would flag
  the method SSP unsettled (`fingrav.analysis.settling`).
* `total`: `unsettled`, and the statistical CI plus the trend's bias bound (`tail_trend_bounds`) within
  `--target` % instead of the statistical CI within ssp_ci_pct.

Both alternatives were rejected (benchmarks/RESULTS.md, stop 34): `total` at 0.8 % saves 9-10 % of the databases' GPU
time but costs 41 of 102 valid method SSPs in the simulated fidelity matrix; `unsettled` saves 1-16 GPU-s and stops
rows the full analysis finds settled.

    python experiments/ssp_stop_rules.py --rule total --target 0.8 h200-db5 h200-db4 h200-db2
    python experiments/ssp_stop_rules.py --rule total --target 0.8 --cut /tmp/cut h200-db5

`--cut DIR` writes each dataset's raw data with every SSP run after the new stop dropped (the other runs kept, as the
collector keeps them; manifests rewritten) to DIR/<dataset>/gpu and a replay config DIR/<dataset>.yaml, to run with
`snakemake --cores 2 --forceall --configfile DIR/<dataset>.yaml` (results/<sweep>-cut); `--compare` then reads that
analysis against the full replay's (`compare_cut`). The datasets' raw data must be restored first (their replay.sh
does it). Nothing under results/<dataset> is written.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from fingrav import rawio
from fingrav.analysis.settling import TREND_Z, trend_bounds
from fingrav.analysis.ssp_stop import MIN_RUNS, SSPStopDecision, ssp_stop_decision
from fingrav.analysis.tdist import ratio_t_half_width
from fingrav.collect.runner import SSP_CHECK_EVERY
from fingrav.contracts.plan import Plan

logger = logging.getLogger("ssp_stop_rules")

ROOT = Path(__file__).resolve().parents[1]
RULES = ("current", "stat", "unsettled", "total")


@dataclass(frozen=True)
class RunSums:
    """Per SSP run in run order: its tail's LOI sum (mW) and count, and those of the tail's first and second half;
    the run ids and each run's GPU-seconds (host start to the next run's start)."""

    sum_mw: np.ndarray
    lois: np.ndarray
    early_mw: np.ndarray
    early_n: np.ndarray
    late_mw: np.ndarray
    late_n: np.ndarray
    run_ids: np.ndarray
    run_s: np.ndarray


def _start(idx: np.ndarray, start: np.ndarray, j: int, default: int) -> int:
    hit = start[idx == j]
    return int(hit[0]) if hit.size else default


def run_sums(raw: Path, plan: Plan) -> RunSums | None:
    """The collector's per-run SSP LOI sums of one scenario's raw folder (module docstring); None without SSP runs."""
    runs = pl.read_parquet(raw / "runs.parquet").sort("host_start_ns")
    t_all = runs["host_start_ns"].to_numpy()
    gaps = np.diff(t_all)
    run_s = np.append(gaps, np.median(gaps[-5:]) if gaps.size else 0) / 1e9
    is_ssp = (runs["phase"] == "ssp").to_numpy()
    ids = runs["run"].to_numpy()[is_ssp]
    if ids.size == 0:
        return None
    ex = pl.read_parquet(raw / "executions.parquet").filter(pl.col("run").is_in(ids) & (pl.col("segment") == "main"))
    clock = pl.read_parquet(raw / "clock.parquet").filter(pl.col("source") == "run")
    s = plan.sensor
    group = s.window_ns / 2 + s.lag_ns
    shift = int(s.delay_ns + (group if group <= plan.trailing * plan.cycle_ns else 0))
    smp = pl.read_parquet(raw / "samples.parquet").filter(pl.col("channel") == "total").sort("t_ns")
    t = smp["t_ns"].to_numpy() - shift
    c = np.concatenate(([0.0], np.cumsum(smp["power_mw"].to_numpy().astype(np.float64))))
    half = plan.tail // 2
    out = np.zeros((ids.size, 6))
    for i, run in enumerate(ids.tolist()):
        e = ex.filter(pl.col("run") == run)
        idx, start, end = e["exec_index"].to_numpy(), e["gpu_start_ns"].to_numpy(), e["gpu_end_ns"].to_numpy()
        read = clock.filter(pl.col("run") == run)
        if read.height == 0 or not (idx == plan.ssp_index).any():
            continue
        off = int((read["host_before_ns"][0] + read["host_after_ns"][0]) // 2) - int(read["gpu_ns"][0])
        a = _start(idx, start, plan.ssp_index, 0)
        b = _start(idx, start, plan.trail_index, int(end[idx == idx.max()][0]))
        m = _start(idx, start, plan.ssp_index + half, b)
        f = _start(idx, start, plan.ssp_index + 2 * half, b)
        lo, hi, mi, fi = (int(np.searchsorted(t, x + off, "left")) for x in (a, b, m, f))
        fi = max(fi, mi)
        out[i] = (c[hi] - c[lo], hi - lo, c[mi] - c[lo], mi - lo, c[fi] - c[mi], fi - mi)
    return RunSums(*(out[:, j] for j in range(6)), ids, run_s[is_ssp])


def tail_trend(r: RunSums, k: int, plan: Plan) -> tuple[float, float, float] | None:
    """(z, change across the tail mW, bias bound mW) of the first k runs' tail trend: the halves' pooled means, the
    delta-method standard error of their difference over runs; the bounds as `fingrav.analysis.settling` draws
    them (slope beyond its noise x the group delay). None where a half has fewer than 3 LOIs."""
    half = plan.tail // 2
    s1, n1, s2, n2 = r.early_mw[:k], r.early_n[:k], r.late_mw[:k], r.late_n[:k]
    if half < 1 or n1.sum() < 3 or n2.sum() < 3:
        return None
    m1, m2 = s1.sum() / n1.sum(), s2.sum() / n2.sum()
    u = (s2 - m2 * n2) / n2.sum() - (s1 - m1 * n1) / n1.sum()
    se = float(np.sqrt(k / (k - 1) * float((u**2).sum())))
    diff = float(m2 - m1)
    z = diff / se if se > 0 else 0.0
    group = plan.sensor.window_ns / 2 + plan.sensor.lag_ns
    change, bias = trend_bounds(diff, se, half, plan.tail, float(plan.cycle_ns), group)
    return z, change, bias


def decide(r: RunSums, k: int, plan: Plan, rule: str, target: float) -> tuple[bool, str]:
    """(stop, why) after the first k SSP runs under `rule` (module docstring)."""
    ci_pct = target if rule == "stat" else float(plan.ssp_ci_pct or 0.0)
    d: SSPStopDecision = ssp_stop_decision(r.sum_mw[:k], r.lois[:k], int(plan.ssp_min_lois or 1), ci_pct, plan.runs)
    if rule in ("current", "stat") or d.runs < MIN_RUNS or d.lois < int(plan.ssp_min_lois or 1):
        return not d.extend, d.reason
    mean, half = ratio_t_half_width(r.sum_mw[:k], r.lois[:k])
    if mean is None or half is None or mean == 0:
        return not d.extend, d.reason
    tr = tail_trend(r, k, plan)
    if tr is not None and abs(tr[0]) > TREND_Z and tr[1] > abs(half):
        return True, "tail_unsettled"
    if rule == "total":
        total = (abs(half) + (tr[2] if tr is not None else 0.0)) / abs(mean) * 100.0
        return (True, "ci_reached") if total <= target else (k >= plan.runs, "max_runs")
    return not d.extend, d.reason


def stop_at(r: RunSums, plan: Plan, rule: str, target: float) -> tuple[int, str]:
    """The SSP runs the rule would have run (at most as many as ran) and why it stopped there."""
    n = r.run_ids.size
    for k in range(MIN_RUNS, n + 1, SSP_CHECK_EVERY):
        stop, why = decide(r, k, plan, rule, target)
        if stop:
            return k, why
    return n, "as_collected"


def cut(src: Path, dst: Path, keep: dict[str, np.ndarray]) -> None:
    """Copy a dataset's gpu folder to `dst` with, per scenario, the SSP runs not in keep[scenario] dropped from the
    run-level tables (runs, executions, clock reads, telemetry; the samples stay), manifests rewritten."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    for scen, drop in keep.items():
        d = dst / "raw" / "gpu0" / scen
        for name in ("runs", "executions", "clock", "telemetry"):
            frame = pl.read_parquet(d / f"{name}.parquet")
            if "run" in frame.columns:
                frame.filter(~pl.col("run").is_in(drop.tolist())).write_parquet(d / f"{name}.parquet")
        rawio.write_manifest(d, list(json.loads((d / rawio.MANIFEST).read_text())["files"]))
        done = json.loads((d / "COLLECTED.json").read_text())
        done["manifest_sha256"] = hashlib.sha256((d / rawio.MANIFEST).read_bytes()).hexdigest()
        (d / "COLLECTED.json").write_text(json.dumps(done, indent=2))


def run_dataset(name: str, rule: str, target: float, cut_dir: Path | None) -> dict[str, object]:
    """The rule on one dataset: SSP runs and GPU-seconds saved, the rows it changes and why; with cut_dir the cut
    raw data and its replay config."""
    gpu = ROOT / "results" / name / "gpu"
    raw_root = gpu / "raw" / "gpu0"
    if not raw_root.exists():
        raise SystemExit(f"results/{name}/gpu/raw is not there: run results/{name}/replay.sh first (it restores it)")
    saved_runs, saved_s, changed, drops = 0, 0.0, {}, {}
    for raw in sorted(p.parent for p in raw_root.glob("*/plan.json")):
        plan = Plan.model_validate(json.loads((raw / "plan.json").read_text()))
        if plan.ssp_ci_pct is None:
            continue
        r = run_sums(raw, plan)
        if r is None:
            continue
        k, why = stop_at(r, plan, rule, target)
        if k < r.run_ids.size:
            saved_runs += r.run_ids.size - k
            saved_s += float(r.run_s[k:].sum())
            changed[raw.name] = {"ran": int(r.run_ids.size), "would_run": k, "why": why}
            drops[raw.name] = r.run_ids[k:]
    if cut_dir is not None:
        cut(gpu, cut_dir / name / "gpu", drops)
        cfg = (ROOT / "config" / f"{name}-replay.yaml").read_text()
        cfg = cfg.replace(f"sweep: {name}-replay", f"sweep: {name}-cut").replace(
            f"replay_dir: results/{name}/gpu", f"replay_dir: {cut_dir / name / 'gpu'}"
        )
        (cut_dir / f"{name}.yaml").write_text(cfg)
    return {"dataset": name, "rule": rule, "target_pct": target, "ssp_runs_saved": saved_runs,
            "gpu_s_saved": round(saved_s, 1), "rows_changed": changed}  # fmt: skip


def compare_cut(name: str) -> dict[str, object]:
    """The analysis of the cut raw data (results/<name>-cut, from the `--cut` config) against the full replay's
    (results/<name>-replay): rows and method SSPs valid in one and not the other, the method SSP's CI half-width
    (median over the rows valid in both, %) and its largest move, the headline's largest move (%)."""
    cols = ["scenario", "valid", "ssp_valid", "power_w", "ssp_power_w", "ssp_power_ci_low_w", "ssp_power_ci_high_w"]
    full = pl.read_csv(ROOT / "results" / f"{name}-replay" / "summary.csv").select(cols)
    cut = pl.read_csv(ROOT / "results" / f"{name}-cut" / "summary.csv").select(cols)
    j = full.join(cut, on="scenario", suffix="_cut")
    both = j.filter(pl.col("ssp_valid") & pl.col("ssp_valid_cut"))

    def half(sfx: str) -> pl.Expr:
        return (pl.col(f"ssp_power_ci_high_w{sfx}") - pl.col(f"ssp_power_ci_low_w{sfx}")) / 2 / pl.col("ssp_power_w")

    def moved(col: str) -> float:
        return float(j.select(((pl.col(f"{col}_cut") / pl.col(col) - 1).abs() * 100).max()).item() or 0.0)

    return {
        "valid": [int(full["valid"].sum()), int(cut["valid"].sum())],
        "rows_lost": j.filter(pl.col("valid") & ~pl.col("valid_cut"))["scenario"].to_list(),
        "ssp_valid": [int(full["ssp_valid"].sum()), int(cut["ssp_valid"].sum())],
        "ssp_lost": j.filter(pl.col("ssp_valid") & ~pl.col("ssp_valid_cut"))["scenario"].to_list(),
        "ssp_gained": j.filter(~pl.col("ssp_valid") & pl.col("ssp_valid_cut"))["scenario"].to_list(),
        "ssp_ci_median_pct": [
            float(both.select(half("").median() * 100).item() or 0.0),
            float(both.select(half("_cut").median() * 100).item() or 0.0),
        ],
        "ssp_moved_max_pct": moved("ssp_power_w"),
        "headline_moved_max_pct": moved("power_w"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("datasets", nargs="+", help="committed datasets (results/<name>), raw data restored")
    ap.add_argument("--rule", choices=RULES, default="current")
    ap.add_argument("--target", type=float, default=0.8, help="the `stat` and `total` rules' CI target, %%")
    ap.add_argument("--cut", type=Path, help="write the cut raw data and replay configs here")
    ap.add_argument("--compare", action="store_true", help="instead: results/<name>-cut against <name>-replay")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.compare:
        for name in args.datasets:
            sys.stdout.write(json.dumps({"dataset": name, **compare_cut(name)}) + "\n")
        return 0
    for name in args.datasets:
        res = run_dataset(name, args.rule, args.target, args.cut)
        why: dict[str, int] = {}
        for row in res["rows_changed"].values():  # type: ignore[union-attr]
            why[row["why"]] = why.get(row["why"], 0) + 1
        logger.info("%s: %s: %d SSP runs, %.1f GPU-s saved; %d rows changed %s", name, args.rule,
                    res["ssp_runs_saved"], res["gpu_s_saved"], len(res["rows_changed"]), why)  # fmt: skip
        sys.stdout.write(json.dumps(res) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
