"""Several GPUs (device.world_size > 1): per-GPU numbers and the combined power of all GPUs of a scenario.

Every rank is analyzed on its own by the bin and differentiate stages (`fingrav.layout`: profiles/gpu<k>/<scenario>/).
`combine_ranks` turns those summaries and LOIs into the content of profiles/combined/<scenario>.json:

* ``ranks``: one entry per GPU (SSP power with CI, per channel, execution time, energy, validity, flags,
  truth on the simulator);
* ``combined``: the sum over GPUs. SSP power per channel = sum of the ranks' SSP means; its CI comes from a
  *joint* cluster bootstrap over runs: the ranks ran the same runs in lockstep (same run ids, same
  delays), so one resampling of the run ids is applied to every rank at once (a run that is not golden on
  a rank contributes nothing to that rank), which keeps the correlation between GPUs. The combined profile
  is the sum of the ranks' polynomial fits (same TOI fraction axis). Energy per execution = sum of the
  ranks' energies, with the conservative CI [sum of the lower bounds, sum of the upper bounds];
* ``row``: the columns the report adds to summary.csv (`combined_*`, `rank<k>_*`, `world_size`; the
  contract columns describe rank 0).

Units: W (`_w`), mJ (`_mj`), µs (`_us`); internal arrays mW.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis.profiles import ClusterBootstrap
from fingrav.config import AnalysisConfig
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import ci_columns, is_finite, value_ci
from fingrav.contracts.roles import SSP, TOTAL
from fingrav.contracts.summary import join_flags
from fingrav.contracts.units import MW_PER_W

logger = logging.getLogger(__name__)

CI_METHOD = "joint cluster bootstrap over the runs all GPUs ran in lockstep (golden SSP runs of any GPU)"
ENERGY_CI_METHOD = "sum of the per-GPU CI bounds (conservative)"


def _w(mw: Any) -> float | None:
    return None if mw is None else float(mw) / 1e3


def _sum_or_none(values: Sequence[Any]) -> float | None:
    return float(sum(values)) if values and all(is_finite(v) for v in values) else None


def _ssp_run_sums(lois: pl.DataFrame, channel: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run ids, sum of power mW, LOI count) per golden SSP run, for the SSP LOIs of `channel`."""
    agg = (
        lois.lazy()
        .filter(pl.col("golden") & (pl.col("role").cast(pl.String) == "ssp") & (pl.col("channel") == channel))
        .group_by("run")
        .agg(s=pl.col("power_mw").sum(), n=pl.len())
        .sort("run")
        .collect()
    )
    return agg["run"].to_numpy(), agg["s"].to_numpy().astype(np.float64), agg["n"].to_numpy().astype(np.float64)


def _sum_fits(fits: Sequence[Sequence[float] | None]) -> list[float] | None:
    """Sum of polynomials (numpy.polyfit order, highest power first); None when any is missing."""
    if not fits or any(f is None or len(f) == 0 for f in fits):
        return None
    deg = max(len(f) for f in fits)
    out = np.zeros(deg)
    for f in fits:
        out[deg - len(f) :] += np.asarray(f, dtype=np.float64)
    return [float(c) for c in out]


def _ssp(summary: ScenarioSummary, channel: str, key: str) -> Any:
    """One number of the SSP statistics of `channel` (None when the summary has none)."""
    st = summary.role(channel, SSP)
    return getattr(st, key) if st is not None else None


def combine_ranks(
    summaries: Sequence[ScenarioSummary],
    lois: Sequence[pl.DataFrame],
    analysis: AnalysisConfig,
    seed: int = 0,
) -> dict[str, Any]:
    """combined.json content from the ranks' summaries and lois frames (rank order, rank 0 first).

    analysis: the sweep's analysis settings (bootstrap_reps, ci_level)."""
    if len(summaries) != len(lois) or not summaries:
        raise ValueError(f"{len(summaries)} summaries and {len(lois)} LOI frames: one of each per rank")
    n = len(summaries)
    reps = analysis.bootstrap_reps
    level = analysis.ci_level
    scenario = summaries[0].scenario
    results = [s.result for s in summaries]

    # channels every rank has, "total" first
    chan_sets = [set(s.channels) for s in summaries]
    channels = sorted(set.intersection(*chan_sets), key=lambda c: (c != TOTAL, c)) if chan_sets else []

    ranks_out = []
    for k, (s, res) in enumerate(zip(summaries, results, strict=True)):
        flat = res.flat()
        entry: dict[str, Any] = {"rank": k}
        for col in ("power_w", "energy_per_exec_mj"):
            entry.update(zip((col, *ci_columns(col)), value_ci(flat, col), strict=True))
        entry.update(
            sse_reading_w=res.sse.reading.value,
            interleaved_reading_w=res.interleaved.reading.value,
            exec_time_us=res.headline.exec_time.value,
            ssp_lois=res.counts.ssp_lois,
            ssp_runs_golden=res.counts.ssp_runs_golden,
            valid=s.valid,
            flags=join_flags(s.flags),
            channels_w={ch: _w(_ssp(s, ch, "mean_mw")) for ch in channels},
        )
        if res.truth is not None:
            entry["truth_power_w"] = res.truth.power.value
            entry["power_vs_truth_pct"] = res.truth.power_vs_truth.value
        ranks_out.append(entry)

    # joint cluster bootstrap over the union of golden SSP runs
    per_rank = {ch: [_ssp_run_sums(lf, ch) for lf in lois] for ch in channels}
    comb_channels: dict[str, dict[str, Any]] = {}
    n_union = 0
    for ch in channels:
        run_sets = [r for r, _, _ in per_rank[ch]]
        union = np.unique(np.concatenate(run_sets)) if run_sets else np.zeros(0, np.int64)
        n_union = max(n_union, int(union.size))
        means: list[float | None] = []
        rep_sum = None
        if union.size:
            boot = ClusterBootstrap(int(union.size), reps, level, seed=seed)
            rep_sum = np.zeros(reps)
            for runs, sums, cnts in per_rank[ch]:
                s_full = np.zeros(union.size)
                n_full = np.zeros(union.size)
                pos = np.searchsorted(union, runs)
                s_full[pos], n_full[pos] = sums, cnts
                means.append(float(sums.sum() / cnts.sum()) if cnts.sum() > 0 else None)
                rep_sum = rep_sum + boot.ratio(s_full, n_full)
            lo, hi = boot.ci(rep_sum)
        else:
            lo = hi = None
        mean = _sum_or_none(means) if len(means) == n else None
        fits = [_ssp(s, ch, "fit_coeffs") for s in summaries]
        comb_channels[ch] = {
            "mean_w": _w(mean),
            "ci_low_w": _w(lo) if mean is not None else None,
            "ci_high_w": _w(hi) if mean is not None else None,
            "fit_coeffs_mw": _sum_fits(fits),
            "lois": int(sum(c.sum() for _, _, c in per_rank[ch])),
        }
        # the point is the sum of what each GPU's analysis reported (its SSP is read centroid-aligned, and the
        # total's headline may be its sustained power): the joint bootstrap's interval moves with it, keeping its width
        summary_means = [_ssp(s, ch, "mean_mw") for s in summaries]
        if ch == TOTAL:
            heads = [r.get("power_w") for r in ranks_out]
            summary_means = [h * MW_PER_W if is_finite(h) else None for h in heads]
        if mean is not None and all(is_finite(m) for m in summary_means):
            shift = sum(summary_means) - mean
            if abs(shift) > 1e-6 * max(1.0, abs(mean)):
                logger.info("%s %s: LOI means sum to %.3f mW, the GPUs' numbers to %.3f mW: the latter is the combined "
                            "value", scenario, ch, mean, sum(summary_means))  # fmt: skip
            comb_channels[ch]["mean_w"] = _w(mean + shift)
            if lo is not None and hi is not None:
                comb_channels[ch]["ci_low_w"] = _w(lo + shift)
                comb_channels[ch]["ci_high_w"] = _w(hi + shift)

    tot = comb_channels.get(TOTAL, {})
    energies = [r.get("energy_per_exec_mj") for r in ranks_out]
    p_lo, p_hi = ci_columns("power_w")
    e_lo, e_hi = ci_columns("energy_per_exec_mj")
    combined: dict[str, Any] = {
        "power_w": tot.get("mean_w"),
        p_lo: tot.get("ci_low_w"),
        p_hi: tot.get("ci_high_w"),
        "ci_method": CI_METHOD,
        "runs_resampled": n_union,
        "channels": comb_channels,
        "energy_per_exec_mj": _sum_or_none(energies),
        e_lo: _sum_or_none([r.get(e_lo) for r in ranks_out]),
        e_hi: _sum_or_none([r.get(e_hi) for r in ranks_out]),
        "energy_ci_method": ENERGY_CI_METHOD,
        "valid": all(r["valid"] for r in ranks_out),
    }
    truths = [r.get("truth_power_w") for r in ranks_out]
    if any("truth_power_w" in r for r in ranks_out):
        t = _sum_or_none(truths)
        combined["truth_power_w"] = t
        p = combined["power_w"]
        combined["power_vs_truth_pct"] = (p - t) / t * 100.0 if t and p is not None else None

    row = combined_row(n, ranks_out, combined, channels)
    return {
        "scenario": scenario,
        "world_size": n,
        "ranks": ranks_out,
        "combined": combined,
        "row": row,
        "row_columns": list(row),  # the column order (JSON objects are written with sorted keys)
    }


def combined_row(
    world_size: int, ranks: Sequence[Mapping[str, Any]], combined: Mapping[str, Any], channels: Sequence[str]
) -> dict[str, Any]:
    """The multi-GPU columns of a scenario (metrics table), in order: world_size, combined_power_w (+ CI),
    combined_ssp_<channel>_power_w, combined_energy_per_exec_mj (+ CI), combined_valid, [combined truth], then per
    rank k >= 1: rank<k>_power_w (+ CI), rank<k>_ssp_<channel>_power_w, rank<k>_exec_time_us, rank<k>_valid,
    rank<k>_flags, [rank<k>_power_vs_truth_pct]. CI columns by `fingrav.contracts.result.ci_columns`."""

    def trio(prefix: str, col: str, src: Mapping[str, Any]) -> dict[str, Any]:
        names = (col, *ci_columns(col))
        return {prefix + n: v for n, v in zip(names, value_ci(src, col), strict=True)}

    row: dict[str, Any] = {"world_size": int(world_size), **trio("combined_", "power_w", combined)}
    for ch in channels:
        if ch != TOTAL:
            row[f"combined_ssp_{ch}_power_w"] = (combined.get("channels") or {}).get(ch, {}).get("mean_w")
    row.update(trio("combined_", "energy_per_exec_mj", combined))
    row["combined_valid"] = bool(combined.get("valid"))
    if "truth_power_w" in combined:
        row["combined_truth_power_w"] = combined.get("truth_power_w")
        row["combined_power_vs_truth_pct"] = combined.get("power_vs_truth_pct")
    for r in ranks:
        k = int(r["rank"])
        if k == 0:
            continue
        p = f"rank{k}_"
        row.update(trio(p, "power_w", r))
        for ch in channels:
            if ch != TOTAL:
                row[f"{p}ssp_{ch}_power_w"] = (r.get("channels_w") or {}).get(ch)
        row[p + "exec_time_us"] = r.get("exec_time_us")
        row[p + "valid"] = bool(r.get("valid"))
        row[p + "flags"] = r.get("flags") or ""
        if "power_vs_truth_pct" in r:
            row[p + "power_vs_truth_pct"] = r.get("power_vs_truth_pct")
    return row
