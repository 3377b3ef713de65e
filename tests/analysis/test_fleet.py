"""The card-to-card spread of a fleet survey (fingrav.analysis.fleet): from each card's own numbers and CIs."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from fingrav.analysis.fleet import fleet_spread, metric_spread
from fingrav.config import AnalysisConfig
from fingrav.contracts.multigpu import FleetResult
from fingrav.contracts.result import Estimate, Headline, Labels, ScenarioResult
from fingrav.contracts.summary import fleet_columns


def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def test_cards_apart_beyond_their_cis_are_distinct() -> None:
    """Three cards at 600, 606, 612 W with +-1 W CIs: spread 2 % of the mean, the noise alone spreads identical
    cards by ~0.3 %, so the cards differ; deviations from the mean -1, 0, +1 % with CIs around them."""
    m = metric_spread({0: (600.0, 599.0, 601.0), 1: (606.0, 605.0, 607.0), 2: (612.0, 611.0, 613.0)}, 0.95, rng())
    assert m.mean.value == pytest.approx(606.0)
    assert m.spread_pct.value == pytest.approx(12 / 606 * 100) and m.spread_pct.unit == "%"
    assert m.spread_pct.ci_low < m.spread_pct.value < m.spread_pct.ci_high
    assert m.noise_spread_pct < 0.5 and m.distinct is True
    assert m.between_card_sd_pct == pytest.approx(np.sqrt(36 - (1 / 1.96) ** 2) / 606 * 100, rel=1e-6)
    devs = {c.gpu: c for c in m.cards}
    assert devs[0].value == Estimate(value=600.0, ci_low=599.0, ci_high=601.0)
    dev = devs[0].deviation_pct
    assert dev is not None and dev.value == pytest.approx(-6 / 606 * 100)
    assert dev.ci_low < dev.value < dev.ci_high < 0
    assert m.mean.ci_low < 606 < m.mean.ci_high


def test_cards_within_their_noise_are_not_distinct() -> None:
    """Cards whose values lie within their (wide) CIs: the spread is what the noise gives; no card-to-card sd."""
    m = metric_spread({0: (600.0, 590.0, 610.0), 1: (601.0, 591.0, 611.0)}, 0.95, rng())
    assert m.distinct is False and m.between_card_sd_pct == 0.0
    assert m.spread_pct.value < m.noise_spread_pct * 3


def test_a_card_without_a_number_is_listed_but_not_counted() -> None:
    m = metric_spread({0: (600.0, 599.0, 601.0), 1: (None, None, None), 2: (610.0, 609.0, 611.0)}, 0.95, rng())
    assert m.n == 2 and [c.gpu for c in m.cards] == [0, 1, 2]
    assert m.cards[1].deviation_pct is None and m.spread_pct.value == pytest.approx(10 / 605 * 100)
    one = metric_spread({0: (600.0, 599.0, 601.0), 1: (None, None, None)}, 0.95, rng())
    assert one.spread_pct.value is None and one.distinct is None


def summary(power: float, half: float, valid: bool = True) -> SimpleNamespace:
    result = ScenarioResult(
        labels=Labels(scenario="cb-4k"),
        valid=valid,
        headline=Headline(
            power=Estimate(value=power, ci_low=power - half, ci_high=power + half, unit="W"),
            energy_per_exec=Estimate(value=power / 100, ci_low=(power - half) / 100, ci_high=(power + half) / 100),
            exec_time=Estimate(value=100.0, ci_low=99.0, ci_high=101.0, unit="µs"),
        ),
    )
    return SimpleNamespace(result=result, valid=valid)


def test_fleet_spread_gives_every_metric_and_the_summary_columns() -> None:
    """Deterministic (seeded by the scenario), every fleet column of the contract, `gpu` = the first listed GPU."""
    cards = {3: summary(600.0, 1.0), 1: summary(612.0, 1.0, valid=False)}
    out = fleet_spread(cards, AnalysisConfig(), "cb-4k")
    assert out == fleet_spread(cards, AnalysisConfig(), "cb-4k")
    assert set(out.metrics) == {"power", "energy_per_exec", "exec_time"}
    assert out.gpus == [3, 1] and out.row["gpu"] == 3
    assert set(out.row) == {"gpu", *fleet_columns()}
    assert out.row["fleet_power_w"] == pytest.approx(606.0) == out.metrics["power"].mean.value
    assert out.metrics["power"].mean.unit == "W" and out.metrics["exec_time"].cards[0].value.unit == "µs"
    assert out.row["fleet_power_distinct"] is True and out.row["fleet_exec_time_distinct"] is False
    assert [c.valid for c in out.metrics["power"].cards] == [True, False]
    # the JSON the stage writes reads back into the same model
    assert FleetResult.model_validate(json.loads(json.dumps(out.model_dump(mode="json")))) == out


def test_one_imprecise_card_does_not_hide_distinct_others() -> None:
    """Cochran's Q weighs each card by its precision: cards 6 W apart with +-0.6 W CIs differ, a fourth card with a
    +-12 W CI (an imprecise row) does not make them look alike (the noisy card would dominate a max - min test)."""
    cards = {0: (459.9, 459.1, 460.7), 1: (463.6, 463.0, 464.2), 2: (452.6, 440.6, 464.6), 3: (457.1, 456.5, 457.7)}
    m = metric_spread(cards, 0.95, rng())
    assert m.distinct is True and m.q > m.q_noise_quantile
    assert m.noise_spread_pct < m.spread_pct.value
