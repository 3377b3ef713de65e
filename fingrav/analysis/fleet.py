"""A fleet survey (device.gpus with device.fleet): the card-to-card spread of one scenario over the listed GPUs.

Every listed GPU measured the scenario on its own and was analyzed on its own (bin, differentiate under
`cards/<i>/`, `fingrav.layout`); `fleet_spread` turns those summaries into a `fingrav.contracts.multigpu.FleetResult`
(profiles/fleet/<scenario>.json). Per metric of `fingrav.contracts.summary.FLEET_METRICS` (SSP power, energy per
execution, execution time):

* ``cards``: each GPU's value and CI (an `Estimate`) as its own analysis gave them (nothing recomputed), and its
  deviation from the fleet mean in % with a CI;
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
from fingrav.contracts.multigpu import FleetCard, FleetMetric, FleetResult, RowValue
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import UNIT_SUFFIX, Estimate, is_finite, value_ci
from fingrav.contracts.summary import FLEET_METRICS, GPU, fleet_metric_columns

logger = logging.getLogger(__name__)

DRAWS: Final = 4000
CI_METHOD: Final = (
    "parametric bootstrap over the cards' measurement uncertainty (each card ~ normal with the standard error its CI "
    "implies); about these cards measured again, not about a fleet at large"
)
_UNIT_OF_SUFFIX: Final = {suffix: unit for unit, suffix in UNIT_SUFFIX.items()}  # "w" -> "W" (FLEET_METRICS' units)


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
    values: Mapping[int, tuple[Any, Any, Any]],
    level: float,
    rng: np.random.Generator,
    draws: int = DRAWS,
    unit: str = "",
) -> FleetMetric:
    """The spread of one metric over the cards. `values`: GPU index -> (value, CI low, CI high) at `level`, in
    `unit` (the unit of the values and the mean; spread and deviations are %)."""
    z = statistics.NormalDist().inv_cdf((1 + level) / 2)
    cards = [(int(g), Estimate(value=v, ci_low=lo, ci_high=hi, unit=unit)) for g, (v, lo, hi) in values.items()]
    used = [j for j, (_, e) in enumerate(cards) if all(is_finite(x) for x in (e.value, e.ci_low, e.ci_high))]
    no_spread = FleetMetric(
        cards=[FleetCard(gpu=g, value=e) for g, e in cards],
        n=len(used),
        ci_method=CI_METHOD,
        mean=Estimate(unit=unit, method=CI_METHOD),
        spread_pct=Estimate(unit="%", method=CI_METHOD),
    )
    if len(used) < 2:
        return no_spread
    x = np.array([float(cards[j][1].value) for j in used])  # type: ignore[arg-type]
    se = np.array(
        [max(float(cards[j][1].ci_high) - float(cards[j][1].ci_low), 0.0) / (2 * z) for j in used]  # type: ignore[arg-type]
    )
    mean = float(x.mean())
    if mean == 0:
        return no_spread
    sim = x[None, :] + se[None, :] * rng.standard_normal((draws, len(used)))
    sim_mean = sim.mean(axis=1)
    sim_spread = (sim.max(axis=1) - sim.min(axis=1)) / sim_mean * 100
    noise = mean + se[None, :] * rng.standard_normal((draws, len(used)))
    noise_spread = (noise.max(axis=1) - noise.min(axis=1)) / noise.mean(axis=1) * 100
    q_obs, q_noise = _cochran_q(x[None, :], se)[0], _cochran_q(noise, se)
    spread = float((x.max() - x.min()) / mean * 100)
    dev = (sim / sim_mean[:, None] - 1) * 100
    deviations: dict[int, Estimate] = {}
    for i, j in enumerate(used):
        d_lo, d_hi = _quantiles(dev[:, i], level)
        deviations[j] = Estimate(
            value=float((x[i] / mean - 1) * 100), ci_low=d_lo, ci_high=d_hi, unit="%", method=CI_METHOD
        )
    var_between = max(0.0, float(x.var(ddof=1)) - float(np.mean(se**2)))
    m_lo, m_hi = _quantiles(sim_mean, level)
    s_lo, s_hi = _quantiles(sim_spread, level)
    return FleetMetric(
        cards=[FleetCard(gpu=g, value=e, deviation_pct=deviations.get(j)) for j, (g, e) in enumerate(cards)],
        n=len(used),
        ci_method=CI_METHOD,
        mean=Estimate(value=mean, ci_low=m_lo, ci_high=m_hi, unit=unit, method=CI_METHOD),
        spread_pct=Estimate(value=spread, ci_low=s_lo, ci_high=s_hi, unit="%", method=CI_METHOD),
        noise_spread_pct=float(np.median(noise_spread)),
        q=float(q_obs),
        q_noise_quantile=float(np.quantile(q_noise, level)),
        distinct=bool(q_obs > float(np.quantile(q_noise, level))),
        between_card_sd_pct=float(np.sqrt(var_between) / mean * 100),
    )


def fleet_spread(summaries: Mapping[int, ScenarioSummary], analysis: AnalysisConfig, scenario: str) -> FleetResult:
    """profiles/fleet/<scenario>.json (`FleetResult`, module docstring) from every listed GPU's summary.json, by GPU
    index (in the sweep's order: the first is the one summary.csv's contract columns describe)."""
    rng = np.random.default_rng([zlib.crc32(scenario.encode()), len(summaries)])
    metrics: dict[str, FleetMetric] = {}
    row: dict[str, RowValue] = {"fleet_gpus": len(summaries)}
    for name, (unit, col) in FLEET_METRICS.items():
        vals = {g: value_ci(s.result.flat(), col) for g, s in summaries.items()}
        m = metric_spread(vals, analysis.ci_level, rng, unit=_UNIT_OF_SUFFIX.get(unit, unit))
        cards = [c.model_copy(update={"valid": bool(summaries[c.gpu].valid)}) for c in m.cards]
        m = m.model_copy(update={"cards": cards})
        metrics[name] = m
        cols = fleet_metric_columns(name)
        for role, v in (
            ("mean", m.mean.value),
            ("ci_low", m.mean.ci_low),
            ("ci_high", m.mean.ci_high),
            ("spread", m.spread_pct.value),
            ("spread_ci_low", m.spread_pct.ci_low),
            ("spread_ci_high", m.spread_pct.ci_high),
            ("noise_spread", m.noise_spread_pct),
            ("distinct", m.distinct),
        ):
            row[cols[role]] = v
    first = next(iter(summaries))
    ssp = metrics["power"]
    logger.info(
        "fleet %s: %d GPUs, power spread %s %% (noise alone %s %%), distinct=%s",
        scenario,
        len(summaries),
        f"{ssp.spread_pct.value:.3g}" if ssp.spread_pct.value is not None else "n/a",
        f"{ssp.noise_spread_pct:.3g}" if ssp.noise_spread_pct is not None else "n/a",
        ssp.distinct,
    )
    return FleetResult(
        scenario=scenario,
        gpus=[int(g) for g in summaries],
        ci_level=analysis.ci_level,
        metrics=metrics,
        row={GPU: int(first), **row},
    )
