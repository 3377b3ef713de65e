"""The report's part for sweeps over listed GPUs (device.gpus): which GPU measured each row, and for a fleet survey
(device.fleet) the card-to-card spread that `fingrav.analysis.fleet` computed (profiles/fleet/<scenario>.json):
a figure of every card's deviation from the fleet mean with its CI, and a table of the spread per scenario.

Shows the analysis' numbers; recomputes nothing. Every path from `fingrav.layout.SweepLayout` (a listed GPU's
files: `SweepLayout.card`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

import altair as alt
import polars as pl

from fingrav import rawio
from fingrav.contracts.multigpu import FleetResult, RowValue
from fingrav.contracts.result import Estimate, is_finite
from fingrav.contracts.summary import GPU, fleet_columns
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.report.figures import _scenario_x, _title, configure
from fingrav.report.html import esc, fmt
from fingrav.report.load import ScenarioData, load_scenario

logger = logging.getLogger(__name__)

FLEET_CAPTION = (
    "Every listed GPU ran every scenario on its own. Each point is one card's power as its own analysis gave it, "
    "as a deviation from the mean of the cards, with its {ci} CI (from the cards' measurement uncertainty). Table: "
    "per scenario the fleet mean, the spread (max - min) / mean with its CI, the spread measurement noise alone "
    "gives identical cards (<i>noise only</i>), whether the cards differ beyond their noise (Cochran's Q test at "
    "the CI's level: a card with a wide CI weighs little), and the card-to-card standard deviation with the noise "
    "taken out. summary.csv has these as <code>fleet_*</code> columns; the summary table "
    "above shows the first listed GPU. Look for: cards whose CI misses 0 (a card drawing more or less than its "
    "peers) and a spread well above the noise-only one."
)


def load_card_scenarios(
    layout: SweepLayout, scenarios: Sequence[str], cards: Mapping[str, Sequence[int]]
) -> list[ScenarioData]:
    """Every scenario's summary.json from the first listed GPU it ran on (`cards`: scenario -> GPU indices)."""
    return [load_scenario(layout.card(cards[name][0]), name) for name in scenarios]


def load_fleet(layout: SweepLayout, scenarios: Sequence[str]) -> dict[str, FleetResult]:
    """profiles/fleet/<scenario>.json of the scenarios that have one (a fleet survey's), validated."""
    out: dict[str, FleetResult] = {}
    for name in scenarios:
        path = layout.fleet(name)
        if path.exists():
            try:
                out[name] = rawio.read_model(path, FleetResult)
            except DataError as err:
                logger.warning("%s; no card-to-card spread for %s", err, name)
    return out


def gpu_rows(cards: Mapping[str, Sequence[int]], fleet: Mapping[str, FleetResult]) -> dict[str, dict[str, RowValue]]:
    """The columns of a sweep over listed GPUs, per scenario (as the metrics table takes them:
    `fingrav.report.table.metrics_frame`): `gpu` (the GPU of the row) and the fleet columns."""
    out: dict[str, dict[str, RowValue]] = {}
    for name, gpus in cards.items():
        f = fleet.get(name)
        row = f.row if f is not None else {}
        out[name] = {GPU: gpus[0], **{c: row[c] for c in fleet_columns() if c in row}}
    return out


def fleet_data(fleet: Mapping[str, FleetResult], metric: str = "power") -> pl.DataFrame:
    """One row per scenario and card: its value, its deviation from the fleet mean (%) with the CI, valid."""
    rows = []
    for name, f in fleet.items():
        m = f.metrics.get(metric)
        for c in m.cards if m is not None else []:
            dev = c.deviation_pct
            if dev is not None and is_finite(dev.value):
                rows.append(
                    {
                        "scenario": name,
                        "gpu": f"GPU {c.gpu}",
                        "value": c.value.value,
                        "dev_pct": dev.value,
                        "lo_pct": dev.ci_low,
                        "hi_pct": dev.ci_high,
                        "valid": bool(c.valid),
                    }
                )
    schema = {
        "scenario": pl.String,
        "gpu": pl.String,
        "value": pl.Float64,
        "dev_pct": pl.Float64,
        "lo_pct": pl.Float64,
        "hi_pct": pl.Float64,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def fleet_chart(fleet: Mapping[str, FleetResult], order: Sequence[str]) -> alt.TopLevelMixin | None:
    """Each card's power as a deviation from the fleet mean (%), CI bars, one group of cards per scenario."""
    df = fleet_data(fleet)
    if df.height == 0:
        return None
    order = [s for s in order if s in set(df["scenario"].to_list())]
    gpus = sorted(set(df["gpu"].to_list()), key=lambda g: int(g.split()[-1]))
    base = alt.Chart(df).encode(x=_scenario_x(order), xOffset=alt.XOffset("gpu:N", sort=gpus))
    color = alt.Color("gpu:N", sort=gpus, title="card")
    opacity = alt.condition("datum.valid", alt.value(1.0), alt.value(0.35))
    points = base.mark_point(filled=True, size=45).encode(
        y=alt.Y("dev_pct:Q", title="power vs fleet mean (%)"),
        color=color,
        opacity=opacity,
        tooltip=["scenario", "gpu", "value", "dev_pct", "lo_pct", "hi_pct", "valid"],
    )
    bars = (
        base.transform_filter("isValid(datum.lo_pct) && isValid(datum.hi_pct)")
        .mark_rule()
        .encode(y="lo_pct:Q", y2="hi_pct:Q", color=color, opacity=opacity)
    )
    zero = alt.Chart(pl.DataFrame({"y": [0.0]})).mark_rule(color="#888888", strokeDash=[4, 3]).encode(y="y:Q")
    chart = alt.layer(zero, bars, points).properties(
        width=max(260, min(640, 30 * len(order) * len(gpus))),
        height=240,
        title=_title("Card-to-card spread of the power", "bars: CI; faded: invalid row; dashed: fleet mean"),
    )
    return configure(chart)


def _ci(e: Estimate, digits: int) -> str:
    """A value with its CI as table HTML."""
    if not is_finite(e.value):
        return "–"
    out = fmt(e.value, digits)
    if is_finite(e.ci_low) and is_finite(e.ci_high):
        out += f' <span class="ci">[{fmt(e.ci_low, digits)}, {fmt(e.ci_high, digits)}]</span>'
    return out


def fleet_table_html(fleet: Mapping[str, FleetResult], order: Sequence[str]) -> str:
    """The spread of the power per scenario as an HTML table (the analysis' numbers)."""
    head = (
        "<tr><th>scenario</th><th>GPUs</th><th>fleet SSP (W)</th><th>spread (%)</th><th>noise only (%)</th>"
        "<th>cards differ</th><th>card-to-card sd (%)</th></tr>"
    )
    body = []
    for name in order:
        f = fleet.get(name)
        m = f.metrics.get("power") if f is not None else None
        if f is None or m is None:
            continue
        distinct = m.distinct
        body.append(
            f"<tr><td>{esc(name)}</td><td>{esc(', '.join(str(g) for g in f.gpus))}</td>"
            f"<td>{_ci(m.mean, 1)}</td>"
            f"<td>{_ci(m.spread_pct, 2)}</td>"
            f"<td>{fmt(m.noise_spread_pct, 2)}</td>"
            f"<td>{'–' if distinct is None else ('yes' if distinct else 'no')}</td>"
            f"<td>{fmt(m.between_card_sd_pct, 2)}</td></tr>"
        )
    return f'<table class="fleet">{head}{"".join(body)}</table>' if body else ""
