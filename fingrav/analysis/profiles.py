"""Profiles (METHOD.md step 9) with confidence intervals: per channel and role, the mean power of the
LOIs of golden runs, a cluster bootstrap CI over runs, and a polynomial fit of power vs toi_frac;
execution time, energy per execution, SSE-vs-SSP and interleaved-vs-SSP errors.

The cluster bootstrap resamples golden runs with replacement. One matrix of counts C (reps x runs,
C[b, r] = times run r is drawn in replicate b) is shared by every statistic, so derived quantities
(errors, energy) are paired across replicates. A ratio mean over LOIs is then
(C @ sum_power_per_run) / (C @ lois_per_run), one matrix product for all replicates.

Statistic groups (in the summary's "channels"): ssp = main executions >= ssp_index (the SSP tail),
sse = main execution sse_index, first = main execution 0 when a predecessor exists (interleaved),
warmup = the other main executions, pred = predecessor executions. They are defined by execution
index, so "sse" still exists when sse_index == ssp_index (its LOIs then carry role "ssp").
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis._common import MAIN, PRED, TOTAL, PlanView

logger = logging.getLogger(__name__)

GROUPS = ("ssp", "sse", "first", "warmup", "pred")
MAX_BOOT_CELLS_PER_CHUNK = 4_000_000


def group_exprs(view: PlanView) -> dict[str, pl.Expr]:
    """Membership of an execution (columns segment, exec_index) in each statistic group."""
    seg = pl.col("segment").cast(pl.String)
    i = pl.col("exec_index")
    main = seg == MAIN
    ssp = main & (i >= view.ssp_index)
    sse = main & (i == view.sse_index)
    first = main & (i == 0) & pl.lit(view.predecessor_count > 0)
    return {"ssp": ssp, "sse": sse, "first": first, "warmup": main & ~ssp & ~sse & ~first, "pred": seg == PRED}


# --------------------------------------------------------------------------- bootstrap
class ClusterBootstrap:
    """Resampling of `n_runs` clusters (runs): counts (reps x n_runs, float64)."""

    def __init__(self, n_runs: int, reps: int, level: float, seed: int = 0) -> None:
        self.n_runs = int(n_runs)
        self.reps = int(reps)
        self.level = float(level)
        rng = np.random.default_rng(seed)
        counts = np.zeros((self.reps, self.n_runs), dtype=np.float64)
        if self.n_runs:
            rows = max(1, MAX_BOOT_CELLS_PER_CHUNK // self.n_runs)
            for b0 in range(0, self.reps, rows):
                b1 = min(self.reps, b0 + rows)
                idx = rng.integers(0, self.n_runs, size=(b1 - b0, self.n_runs))
                idx += (np.arange(b1 - b0) * self.n_runs)[:, None]
                counts[b0:b1] = np.bincount(idx.ravel(), minlength=(b1 - b0) * self.n_runs).reshape(
                    b1 - b0, self.n_runs)
        self.counts = counts

    def ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """Replicates of sum(num) / sum(den) over resampled runs (nan where the denominator is 0)."""
        n = self.counts @ np.asarray(num, dtype=np.float64)
        d = self.counts @ np.asarray(den, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(d > 0, n / np.where(d > 0, d, 1.0), np.nan)

    def median(self, values: np.ndarray) -> np.ndarray:
        """Replicates of the median of per-run `values` (weighted by the resampling counts)."""
        values = np.asarray(values, dtype=np.float64)
        if values.size == 0:
            return np.full(self.reps, np.nan)
        order = np.argsort(values, kind="stable")
        v = values[order]
        cum = np.cumsum(self.counts[:, order], axis=1)
        n = self.n_runs
        k1, k2 = (n + 1) // 2, n // 2 + 1  # 1-based ranks of the two middle elements
        i1 = np.argmax(cum >= k1, axis=1)
        i2 = np.argmax(cum >= k2, axis=1)
        return 0.5 * (v[i1] + v[i2])

    def ci(self, replicates: np.ndarray) -> tuple[float | None, float | None]:
        """Percentile interval at `level` (None when no finite replicate)."""
        r = np.asarray(replicates, dtype=np.float64)
        r = r[np.isfinite(r)]
        if r.size == 0:
            return None, None
        a = (1.0 - self.level) / 2.0
        lo, hi = np.quantile(r, [a, 1.0 - a])
        return float(lo), float(hi)


# --------------------------------------------------------------------------- fits
def poly_fit(x: np.ndarray, y: np.ndarray, degree: int) -> list[float] | None:
    """numpy.polyfit coefficients (highest power first) of y vs x, degree lowered to
    (distinct x - 1) when there are too few points; None without points."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size == 0:
        return None
    distinct = pl.Series(x).n_unique()
    deg = min(int(degree), distinct - 1)
    if deg < 0:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        coeffs = np.polyfit(x, y, deg)
    return [float(c) for c in coeffs]


# --------------------------------------------------------------------------- profiles
def _f(v: float | None) -> float | None:
    return None if v is None or not math.isfinite(v) else float(v)


@dataclass
class ProfileResult:
    """Per channel/group statistics (JSON-able `channels`), bootstrap replicates, derived numbers."""

    channels: dict[str, dict[str, dict[str, Any]]]
    replicates: dict[tuple[str, str], np.ndarray]
    golden_runs: np.ndarray
    derived: dict[str, Any] = field(default_factory=dict)


def _per_run(frame: pl.DataFrame, golden_runs: pl.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray]:
    """(sum of `value`, count) per golden run, aligned with golden_runs (zeros for absent runs)."""
    agg = frame.group_by("run").agg(s=pl.col(value).sum(), n=pl.len())
    aligned = golden_runs.join(agg, on="run", how="left", maintain_order="left").fill_null(0)
    return aligned["s"].cast(pl.Float64).to_numpy(), aligned["n"].cast(pl.Float64).to_numpy()


def compute_profiles(
    lois: pl.DataFrame,
    host_execs: pl.DataFrame,
    plan: Mapping[str, Any],
    analysis: Mapping[str, Any],
    seed: int = 0,
) -> ProfileResult:
    """Profiles of the golden runs.

    lois: lois frame (loi.LOIS_SCHEMA); host_execs: loi.host_executions output (with golden);
    plan: plan.json; analysis: AnalysisConfig dict (bootstrap_reps, ci_level, fit_degree).
    channels[ch][group] = {mean_mw, ci_low_mw, ci_high_mw, lois, runs_with_lois, fit_coeffs};
    derived = exec_time_ns {median, ci_low, ci_high}, exec_time_mean_ns, energy_per_exec_mj
    {value, ci_low, ci_high}, sse_vs_ssp_error_pct / interleaved_vs_ssp_pct {value, ci_low, ci_high}.
    """
    view = PlanView.from_plan(plan)
    reps = int(analysis.get("bootstrap_reps", 1000))
    level = float(analysis.get("ci_level", 0.95))
    degree = int(analysis.get("fit_degree", 4))
    groups = group_exprs(view)

    golden_runs = host_execs.filter(pl.col("golden")).select("run").unique().sort("run")
    boot = ClusterBootstrap(golden_runs.height, reps, level, seed=seed)
    gl = lois.filter(pl.col("golden"))

    channels: dict[str, dict[str, dict[str, Any]]] = {}
    replicates: dict[tuple[str, str], np.ndarray] = {}
    points: dict[tuple[str, str], float | None] = {}
    channel_names = sorted(lois["channel"].unique().to_list(), key=lambda c: (c != TOTAL, c))
    parts = {k[0]: v for k, v in gl.partition_by("channel", as_dict=True).items()}
    for ch in channel_names:
        part = parts.get(ch, gl.clear())
        channels[ch] = {}
        for g in GROUPS:
            if g == "first" and view.predecessor_count == 0:
                continue
            if g == "pred" and view.predecessor_count == 0:
                continue
            sel = part.filter(groups[g])
            n_lois = sel.height
            s, n = _per_run(sel.select("run", "power_mw"), golden_runs, "power_mw")
            mean = float(s.sum() / n.sum()) if n.sum() > 0 else None
            rep = boot.ratio(s, n)
            lo, hi = boot.ci(rep) if mean is not None else (None, None)
            replicates[(ch, g)] = rep
            points[(ch, g)] = mean
            channels[ch][g] = {
                "mean_mw": _f(mean),
                "ci_low_mw": _f(lo),
                "ci_high_mw": _f(hi),
                "lois": n_lois,
                "runs_with_lois": int((n > 0).sum()),
                "fit_coeffs": poly_fit(sel["toi_frac"].to_numpy(), sel["power_mw"].to_numpy(), degree),
            }

    derived: dict[str, Any] = {}
    # execution time: per golden run, mean host-clock duration of the SSP-tail executions
    tail = host_execs.filter(pl.col("golden") & groups["ssp"]).select("run", "dur_ns")
    tsum, tcnt = _per_run(tail, golden_runs, "dur_ns")
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run_t = np.where(tcnt > 0, tsum / np.where(tcnt > 0, tcnt, 1), np.nan)
    have_t = bool(np.isfinite(per_run_t).any())
    t_med = float(np.nanmedian(per_run_t)) if have_t else None
    t_lo, t_hi = boot.ci(boot.median(np.nan_to_num(per_run_t, nan=np.nanmedian(per_run_t)))) if have_t \
        else (None, None)
    t_mean = float(tsum.sum() / tcnt.sum()) if tcnt.sum() > 0 else None
    derived["exec_time_ns"] = {"value": _f(t_med), "ci_low": _f(t_lo), "ci_high": _f(t_hi)}
    derived["exec_time_mean_ns"] = _f(t_mean)

    ssp_p = points.get((TOTAL, "ssp"))
    if ssp_p is not None and t_mean is not None:
        e_rep = replicates[(TOTAL, "ssp")] * boot.ratio(tsum, tcnt) * 1e-9
        e_lo, e_hi = boot.ci(e_rep)
        derived["energy_per_exec_mj"] = {"value": ssp_p * t_mean * 1e-9, "ci_low": e_lo, "ci_high": e_hi}
    else:
        derived["energy_per_exec_mj"] = {"value": None, "ci_low": None, "ci_high": None}

    for name, g in (("sse_vs_ssp_error_pct", "sse"), ("interleaved_vs_ssp_pct", "first")):
        other = points.get((TOTAL, g))
        if ssp_p is None or other is None or ssp_p == 0:
            derived[name] = {"value": None, "ci_low": None, "ci_high": None}
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            rep = (replicates[(TOTAL, g)] - replicates[(TOTAL, "ssp")]) / replicates[(TOTAL, "ssp")] * 100.0
        lo, hi = boot.ci(rep)
        derived[name] = {"value": (other - ssp_p) / ssp_p * 100.0, "ci_low": lo, "ci_high": hi}

    return ProfileResult(channels, replicates, golden_runs["run"].to_numpy(), derived)
