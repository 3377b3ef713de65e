"""Profiles (METHOD.md step 9) with confidence intervals: per channel and role, the mean power of the
LOIs of golden runs, a cluster bootstrap CI over runs, and a polynomial fit of power vs toi_frac;
execution time, cycle time, energy per execution, SSE-vs-SSP and interleaved-vs-SSP errors.

The cluster bootstrap resamples golden runs with replacement, stratified by run kind: SSP runs are
drawn among the golden SSP runs and SSE runs among the golden SSE runs, so every replicate has as many
runs of each kind as the data. One matrix of counts C (reps x runs, C[b, r] = times run r is drawn in
replicate b) is shared by every statistic, so derived quantities (errors, energy) are paired across
replicates. A ratio mean over LOIs is then (C @ sum_power_per_run) / (C @ lois_per_run), one matrix
product for all replicates.

Statistic groups (in the summary's "channels"): ssp = the SSP tail of SSP runs (main executions
ssp_index .. ssp_index + tail - 1), sse = main execution sse_index of runs of BOTH kinds (the sensor is
causal: the SSE execution of an SSP run has the same history as in an SSE run), first = main
execution 0 when a predecessor exists (interleaved; both kinds), warmup = the other main executions
before the tail (both kinds), pred = predecessor executions (both kinds); trailing executions are
never profiled. They are defined by execution index, so "sse" still exists when sse_index ==
ssp_index (its LOIs in SSP runs then carry role "ssp").

Energy per execution = SSP power x SSP cycle time (start of an SSP execution to the start of the
next, ARCHITECTURE.md), from the SSP executions that have a successor in their run.
"""

from __future__ import annotations

import functools
import logging
import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis.placement import PLACEMENT_METHOD, PlacementTerm, placement_term
from fingrav.analysis.roles import ROLE_DTYPE
from fingrav.analysis.settling import (
    TailTrend,
    quantization_bias_mw,
    reading_quantization_bias_mw,
    residual_transient_mw,
    tail_trend,
)
from fingrav.analysis.tdist import t_critical
from fingrav.config import AnalysisConfig
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import ROLE_STATS_METHOD, RoleStats
from fingrav.contracts.result import Estimate, finite
from fingrav.contracts.roles import MAIN, PRED, PROFILED_ROLES, ROLES, SSE, TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import MJ_PER_MW_NS

logger = logging.getLogger(__name__)

GROUPS = PROFILED_ROLES
MAX_BOOT_CELLS_PER_CHUNK = 4_000_000


def group_exprs(view: Plan, phase: str | None = "phase") -> dict[str, pl.Expr]:
    """Membership of an execution (columns segment, exec_index and `phase`, the run kind "sse" |
    "ssp") in each statistic group. phase None: every execution is of an SSP run."""
    seg = pl.col("segment")  # String or Enum: compared with a literal directly (no per-row cast)
    i = pl.col("exec_index")
    main = seg == MAIN
    ssp_run = pl.col(phase) != SSE if phase is not None else pl.lit(True)
    ssp = main & ssp_run & (i >= view.ssp_index) & (i < view.trail_index)
    trail = main & ssp_run & (i >= view.trail_index)
    sse = main & (i == view.sse_index)
    first = main & (i == 0) & pl.lit(view.predecessor_count > 0)
    return {"ssp": ssp, "sse": sse, "first": first, "warmup": main & ~ssp & ~sse & ~first & ~trail, "pred": seg == PRED}


# --------------------------------------------------------------------------- bootstrap
def ratio_of(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den elementwise (replicates of a ratio mean), nan where den is 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)


class ClusterBootstrap:
    """Resampling of `n_runs` clusters (runs): counts (reps x n_runs, float64).

    strata: optional stratum label per run (e.g. 0 = SSP run, 1 = SSE run); each replicate draws, with
    replacement, as many runs of each stratum as there are, among that stratum's runs. None: one
    stratum."""

    def __init__(self, n_runs: int, reps: int, level: float, seed: int = 0, strata: np.ndarray | None = None) -> None:
        self.n_runs = int(n_runs)
        self.reps = int(reps)
        self.level = float(level)
        rng = np.random.default_rng(seed)
        strata = np.zeros(self.n_runs, dtype=np.int64) if strata is None else np.asarray(strata)
        if strata.shape != (self.n_runs,):
            raise ValueError(f"strata has shape {strata.shape}, expected ({self.n_runs},)")
        counts = np.zeros((self.reps, self.n_runs), dtype=np.float64)
        for label in np.unique(strata):  # sorted: deterministic for a seed
            members = np.flatnonzero(strata == label)
            m = members.size
            rows = max(1, MAX_BOOT_CELLS_PER_CHUNK // m)
            for b0 in range(0, self.reps, rows):
                b1 = min(self.reps, b0 + rows)
                idx = rng.integers(0, m, size=(b1 - b0, m))
                idx += (np.arange(b1 - b0) * m)[:, None]
                drawn = np.bincount(idx.ravel(), minlength=(b1 - b0) * m).reshape(b1 - b0, m).astype(np.float64)
                if members[-1] - members[0] == m - 1:  # the stratum's runs side by side: a slice, not a scatter
                    counts[b0:b1, members[0] : members[-1] + 1] = drawn
                else:
                    counts[b0:b1, members] = drawn
        self.counts = counts

    def ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """Replicates of sum(num) / sum(den) over resampled runs (nan where the denominator is 0)."""
        nd = self.counts @ np.column_stack([num, den]).astype(np.float64)  # one pass over the counts for both
        return ratio_of(nd[:, 0], nd[:, 1])

    def median(self, values: np.ndarray, members: np.ndarray | None = None) -> np.ndarray:
        """Replicates of the median of per-run `values` (weighted by the resampling counts), over the
        runs `members` (indices; None: all runs). nan in replicates that draw none of them."""
        values = np.asarray(values, dtype=np.float64)
        counts = self.counts
        if members is not None:
            members = np.asarray(members, dtype=np.int64)
            values, counts = values[members], counts[:, members]
        if values.size == 0:
            return np.full(self.reps, np.nan)
        order = np.argsort(values, kind="stable")
        v = values[order]
        cum = np.cumsum(counts[:, order], axis=1)
        n = cum[:, -1]
        k1, k2 = (n + 1) // 2, n // 2 + 1  # 1-based ranks of the two middle elements
        i1 = np.argmax(cum >= k1[:, None], axis=1)
        i2 = np.argmax(cum >= k2[:, None], axis=1)
        return np.where(n > 0, 0.5 * (v[i1] + v[i2]), np.nan)

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
SMALL_FIT_POINTS = 100_000  # up to this many points: numpy.polyfit itself
FIT_CHUNK = 1_000_000  # points per chunk of the normal equations (bounds memory)
MAX_GRAM_COND = 1e12  # a Gram block worse than this has too few distinct points: lower the degree


def poly_fit(x: np.ndarray, y: np.ndarray, degree: int) -> list[float] | None:
    """Least-squares polynomial of y vs x as numpy.polyfit returns it (highest power first).

    The degree is lowered to (distinct x - 1) when there are too few points; None without points.
    Up to SMALL_FIT_POINTS points this is numpy.polyfit; above, the same least-squares problem is
    solved from normal equations accumulated in chunks in the shifted Legendre basis P_k(2x - 1)
    (well conditioned for x in [0, 1], constant memory), then converted to powers of x."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.size == 0:
        return None
    degree = int(degree)
    if x.size > SMALL_FIT_POINTS:
        return _legendre_fit(x, y, degree)
    deg = min(degree, int(np.unique(x).size) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        coeffs = np.polyfit(x, y, deg)
    return [float(c) for c in coeffs]


CV_FOLDS = 5
CV_MAX_POINTS = 20_000  # above this, the degree is chosen on a seeded subsample of this many points


def cv_degree(x: np.ndarray, y: np.ndarray, max_degree: int, seed: int = 0) -> int:
    """The polynomial degree (0 .. max_degree) the data support: K-fold cross-validated mean squared error, the
    lowest degree within one standard error of the best (the one-standard-error rule), so sparse or noisy channels
    get a flat or low-degree fit instead of a wiggle."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    max_degree = min(int(max_degree), int(np.unique(x).size) - 1)
    if max_degree <= 0 or x.size < 2 * CV_FOLDS:
        return max(0, max_degree) if x.size >= 2 * CV_FOLDS else 0
    rng = np.random.default_rng(seed)
    if x.size > CV_MAX_POINTS:
        pick = rng.choice(x.size, CV_MAX_POINTS, replace=False)
        x, y = x[pick], y[pick]
    fold = rng.permutation(x.size) % CV_FOLDS
    errs = _cv_errors(x, y, fold, max_degree)
    if errs is None:  # a training fold too degenerate for the batched solve: numpy.polyfit fold by fold
        errs = _cv_errors_polyfit(x, y, fold, max_degree)
    mean = errs.mean(axis=1)
    se = errs.std(axis=1, ddof=1) / np.sqrt(CV_FOLDS)
    best = int(np.argmin(mean))
    return int(np.flatnonzero(mean <= mean[best] + se[best])[0])


#: a fold's triangular factor with a diagonal entry below this fraction of its largest: too few distinct TOIs for the
#: batched solve (numpy.polyfit's minimum-norm answer is used then)
CV_MIN_DIAG = 1e-8


def _cv_errors(x: np.ndarray, y: np.ndarray, fold: np.ndarray, max_degree: int) -> np.ndarray | None:
    """Test-fold mean squared errors (degrees 0..max_degree x folds) of the least-squares polynomials fitted on the
    other folds: one QR factorization (R only) per fold of the column-scaled Vandermonde matrix in increasing powers
    (the test rows zeroed), all folds in one stacked call; Q^T y = R^-T A^T y, and the fit of degree d is the
    triangular solve of the leading (d + 1) block, since the first d + 1 columns of Q span the same space as the
    first d + 1 powers. The same least-squares problems numpy.polyfit solves one by one (test errors within ~1e-10
    relative of its); None where a fold's factor is near singular."""
    p = max_degree + 1
    v = np.vander(x, p, increasing=True)
    v /= np.sqrt((v * v).sum(axis=0))
    test = fold[None, :] == np.arange(CV_FOLDS)[:, None]  # (folds, points)
    a = v[None, :, :] * ~test[:, :, None]  # (folds, points, p)
    r = np.linalg.qr(a, mode="r")
    diag = np.abs(np.diagonal(r, axis1=1, axis2=2))
    if not (diag.min(axis=1) > CV_MIN_DIAG * diag.max(axis=1)).all():
        return None
    aty = np.swapaxes(a, 1, 2) @ np.where(test, 0.0, y)[:, :, None]  # (folds, p, 1)
    z = np.linalg.solve(np.swapaxes(r, 1, 2), aty)[:, :, 0]  # Q^T y = R^-T A^T y per fold
    n_test = test.sum(axis=1)
    errs = np.empty((p, CV_FOLDS))
    for d in range(p):
        c = np.linalg.solve(r[:, : d + 1, : d + 1], z[:, : d + 1, None])[:, :, 0]  # (folds, d + 1)
        resid = v[:, : d + 1] @ c.T - y[:, None]  # (points, folds)
        errs[d] = np.where(test.T, resid * resid, 0.0).sum(axis=0) / n_test
    return errs


def _cv_errors_polyfit(x: np.ndarray, y: np.ndarray, fold: np.ndarray, max_degree: int) -> np.ndarray:
    """`_cv_errors` by numpy.polyfit, one fit per degree and fold."""
    errs = np.zeros((max_degree + 1, CV_FOLDS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.RankWarning)
        for d in range(max_degree + 1):
            for k in range(CV_FOLDS):
                tr, te = fold != k, fold == k
                c = np.polyfit(x[tr], y[tr], d)
                errs[d, k] = float(np.mean((np.polyval(c, x[te]) - y[te]) ** 2))
    return errs


def _legendre_fit(x: np.ndarray, y: np.ndarray, degree: int) -> list[float]:
    leg = np.polynomial.legendre
    gram = np.zeros((degree + 1, degree + 1))
    rhs = np.zeros(degree + 1)
    for i in range(0, x.size, FIT_CHUNK):
        v = leg.legvander(2.0 * x[i : i + FIT_CHUNK] - 1.0, degree)
        gram += v.T @ v
        rhs += v.T @ y[i : i + FIT_CHUNK]
    deg = degree
    while deg > 0 and np.linalg.cond(gram[: deg + 1, : deg + 1]) > MAX_GRAM_COND:
        deg -= 1
    c = np.linalg.solve(gram[: deg + 1, : deg + 1], rhs[: deg + 1])
    in_u = np.polynomial.Polynomial(leg.leg2poly(c))
    in_x = in_u(np.polynomial.Polynomial([-1.0, 2.0])).coef  # u = 2x - 1; lowest power first
    out = np.zeros(deg + 1)
    out[: min(deg + 1, in_x.size)] = in_x[: deg + 1]
    return [float(v) for v in out[::-1]]


# --------------------------------------------------------------------------- profiles
_f = finite
MEDIAN_METHOD = "median over golden SSP runs of the per-run mean; CI: cluster bootstrap over runs"
BOOT_METHOD = "cluster bootstrap over runs (percentile interval), paired replicates"


@dataclass(frozen=True)
class ProfileNumbers:
    """What compute_profiles derives beyond the per-group statistics: execution and cycle time (ns: median over
    golden SSP runs with a bootstrap CI; and the pooled means), the method SSP's energy per execution (mJ), the
    SSE and interleaved readings vs the SSP (%, paired bootstrap) and whether the SSP tail still trends."""

    exec_time_ns: Estimate
    exec_time_mean_ns: float | None
    cycle_time_ns: Estimate
    cycle_time_mean_ns: float | None
    energy_per_exec_mj: Estimate
    sse_reading_vs_ssp_pct: Estimate
    interleaved_reading_vs_ssp_pct: Estimate
    tail_unsettled: bool


@dataclass(frozen=True)
class ProfileResult:
    """Per channel/group statistics (`RoleStats`), bootstrap replicates, the derived numbers."""

    channels: dict[str, dict[str, RoleStats]]
    replicates: dict[tuple[str, str], np.ndarray]
    golden_runs: np.ndarray
    numbers: ProfileNumbers
    boot: ClusterBootstrap | None = None  # the resampling every statistic shares (run order = golden_runs)
    cycle_replicates: np.ndarray | None = None  # bootstrap replicates of the pooled mean SSP cycle time (ns)


@dataclass(frozen=True)
class GoldenRuns:
    """The golden runs (sorted run ids, whether each is an SSE run, the SSP runs' positions) and the cluster
    bootstrap over them that every statistic shares."""

    frame: pl.DataFrame  # one column "run"
    run_ids: np.ndarray
    strata: np.ndarray
    ssp_members: np.ndarray
    boot: ClusterBootstrap


@dataclass
class _GroupStats:
    """Mutable per-group statistics while compute_profiles widens their CIs (-> RoleStats at the end)."""

    channels: dict[str, dict[str, dict[str, Any]]]
    replicates: dict[tuple[str, str], np.ndarray]
    points: dict[tuple[str, str], float | None]


@dataclass(frozen=True)
class _Times:
    exec_time: Estimate
    exec_mean: float | None
    cycle_time: Estimate
    cycle_mean: float | None
    cycle_sums: np.ndarray
    cycle_counts: np.ndarray


def _per_run(frame: pl.DataFrame, golden_runs: pl.DataFrame, value: str) -> tuple[np.ndarray, np.ndarray]:
    """(sum of `value`, count) per golden run, aligned with golden_runs (zeros for absent runs)."""
    agg = frame.group_by("run").agg(s=pl.col(value).sum(), n=pl.len())
    aligned = golden_runs.join(agg, on="run", how="left", maintain_order="left").fill_null(0)
    return aligned["s"].cast(pl.Float64).to_numpy(), aligned["n"].cast(pl.Float64).to_numpy()


def _golden_arrays(lois: pl.DataFrame, run_ids: np.ndarray, with_exec: bool) -> dict[str, Any]:
    """Golden LOIs as numpy arrays sorted by (channel, role): pos (index of the run in run_ids), power,
    toi (toi_frac), and with_exec: main (segment == "main"), exec_index. bounds[k]..bounds[k+1] is
    the slice of key k = channel_index * len(ROLES) + role_index; channel_names "total" first."""
    names = lois.lazy().select(pl.col("channel").unique()).collect()["channel"].to_list()
    channel_names = sorted(names, key=lambda c: (c != TOTAL, c))
    chan_code: pl.Expr = pl.lit(0, dtype=pl.Int32)
    for i, ch in enumerate(channel_names[1:], start=1):
        chan_code = pl.when(pl.col("channel") == ch).then(pl.lit(i, dtype=pl.Int32)).otherwise(chan_code)
    cols = [
        (chan_code * len(ROLES) + pl.col("role").cast(ROLE_DTYPE).to_physical().cast(pl.Int32)).alias("key"),
        pl.col("run"),
        pl.col("toi_frac"),
        pl.col("power_mw"),
    ]
    if with_exec:
        cols += [(pl.col("segment") == MAIN).alias("main"), pl.col("exec_index")]
    sub = lois.lazy().filter(pl.col("golden")).select(cols).collect()
    key = sub["key"].to_numpy().astype(np.int16)
    order = np.argsort(key, kind="stable")
    n_keys = max(1, len(channel_names)) * len(ROLES)
    bounds = np.concatenate([[0], np.cumsum(np.bincount(key, minlength=n_keys))])
    runs = sub["run"].to_numpy()
    lut = np.full(int(max(runs.max(initial=0), run_ids.max(initial=0))) + 1, -1, dtype=np.int64)
    lut[run_ids] = np.arange(run_ids.size)
    out: dict[str, Any] = {
        "channel_names": channel_names,
        "bounds": bounds,
        "pos": lut[runs][order],
        "power": sub["power_mw"].to_numpy()[order],
        "toi": sub["toi_frac"].to_numpy()[order],
    }
    if with_exec:
        out["main"] = sub["main"].to_numpy()[order]
        out["exec_index"] = sub["exec_index"].to_numpy()[order]
    return out


def _median_stat(
    boot: ClusterBootstrap, sums: np.ndarray, counts: np.ndarray, members: np.ndarray | None = None
) -> Estimate:
    """Median over golden runs (`members`, indices; None: all) of per-run means (sums / counts) with a
    bootstrap CI; member runs without values count at the median (they are rare: incomplete runs are
    never golden)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        per_run = np.where(counts > 0, sums / np.where(counts > 0, counts, 1), np.nan)
    sel = per_run if members is None else per_run[members]
    if not np.isfinite(sel).any():
        return Estimate(unit="ns", method=MEDIAN_METHOD)
    med = float(np.nanmedian(sel))
    lo, hi = boot.ci(boot.median(np.nan_to_num(per_run, nan=med), members))
    return Estimate.of(med, lo, hi, "ns", MEDIAN_METHOD)


T_EXACT_MAX_DF = 500


@functools.lru_cache(maxsize=4096)
def small_sample_factor(n_runs: int, level: float) -> float:
    """How much wider than the bootstrap's percentile interval a CI over `n_runs` clusters must be: t(level,
    n - 1) / z(level) x sqrt(n / (n - 1)) (1 for n < 2: nothing to widen by; -> 1 for many runs)."""
    if n_runs < 2:
        return 1.0
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    t = t_critical(level, n_runs - 1) if n_runs <= T_EXACT_MAX_DF else z  # t -> z: within 0.1 % beyond ~500 df
    return t / z * math.sqrt(n_runs / (n_runs - 1))


def widened_about(point: Any, low: Any, high: Any, factor: float) -> tuple[Any, Any]:
    """An interval (`low`, `high`) widened about `point` by `factor` (each side's distance x factor): how a bootstrap
    interval over few runs takes `small_sample_factor`. Floats or numpy arrays alike."""
    return point - (point - low) * factor, point + (high - point) * factor


FIT_BAND_POINTS = 21  # the TOI grid (toi_frac 0, 0.05, .., 1) a fit's CI band is given at


def fit_band(
    pos: np.ndarray,
    toi: np.ndarray,
    power: np.ndarray,
    coeffs: list[float] | None,
    boot: ClusterBootstrap,
    points: int = FIT_BAND_POINTS,
) -> dict[str, Any] | None:
    """The pointwise CI band (at `boot.level`) of a TOI fit: toi_frac (a grid of `points` on 0..1) and, at each,
    ci_low_mw / ci_high_mw around the fit `coeffs` (poly_fit's, power_mw vs toi_frac); None without a fit or with
    LOIs from fewer than 2 runs. pos: each LOI's run (index into the bootstrap's runs), toi: toi_frac, power: mW.

    Method: a cluster bootstrap over golden runs, the same resampling (`boot.counts`, stratified by run kind) as
    every other CI of the profile, re-fitting the polynomial at the fit's degree in every replicate: the LOIs of
    one run share its run-to-run variation (clock phase, temperature, the sensor's state), so they are not
    independent, and an ordinary least-squares band, which treats them as independent, is too narrow by about the
    square root of the design effect (1 + (LOIs per run - 1) x intra-run correlation). Resampling whole runs keeps
    that correlation (a cluster-robust sandwich covariance would too, but leans on a normal approximation that
    is liberal with few runs; the bootstrap is the one resampling every number of the profile shares). Each
    replicate's fit is one weighted least-squares solve (weights = how often its run was drawn) from per-run normal
    equations in the shifted Legendre basis P_k(2x - 1), so B replicates cost one (B x runs with LOIs) @
    (runs x unique normal-equation entries) product, not B fits. At each grid point the band is the percentile
    interval of the replicates' curves, widened about the fit like the SSE's CI (`small_sample_factor`: Student's
    t over the normal quantile and the n / (n - 1) variance factor over the n runs with LOIs), since a percentile
    interval over few clusters is too short; the band always contains the fit. Replicates whose normal equations
    are singular (too few distinct TOIs drawn) are left out. The band is conditional on the degree (the
    cross-validated choice is not redone per replicate): it is the uncertainty of the fit shown, not of the choice
    of its degree, and it covers the true profile where that degree can follow it (tests/analysis/test_profiles.py:
    92-96 % of grid points over random synthetic runs with correlated LOIs, where a band treating LOIs as independent
    covers 61-69 %)."""
    if not coeffs or pos.size == 0:
        return None
    pos = np.asarray(pos, dtype=np.int64)
    members = np.unique(pos)  # the runs with LOIs: the others add nothing to any replicate's normal equations
    n_with = int(members.size)
    if n_with < 2:
        return None
    deg = len(coeffs) - 1
    p = deg + 1
    leg = np.polynomial.legendre
    v = leg.legvander(2.0 * np.asarray(toi, dtype=np.float64) - 1.0, deg)  # (LOIs, p)
    y = np.asarray(power, dtype=np.float64)
    # per-run normal equations: the Gram matrix's upper triangle (symmetric) and the right-hand side, one column each
    iu, ju = np.triu_indices(p)
    local = np.searchsorted(members, pos)
    cols = [v[:, i] * v[:, j] for i, j in zip(iu, ju, strict=True)] + [v[:, i] * y for i in range(p)]
    per_run = np.stack([np.bincount(local, weights=c, minlength=n_with) for c in cols], axis=1)
    if 2 * n_with > boot.n_runs:  # most runs: the whole counts matrix times zero-padded sums (no column copy)
        padded = np.zeros((boot.n_runs, per_run.shape[1]))
        padded[members] = per_run
        agg = boot.counts @ padded  # (replicates, columns): every replicate's weighted sums at once
    else:
        agg = boot.counts[:, members] @ per_run
    g_b = np.empty((agg.shape[0], p, p))
    g_b[:, iu, ju] = agg[:, : iu.size]
    g_b[:, ju, iu] = agg[:, : iu.size]
    r_b = agg[:, iu.size :]
    eig = np.linalg.eigvalsh(g_b)  # symmetric positive semi-definite: cond = largest / smallest eigenvalue
    ok = eig[:, 0] > eig[:, -1] / MAX_GRAM_COND
    if not ok.any():
        return None
    c_b = np.linalg.solve(g_b[ok], r_b[ok][:, :, None])[:, :, 0]  # (good replicates, p), Legendre coefficients
    grid = np.linspace(0.0, 1.0, int(points))
    curves = c_b @ leg.legvander(2.0 * grid - 1.0, deg).T  # (good replicates, points)
    a = (1.0 - boot.level) / 2.0
    q_lo, q_hi = np.quantile(curves, [a, 1.0 - a], axis=0)
    mid = np.polyval(np.asarray(coeffs, dtype=np.float64), grid)
    lo, hi = widened_about(mid, q_lo, q_hi, small_sample_factor(n_with, boot.level))
    return {
        "toi_frac": [float(g) for g in grid],
        "ci_low_mw": [float(x) for x in np.minimum(lo, mid)],
        "ci_high_mw": [float(x) for x in np.maximum(hi, mid)],
        "level": boot.level,
        "runs": n_with,
        "replicates": int(ok.sum()),
        "method": "cluster_bootstrap_refit",
    }


def golden_runs_of(host_execs: pl.DataFrame, analysis: AnalysisConfig, seed: int) -> GoldenRuns:
    """Step 1: the golden runs and their stratified cluster bootstrap (SSP and SSE runs drawn apart)."""
    has_phase = "phase" in host_execs.columns
    phase_col = pl.col("phase").cast(pl.String) if has_phase else pl.lit("ssp")
    golden = (
        host_execs.filter(pl.col("golden"))
        .select("run", (phase_col == SSE).alias("is_sse"))
        .unique("run", keep="first")
        .sort("run")
    )
    run_ids = golden["run"].to_numpy()
    strata = golden["is_sse"].to_numpy().astype(np.int64)
    boot = ClusterBootstrap(run_ids.size, analysis.bootstrap_reps, analysis.ci_level, seed=seed, strata=strata)
    return GoldenRuns(golden.select("run"), run_ids, strata, np.flatnonzero(strata == 0), boot)


def _edge_groups(plan: Plan) -> set[str]:
    """Groups whose members are not exactly the LOIs of one role label (role precedence ssp > sse > first): they
    are picked by execution index."""
    return {
        g
        for g, is_edge in (
            ("sse", plan.sse_index >= plan.ssp_index),
            ("first", plan.predecessor_count > 0 and (plan.ssp_index == 0 or plan.sse_index == 0)),
        )
        if is_edge
    }


def group_stats(
    lois: pl.DataFrame, ssp_lois: pl.DataFrame | None, plan: Plan, golden: GoldenRuns, degree: int
) -> _GroupStats:
    """Step 2: per channel and group, the mean of the golden LOIs, its bootstrap replicates and CI, the TOI fit
    and its band (the SSP group's mean and CI from the centroid-aligned `ssp_lois` where given)."""
    view = plan
    n_runs = golden.run_ids.size
    boot, strata = golden.boot, golden.strata
    edge = _edge_groups(view)
    data = _golden_arrays(lois, golden.run_ids, with_exec=bool(edge))
    data_ssp = _golden_arrays(ssp_lois, golden.run_ids, with_exec=False) if ssp_lois is not None else None
    groups_wanted = [g for g in GROUPS if view.predecessor_count > 0 or g not in ("first", "pred")]
    out = _GroupStats({}, {}, {})
    pending: list[tuple[str, str, np.ndarray, np.ndarray, float | None]] = []  # (channel, group, sums, counts, mean)
    for ci, ch in enumerate(data["channel_names"]):
        out.channels[ch] = {}
        for g in groups_wanted:
            pos, power, toi = _group_members(data, ci, g, edge, view)
            fit = poly_fit(toi, power, cv_degree(toi, power, degree)) if toi.size else None
            band = fit_band(pos, toi, power, fit, boot)
            if g == "ssp" and data_ssp is not None and ch in data_ssp["channel_names"]:
                k = data_ssp["channel_names"].index(ch) * len(ROLES) + ROLES.index(g)
                sl = slice(data_ssp["bounds"][k], data_ssp["bounds"][k + 1])
                pos, power = data_ssp["pos"][sl], data_ssp["power"][sl]
            s = np.bincount(pos, weights=power, minlength=n_runs).astype(np.float64)
            n = np.bincount(pos, minlength=n_runs).astype(np.float64)
            mean = float(power.mean()) if power.size else None
            pending.append((ch, g, s, n, mean))
            n_sse = int(strata[pos].sum()) if pos.size else 0
            out.channels[ch][g] = {
                "mean_mw": _f(mean),
                "lois": int(power.size),
                "lois_by_phase": {"sse": n_sse, "ssp": int(power.size) - n_sse},
                "runs_with_lois": int((n > 0).sum()),
                "fit_coeffs": fit,
                "fit_band": band,
            }
    _bootstrap_groups(out, pending, boot)
    return out


def _group_members(
    data: dict[str, Any], ci: int, g: str, edge: set[str], view: Plan
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run positions, power mW, TOI fraction) of the golden LOIs of group `g` on channel number `ci`: by
    execution index among all the channel's LOIs for an edge group (`_edge_groups`), else its role's slice."""
    if g in edge:
        sl = slice(data["bounds"][ci * len(ROLES)], data["bounds"][(ci + 1) * len(ROLES)])
        mask = data["main"][sl] & (data["exec_index"][sl] == (view.sse_index if g == "sse" else 0))
        return data["pos"][sl][mask], data["power"][sl][mask], data["toi"][sl][mask]
    k = ci * len(ROLES) + ROLES.index(g)
    sl = slice(data["bounds"][k], data["bounds"][k + 1])
    return data["pos"][sl], data["power"][sl], data["toi"][sl]


def _bootstrap_groups(
    out: _GroupStats, pending: list[tuple[str, str, np.ndarray, np.ndarray, float | None]], boot: ClusterBootstrap
) -> None:
    """Every group's bootstrap replicates and CI (mW) from one matrix product (the per-run sums and counts of all
    groups side by side), into `out` (CI keys after mean_mw)."""
    sums = boot.counts @ np.column_stack([c for _, _, s, n, _ in pending for c in (s, n)]) if pending else None
    for i, (ch, g, _, _, mean) in enumerate(pending):
        rep = ratio_of(sums[:, 2 * i], sums[:, 2 * i + 1])  # type: ignore[index]
        lo, hi = boot.ci(rep) if mean is not None else (None, None)
        out.replicates[(ch, g)] = rep
        out.points[(ch, g)] = mean
        st = out.channels[ch][g]
        out.channels[ch][g] = {"mean_mw": st["mean_mw"], "ci_low_mw": _f(lo), "ci_high_mw": _f(hi)} | {
            k: v for k, v in st.items() if k != "mean_mw"
        }


def _role_stats(st: dict[str, Any]) -> RoleStats:
    """A group's statistics (mutable while its CI is widened: mean_mw, ci_low_mw, ci_high_mw) as a `RoleStats`
    with its mean power as one Estimate (mW)."""
    rest = {k: v for k, v in st.items() if k not in ("mean_mw", "ci_low_mw", "ci_high_mw")}
    power = Estimate.of(st.get("mean_mw"), st.get("ci_low_mw"), st.get("ci_high_mw"), "mW", ROLE_STATS_METHOD)
    return RoleStats(power=power, **rest)


def widen_single_execution_cis(stats: _GroupStats, sensors: Mapping[str, SensorModel] | None, level: float) -> None:
    """Step 3: readings of one execution per run (SSE, interleaved) rest on few runs: the bootstrap percentile
    interval is then too narrow; widen it by Student's t over the normal quantile and the n / (n - 1) variance
    factor, and by the quantization term of the calibrated sensor (mW, each side: how far the mean of its rounded
    readings can sit from the unrounded, at the least noise its calibration allows;
    `settling.reading_quantization_bias_mw`)."""
    for ch, per_group in stats.channels.items():
        sensor = (sensors or {}).get(ch)
        quant = reading_quantization_bias_mw(sensor) if sensor is not None else 0.0
        for g in ("sse", "first"):
            st = per_group.get(g)
            if st is None or st["mean_mw"] is None or st["ci_low_mw"] is None or st["ci_high_mw"] is None:
                continue
            f = small_sample_factor(int(st["runs_with_lois"]), level)
            lo, hi = widened_about(float(st["mean_mw"]), st["ci_low_mw"], st["ci_high_mw"], f)
            st["ci_low_mw"], st["ci_high_mw"] = lo - quant, hi + quant


def widen_ssp_ci(stats: _GroupStats, level: float) -> None:
    """Step 3b: the method SSP's bootstrap interval rests on its SSP runs (the clusters; often 8-20 of them: the
    adaptive stop, `fingrav.analysis.ssp_stop`, ends them at MIN_RUNS once its CI is met): a percentile interval over
    few clusters is too narrow, so it is widened about the mean by `small_sample_factor` of the runs with SSP LOIs,
    as the readings' (`widen_single_execution_cis`) and as the stop's closed form has it, before the systematic parts
    (`ssp_systematic`) are added. Every channel."""
    for per_group in stats.channels.values():
        st = per_group.get("ssp")
        if st is None or st["mean_mw"] is None or st["ci_low_mw"] is None or st["ci_high_mw"] is None:
            continue
        f = small_sample_factor(int(st["runs_with_lois"]), level)
        st["ci_low_mw"], st["ci_high_mw"] = widened_about(float(st["mean_mw"]), st["ci_low_mw"], st["ci_high_mw"], f)


def execution_times(
    host_execs: pl.DataFrame, plan: Plan, golden: GoldenRuns, input_sets: int = 1, level: float = 0.95
) -> _Times:
    """Step 4: execution time (per golden run the mean host-clock duration of the SSP-tail executions) and cycle
    time (SSP executions with a successor: start to the next start, launch gap included), each the median over
    golden SSP runs with a bootstrap CI, and their pooled means. With `input_sets` > 1 (the kernel rotated through
    that many separately allocated input sets) both CIs also carry their placement term
    (`fingrav.analysis.placement`, from their own values per set), in quadrature."""
    groups = group_exprs(plan, "phase" if "phase" in host_execs.columns else None)
    ssp_execs = host_execs.filter(pl.col("golden") & groups["ssp"])
    tsum, tcnt = _per_run(ssp_execs.select("run", "dur_ns"), golden.frame, "dur_ns")
    exec_time = _median_stat(golden.boot, tsum, tcnt, golden.ssp_members)
    exec_time = _placed(exec_time, ssp_execs, "dur_ns", input_sets, level)
    exec_mean = _f(tsum.sum() / tcnt.sum()) if tcnt.sum() > 0 else None
    cyc = ssp_execs.filter(pl.col("has_next")).select("run", "cycle_ns")
    if cyc.height == 0 and ssp_execs.height:
        logger.warning("no SSP execution has a successor (no trailing execution): cycle time = execution time")
        cyc = ssp_execs.select("run", pl.col("dur_ns").alias("cycle_ns"))
    csum, ccnt = _per_run(cyc, golden.frame, "cycle_ns")
    cycle_time = _median_stat(golden.boot, csum, ccnt, golden.ssp_members)
    cycle_time = _placed(cycle_time, ssp_execs.filter(pl.col("has_next")), "cycle_ns", input_sets, level)
    c_mean = float(csum.sum() / ccnt.sum()) if ccnt.sum() > 0 else None
    return _Times(exec_time, exec_mean, cycle_time, _f(c_mean), csum, ccnt)


def _placed(t: Estimate, execs: pl.DataFrame, value: str, input_sets: int, level: float) -> Estimate:
    """`t` (ns) with the placement term of `value` (a column of `execs`, ns) in its CI (`with_placement`); `t` as it
    is where there is no term (one input set, too few executions)."""
    term = placement_term(execs.select("run", "exec_index", value), input_sets, level, value)
    return t if term is None else with_placement(t, term)


def with_placement(t: Estimate, term: PlacementTerm) -> Estimate:
    """A time `t` (ns: the execution or the cycle time) with the placement term's half-width (`term.half_pct` of
    the value) added to each side of its CI in quadrature."""
    if t.value is None or t.ci_low is None or t.ci_high is None:
        return t
    v = float(t.value)
    h = term.half_pct / 100.0 * v
    lo, hi = v - math.hypot(v - float(t.ci_low), h), v + math.hypot(float(t.ci_high) - v, h)
    return Estimate.of(v, lo, hi, t.unit, f"{t.method}; {PLACEMENT_METHOD} ({term.sets} sets), in quadrature")


def ssp_systematic(
    stats: _GroupStats,
    lois: pl.DataFrame,
    plan: Plan,
    golden: GoldenRuns,
    cycle_mean_ns: float | None,
    group_delay_ns: float,
    sensors: Mapping[str, SensorModel] | None,
) -> tuple[dict[str, float], bool]:
    """Step 5: steady state over the SSP tail: per channel the trend test, and the lag bias it implies, the
    residual transient and the quantization bias widen the SSP CI (`ci_components`): their sum, in quadrature with
    each side of the bootstrap interval (`_with_systematic`); returns the systematic part per channel (mW) and
    whether the total channel's tail still trends beyond its bootstrap CI."""
    trends: dict[str, TailTrend] = {}
    systematic: dict[str, float] = {}
    channels = stats.channels
    for ch in channels:
        st = channels[ch].get("ssp")
        if st is None or st["mean_mw"] is None:
            continue
        tr = tail_trend(lois, ch, golden.run_ids, plan, golden.boot, cycle_mean_ns, group_delay_ns)
        trends[ch] = tr
        residual = 0.0
        sensor = (sensors or {}).get(ch)
        if sensor is not None and cycle_mean_ns:
            before = (
                [sensor.idle_mw] + [channels[ch]["pred"]["mean_mw"]] if "pred" in channels[ch] else [sensor.idle_mw]
            )
            steps = [abs(st["mean_mw"] - b) for b in before if b is not None]
            t0 = plan.ssp_index * cycle_mean_ns
            residual = residual_transient_mw(sensor, t0, t0 + plan.tail * cycle_mean_ns, max(steps, default=0.0))
            quant = quantization_bias_mw(sensor)
        else:
            quant = 0.0
        lo_b, hi_b = st["ci_low_mw"], st["ci_high_mw"]
        trend_bias = tr.bias_bound_mw
        sys_mw = trend_bias + residual + quant
        st["ci_components"] = {
            "bootstrap_low_mw": lo_b,
            "bootstrap_high_mw": hi_b,
            "tail_trend_bias_mw": trend_bias,
            "residual_transient_mw": residual,
            "quantization_mw": quant,
        }
        st["tail_trend"] = tr.to_summary()
        systematic[ch] = sys_mw
        if lo_b is not None and hi_b is not None:
            st["ci_low_mw"], st["ci_high_mw"] = _with_systematic(float(st["mean_mw"]), lo_b, hi_b, sys_mw, "mW")
    tot = trends.get(TOTAL)
    boot_half = None
    if TOTAL in channels and "ssp" in channels[TOTAL]:
        c = channels[TOTAL]["ssp"].get("ci_components") or {}
        if c.get("bootstrap_low_mw") is not None and c.get("bootstrap_high_mw") is not None:
            boot_half = 0.5 * (c["bootstrap_high_mw"] - c["bootstrap_low_mw"])
    unsettled = bool(
        tot is not None and tot.significant and boot_half is not None and (tot.change_over_tail_mw or 0.0) > boot_half
    )
    return systematic, unsettled


def _with_systematic(value: float, lo: float, hi: float, systematic: float, unit: str) -> tuple[float, float]:
    """(lo, hi) of the interval [lo, hi] about `value` with a systematic part (same unit, >= 0) in quadrature with
    each side (`Estimate.with_term`, the one home of a term in quadrature). The parts are bounds on biases of
    either sign that the run-to-run scatter does not show; added to each side linearly (until stop 39), the method
    SSP's CI covered its truth in 98.2 % of 336 valid rows of the fidelity matrix (seeds 11-14; |error| / half-width
    p95 0.81), in quadrature 96.4 % (p95 0.92); the bootstrap alone 94.6 %, and 81.5-94 % on the rows whose systematic
    part is over a quarter of the CI: the parts are real, but not all at their bound at once (benchmarks/RESULTS.md,
    stop 39)."""
    if not systematic or not value:
        return lo, hi
    e = Estimate.of(value, lo, hi, unit, "").with_term(systematic / abs(value), "")
    return (lo if e.ci_low is None else float(e.ci_low)), (hi if e.ci_high is None else float(e.ci_high))


def ssp_energy(stats: _GroupStats, times: _Times, boot: ClusterBootstrap, systematic_mw: float) -> Estimate:
    """Step 6: the method SSP's energy per execution = SSP power x pooled mean cycle time (mJ), its CI from the
    paired replicates (widened for few runs by `small_sample_factor`, as the SSP's) and the SSP's systematic part
    (scaled to energy) in quadrature."""
    ssp_p = stats.points.get((TOTAL, "ssp"))
    method = "SSP x cycle time; CI: paired cluster-bootstrap replicates, the SSP's systematic part in quadrature"
    if ssp_p is None or times.cycle_mean is None:
        return Estimate(unit="mJ", method=method)
    e_rep = stats.replicates[(TOTAL, "ssp")] * boot.ratio(times.cycle_sums, times.cycle_counts) * MJ_PER_MW_NS
    e_lo, e_hi = boot.ci(e_rep)
    e_val = ssp_p * times.cycle_mean * MJ_PER_MW_NS
    if e_lo is not None and e_hi is not None:  # few SSP runs: widened as the SSP's own interval (`widen_ssp_ci`)
        f = small_sample_factor(int(stats.channels[TOTAL]["ssp"]["runs_with_lois"]), boot.level)
        e_lo, e_hi = widened_about(e_val, e_lo, e_hi, f)
    bias = (systematic_mw / ssp_p * e_val) if ssp_p else 0.0
    if e_lo is not None and e_hi is not None:
        e_lo, e_hi = _with_systematic(e_val, e_lo, e_hi, bias, "mJ")
    return Estimate.of(e_val, e_lo, e_hi, "mJ", method)


def reading_vs_ssp(stats: _GroupStats, group: str, boot: ClusterBootstrap) -> Estimate:
    """Step 7: the mean reading of `group` (sse, first) vs the method SSP (%), CI from paired replicates."""
    ssp_p, other = stats.points.get((TOTAL, "ssp")), stats.points.get((TOTAL, group))
    if ssp_p is None or other is None or ssp_p == 0:
        return Estimate(unit="%", method=BOOT_METHOD)
    with np.errstate(invalid="ignore", divide="ignore"):
        rep = (
            (stats.replicates[(TOTAL, group)] - stats.replicates[(TOTAL, "ssp")])
            / stats.replicates[(TOTAL, "ssp")]
            * 100.0
        )
    lo, hi = boot.ci(rep)
    return Estimate.of((other - ssp_p) / ssp_p * 100.0, lo, hi, "%", BOOT_METHOD)


def compute_profiles(
    lois: pl.DataFrame,
    host_execs: pl.DataFrame,
    plan: Plan,
    analysis: AnalysisConfig,
    seed: int = 0,
    group_delay_ns: float = 0.0,
    sensors: Mapping[str, SensorModel] | None = None,
    ssp_lois: pl.DataFrame | None = None,
    input_sets: int = 1,
) -> ProfileResult:
    """Profiles of the golden runs: golden runs -> group statistics -> widened single-execution CIs -> times ->
    the SSP's systematic part -> energy -> readings vs SSP (each step a function above).

    group_delay_ns: the sensor's group delay after delay correction (window / 2 + lag): how far the reading
    lags a trend; with it, the SSP CI includes the bias a trend over the SSP tail implies (`settling`).
    sensors: the calibrated sensor per channel; with them the SSP CI also includes the residual of the level
    before the main segment that the sensor still shows during the tail (`settling.residual_transient_mw`).

    ssp_lois: the LOIs assigned centroid-aligned (each sample placed one sensor group delay earlier than `lois`,
    `differentiate.centroid_lois`); when given, the SSP group's mean and CI come from them (the TOI fit from
    `lois`): a reading reports the power one group delay before it, so this mean has no lag bias from a trend.

    input_sets: the input sets the kernel rotated through (its provenance): with more than one, the execution
    time's CI carries the placement term (`execution_times`).

    lois: lois frame (loi.LOIS_SCHEMA); host_execs: loi.host_executions output (with golden and
    phase; without phase every run is an SSP run); plan: plan.json; analysis: the sweep's analysis settings
    (bootstrap_reps, ci_level, fit_degree). Returns the `ProfileResult`: channels[ch][group] (`RoleStats`: mean,
    CI, LOI counts, runs with LOIs, the fit and its band) and the `ProfileNumbers`."""
    golden = golden_runs_of(host_execs, analysis, seed)
    stats = group_stats(lois, ssp_lois, plan, golden, analysis.fit_degree)
    widen_single_execution_cis(stats, sensors, analysis.ci_level)
    widen_ssp_ci(stats, analysis.ci_level)
    times = execution_times(host_execs, plan, golden, input_sets, analysis.ci_level)
    systematic, tail_unsettled = ssp_systematic(stats, lois, plan, golden, times.cycle_mean, group_delay_ns, sensors)
    numbers = ProfileNumbers(
        exec_time_ns=times.exec_time,
        exec_time_mean_ns=times.exec_mean,
        cycle_time_ns=times.cycle_time,
        cycle_time_mean_ns=times.cycle_mean,
        energy_per_exec_mj=ssp_energy(stats, times, golden.boot, systematic.get(TOTAL, 0.0)),
        sse_reading_vs_ssp_pct=reading_vs_ssp(stats, "sse", golden.boot),
        interleaved_reading_vs_ssp_pct=reading_vs_ssp(stats, "first", golden.boot),
        tail_unsettled=tail_unsettled,
    )
    channels = {ch: {g: _role_stats(st) for g, st in per.items()} for ch, per in stats.channels.items()}
    return ProfileResult(
        channels,
        stats.replicates,
        golden.run_ids,
        numbers,
        golden.boot,
        golden.boot.ratio(times.cycle_sums, times.cycle_counts) if times.cycle_mean is not None else None,
    )
