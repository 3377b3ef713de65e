"""A fleet survey (device.gpus with device.fleet): the card-to-card spread of one scenario over the listed GPUs.

Every listed GPU measured the scenario on its own and was analyzed on its own (bin, differentiate under
`cards/<i>/`, `fingrav.layout`); `fleet_spread` turns those summaries into profiles/fleet/<scenario>.json. Per metric
of `fingrav.contracts.summary.FLEET_METRICS` (SSP power, energy per execution, execution time):

* ``cards``: each GPU's value and CI as its own analysis gave them (nothing recomputed), and its deviation from the
  fleet mean in % with a CI;
* ``mean``: the mean over the cards, ``spread_pct``: (max - min) / mean x 100 over the cards, each with a CI from
  the cards' measurement uncertainty: a parametric bootstrap draws every card's value from a normal with the
  standard error its CI implies (half-width / z) and recomputes mean, spread and deviations (`DRAWS` draws, seeded
  by the scenario, so a rerun gives the same numbers). These CIs are about *these* cards, measured again; with a
  handful of cards they say nothing about a fleet at large;
* ``noise_spread_pct``: the median spread the same draws give when every card has the fleet mean, i.e. what
  measurement noise alone spreads identical cards by; ``distinct``: the cards differ beyond their measurement noise,
  by Cochran's Q (sum of w_i (x_i - weighted mean)^2, w_i = 1 / se_i^2: a card with a wide CI weighs little) above
  the ci_level quantile of Q over those noise-only draws (a test at level 1 - ci_level; Q is chi-square with n - 1
  degrees of freedom there, ``q`` and ``q_noise_quantile`` are given);
* ``between_card_sd_pct``: the card-to-card standard deviation with the measurement noise taken out (method of
  moments: sqrt(max(0, sample variance - mean squared standard error)), % of the mean);
* ``row``: the summary.csv columns (`fingrav.contracts.summary.fleet_columns`).

A card whose value or CI is missing (not measurable) is listed but left out of the statistics; fewer than two such
cards: no spread (None).
"""

from __future__ import annotations

import logging
import statistics
import zlib
from collections.abc import Mapping
from typing import Any, Final

import numpy as np

from fingrav.config import AnalysisConfig
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import ci_columns, is_finite, value_ci
from fingrav.contracts.summary import FLEET_METRICS, GPU, fleet_metric_columns

logger = logging.getLogger(__name__)

DRAWS: Final = 4000
CI_METHOD: Final = (
    "parametric bootstrap over the cards' measurement uncertainty (each card ~ normal with the standard error its CI "
    "implies); about these cards measured again, not about a fleet at large"
)


SPREAD_CI: Final = ci_columns("spread_pct")
DEVIATION_CI: Final = ci_columns("deviation_pct")


def _quantiles(x: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.quantile(x, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def _cochran_q(x: np.ndarray, se: np.ndarray) -> np.ndarray:
    """Cochran's Q of each row of values `x` (draws x cards) with standard errors `se` (a card with se 0 counts as
    precise to 1e-12 of its value's scale)."""
    w = 1.0 / np.maximum(se, 1e-12 * max(float(np.abs(x).max()), 1.0)) ** 2
    xbar = (x * w).sum(axis=1, keepdims=True) / w.sum()
    return ((x - xbar) ** 2 * w).sum(axis=1)


def metric_spread(
    values: Mapping[int, tuple[Any, Any, Any]], level: float, rng: np.random.Generator, draws: int = DRAWS
) -> dict[str, Any]:
    """The spread of one metric over the cards. `values`: GPU index -> (value, CI low, CI high) at `level`."""
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    cards = [{"gpu": int(g), "value": v, "ci_low": lo, "ci_high": hi} for g, (v, lo, hi) in values.items()]
    used = [c for c in cards if all(is_finite(c[k]) for k in ("value", "ci_low", "ci_high"))]
    out: dict[str, Any] = {"cards": cards, "n": len(used), "ci_method": CI_METHOD}
    none = dict.fromkeys(("mean", "mean_ci_low", "mean_ci_high", "spread_pct", *SPREAD_CI), None)
    out.update(none, noise_spread_pct=None, q=None, q_noise_quantile=None, distinct=None, between_card_sd_pct=None)
    if len(used) < 2:
        return out
    x = np.array([float(c["value"]) for c in used])
    se = np.array([max(float(c["ci_high"]) - float(c["ci_low"]), 0.0) / (2 * z) for c in used])
    mean = float(x.mean())
    if mean == 0:
        return out
    sim = x[None, :] + se[None, :] * rng.standard_normal((draws, len(used)))
    sim_mean = sim.mean(axis=1)
    sim_spread = (sim.max(axis=1) - sim.min(axis=1)) / sim_mean * 100
    noise = mean + se[None, :] * rng.standard_normal((draws, len(used)))
    noise_spread = (noise.max(axis=1) - noise.min(axis=1)) / noise.mean(axis=1) * 100
    q_obs, q_noise = _cochran_q(x[None, :], se)[0], _cochran_q(noise, se)
    spread = float((x.max() - x.min()) / mean * 100)
    dev = (sim / sim_mean[:, None] - 1) * 100
    for j, c in enumerate(used):
        c["deviation_pct"] = float((x[j] / mean - 1) * 100)
        c[DEVIATION_CI[0]], c[DEVIATION_CI[1]] = _quantiles(dev[:, j], level)
    var_between = max(0.0, float(x.var(ddof=1)) - float(np.mean(se**2)))
    out.update(
        mean=mean,
        spread_pct=spread,
        noise_spread_pct=float(np.median(noise_spread)),
        q=float(q_obs),
        q_noise_quantile=float(np.quantile(q_noise, level)),
        distinct=bool(q_obs > float(np.quantile(q_noise, level))),
        between_card_sd_pct=float(np.sqrt(var_between) / mean * 100),
    )
    out["mean_ci_low"], out["mean_ci_high"] = _quantiles(sim_mean, level)
    out[SPREAD_CI[0]], out[SPREAD_CI[1]] = _quantiles(sim_spread, level)
    return out


def fleet_spread(summaries: Mapping[int, ScenarioSummary], analysis: AnalysisConfig, scenario: str) -> dict[str, Any]:
    """profiles/fleet/<scenario>.json (module docstring) from every listed GPU's summary.json, by GPU index (in the
    sweep's order: the first is the one summary.csv's contract columns describe)."""
    rng = np.random.default_rng([zlib.crc32(scenario.encode()), len(summaries)])
    metrics: dict[str, Any] = {}
    row: dict[str, Any] = {"fleet_gpus": len(summaries)}
    for name, (_unit, col) in FLEET_METRICS.items():
        vals = {g: value_ci(s.result.flat(), col) for g, s in summaries.items()}
        m = metric_spread(vals, analysis.ci_level, rng)
        for c in m["cards"]:
            c["valid"] = bool(summaries[c["gpu"]].valid)
        metrics[name] = m
        cols = fleet_metric_columns(name)
        for role, key in (
            ("mean", "mean"),
            ("ci_low", "mean_ci_low"),
            ("ci_high", "mean_ci_high"),
            ("spread", "spread_pct"),
            ("spread_ci_low", SPREAD_CI[0]),
            ("spread_ci_high", SPREAD_CI[1]),
            ("noise_spread", "noise_spread_pct"),
            ("distinct", "distinct"),
        ):
            row[cols[role]] = m[key]
    first = next(iter(summaries))
    ssp = metrics["power"]
    logger.info(
        "fleet %s: %d GPUs, power spread %s %% (noise alone %s %%), distinct=%s",
        scenario,
        len(summaries),
        f"{ssp['spread_pct']:.3g}" if ssp["spread_pct"] is not None else "n/a",
        f"{ssp['noise_spread_pct']:.3g}" if ssp["noise_spread_pct"] is not None else "n/a",
        ssp["distinct"],
    )
    return {
        "scenario": scenario,
        "gpus": [int(g) for g in summaries],
        "ci_level": analysis.ci_level,
        "metrics": metrics,
        "row": {GPU: int(first), **row},
    }
