"""Several GPUs (device.world_size > 1): per-GPU numbers and the combined power of all GPUs of a scenario.

Every rank is analyzed on its own by the bin and differentiate stages (`fingrav.layout`: profiles/gpu<k>/<scenario>/).
`combine_ranks` turns those summaries and LOIs into a `fingrav.contracts.multigpu.CombinedResult`
(profiles/combined/<scenario>.json):

* ``ranks``: one entry per GPU (SSP power with CI, per channel, execution time, energy, validity, flags,
  truth on the simulator);
* ``combined``: the sum over GPUs. SSP power per channel = sum of the ranks' SSP means; its CI comes from a
  *joint* cluster bootstrap over runs: the ranks ran the same runs in lockstep (same run ids, same
  delays), so one resampling of the run ids is applied to every rank at once (a run that is not golden on
  a rank contributes nothing to that rank), which keeps the correlation between GPUs. The combined profile
  is the sum of the ranks' polynomial fits (same TOI fraction axis). Energy per execution = sum of the
  ranks' energies, with the conservative CI [sum of the lower bounds, sum of the upper bounds];
* ``row`` (order ``row_columns``): the columns the report adds to summary.csv (`combined_*`, `rank<k>_*`,
  `world_size`; the contract columns describe rank 0).

Units: W (`_w`), mJ (`_mj`), µs (`_us`); internal arrays mW.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from fingrav.analysis.profiles import ClusterBootstrap
from fingrav.config import AnalysisConfig
from fingrav.contracts.multigpu import Combined, CombinedChannel, CombinedResult, RankResult, RowValue, TruthComparison
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import Estimate, ci_columns, is_finite, value_ci
from fingrav.contracts.roles import SSP, TOTAL
from fingrav.contracts.summary import join_flags
from fingrav.contracts.units import MW_PER_W

logger = logging.getLogger(__name__)

CI_METHOD = "joint cluster bootstrap over the runs all GPUs ran in lockstep (golden SSP runs of any GPU)"
ENERGY_CI_METHOD = "sum of the per-GPU CI bounds (conservative)"
_EST = ("value", "ci_low", "ci_high")


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


def _ssp_power(summary: ScenarioSummary, channel: str) -> Estimate:
    """The SSP LOIs' mean power of `channel` with its CI (mW; no value when the summary has none)."""
    st = summary.role(channel, SSP)
    return st.power if st is not None else Estimate(unit="mW")


def combine_ranks(
    summaries: Sequence[ScenarioSummary],
    lois: Sequence[pl.DataFrame],
    analysis: AnalysisConfig,
    seed: int = 0,
) -> CombinedResult:
    """profiles/combined/<scenario>.json (`CombinedResult`) from the ranks' summaries and lois frames (rank order,
    rank 0 first).

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

    ranks_out: list[RankResult] = []
    for k, (s, res) in enumerate(zip(summaries, results, strict=True)):
        flat = res.flat()
        ranks_out.append(
            RankResult(
                rank=k,
                power=Estimate(**dict(zip(_EST, value_ci(flat, "power_w"), strict=True)), unit="W"),
                energy_per_exec=Estimate(
                    **dict(zip(_EST, value_ci(flat, "energy_per_exec_mj"), strict=True)), unit="mJ"
                ),
                sse_reading_w=res.sse.reading.value,
                interleaved_reading_w=res.interleaved.reading.value,
                exec_time_us=res.headline.exec_time.value,
                ssp_lois=res.counts.ssp_lois,
                ssp_runs_golden=res.counts.ssp_runs_golden,
                valid=s.valid,
                flags=join_flags(s.flags),
                channels_w={ch: _w(_ssp_power(s, ch).value) for ch in channels},
                truth=None
                if res.truth is None
                else TruthComparison(power_w=res.truth.power.value, power_vs_truth_pct=res.truth.power_vs_truth.value),
            )
        )

    # joint cluster bootstrap over the union of golden SSP runs
    per_rank = {ch: [_ssp_run_sums(lf, ch) for lf in lois] for ch in channels}
    comb_channels: dict[str, CombinedChannel] = {}
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
        point, ci_lo, ci_hi = _w(mean), _w(lo) if mean is not None else None, _w(hi) if mean is not None else None
        # the point is the sum of what each GPU's analysis reported (its SSP is read centroid-aligned, and the
        # total's headline may be its sustained power): the joint bootstrap's interval moves with it, keeping its width
        summary_means = [_ssp_power(s, ch).value for s in summaries]
        if ch == TOTAL:
            heads = [r.power.value for r in ranks_out]
            summary_means = [h * MW_PER_W if is_finite(h) else None for h in heads]
        if mean is not None and all(is_finite(m) for m in summary_means):
            shift = sum(summary_means) - mean
            if abs(shift) > 1e-6 * max(1.0, abs(mean)):
                logger.info("%s %s: LOI means sum to %.3f mW, the GPUs' numbers to %.3f mW: the latter is the combined "
                            "value", scenario, ch, mean, sum(summary_means))  # fmt: skip
            point = _w(mean + shift)
            if lo is not None and hi is not None:
                ci_lo, ci_hi = _w(lo + shift), _w(hi + shift)
        comb_channels[ch] = CombinedChannel(
            mean=Estimate(value=point, ci_low=ci_lo, ci_high=ci_hi, unit="W", method=CI_METHOD),
            fit_coeffs_mw=_sum_fits(fits),
            lois=int(sum(c.sum() for _, _, c in per_rank[ch])),
        )

    tot = comb_channels[TOTAL].mean if TOTAL in comb_channels else Estimate()
    truth = None
    if any(r.truth is not None for r in ranks_out):
        t = _sum_or_none([r.truth.power_w if r.truth is not None else None for r in ranks_out])
        p = tot.value
        truth = TruthComparison(power_w=t, power_vs_truth_pct=(p - t) / t * 100.0 if t and p is not None else None)
    combined = Combined(
        power=Estimate(value=tot.value, ci_low=tot.ci_low, ci_high=tot.ci_high, unit="W", method=CI_METHOD),
        runs_resampled=n_union,
        channels=comb_channels,
        energy_per_exec=Estimate(
            value=_sum_or_none([r.energy_per_exec.value for r in ranks_out]),
            ci_low=_sum_or_none([r.energy_per_exec.ci_low for r in ranks_out]),
            ci_high=_sum_or_none([r.energy_per_exec.ci_high for r in ranks_out]),
            unit="mJ",
            method=ENERGY_CI_METHOD,
        ),
        valid=all(r.valid for r in ranks_out),
        truth=truth,
    )
    row = combined_row(n, ranks_out, combined, channels)
    return CombinedResult(
        scenario=scenario,
        world_size=n,
        ranks=ranks_out,
        combined=combined,
        row=row,
        row_columns=list(row),  # the column order (JSON objects are written with sorted keys)
    )


def _trio(prefix: str, col: str, est: Estimate) -> dict[str, RowValue]:
    """`<prefix><col>` and its CI columns (`fingrav.contracts.result.ci_columns`) from an Estimate."""
    names = (prefix + col, *(prefix + c for c in ci_columns(col)))
    return dict(zip(names, (est.value, est.ci_low, est.ci_high), strict=True))


def combined_row(
    world_size: int, ranks: Sequence[RankResult], combined: Combined, channels: Sequence[str]
) -> dict[str, RowValue]:
    """The multi-GPU columns of a scenario (metrics table), in order: world_size, combined_power_w (+ CI),
    combined_ssp_<channel>_power_w, combined_energy_per_exec_mj (+ CI), combined_valid, [combined truth], then per
    rank k >= 1: rank<k>_power_w (+ CI), rank<k>_ssp_<channel>_power_w, rank<k>_exec_time_us, rank<k>_valid,
    rank<k>_flags, [rank<k>_power_vs_truth_pct]. CI columns by `fingrav.contracts.result.ci_columns`."""
    row: dict[str, RowValue] = {"world_size": int(world_size), **_trio("combined_", "power_w", combined.power)}
    for ch in channels:
        if ch != TOTAL:
            cc = combined.channels.get(ch)
            row[f"combined_ssp_{ch}_power_w"] = cc.mean.value if cc is not None else None
    row.update(_trio("combined_", "energy_per_exec_mj", combined.energy_per_exec))
    row["combined_valid"] = combined.valid
    if combined.truth is not None:
        row["combined_truth_power_w"] = combined.truth.power_w
        row["combined_power_vs_truth_pct"] = combined.truth.power_vs_truth_pct
    for r in ranks:
        if r.rank == 0:
            continue
        p = f"rank{r.rank}_"
        row.update(_trio(p, "power_w", r.power))
        for ch in channels:
            if ch != TOTAL:
                row[f"{p}ssp_{ch}_power_w"] = r.channels_w.get(ch)
        row[p + "exec_time_us"] = r.exec_time_us
        row[p + "valid"] = r.valid
        row[p + "flags"] = r.flags
        if r.truth is not None:
            row[p + "power_vs_truth_pct"] = r.truth.power_vs_truth_pct
    return row
