"""fingrav.report.vegalite writes the spec altair writes (the profile figure built with it: tests/test_report.py)."""

from __future__ import annotations

import altair as alt
import polars as pl

from fingrav.report import vegalite as VL
from fingrav.report.build import vegalite_spec
from fingrav.report.figures import LOOK, _role_color, _role_color_spec, configure


def test_a_layered_spec_equals_altairs() -> None:
    """Two layers over two datasets (one used twice), colour, secondary channel, title and look: the dict equals
    `altair.LayerChart.to_dict` of the same chart (dataset names, theme defaults, schema URL included)."""
    a = pl.DataFrame({"x0": [0.0, 1.5], "x1": [1.0, 2.5], "role_label": ["SSP", "SSE"]})
    b = pl.DataFrame({"t": [0.1, 0.2, 0.3], "p": [300.0, 301.5, 299.25], "role_label": ["SSP", "SSP", "SSE"]})
    labels = ["SSP", "SSE"]
    chart = alt.layer(
        alt.Chart(a).mark_rect(opacity=0.13).encode(x="x0:Q", x2="x1:Q", color=_role_color(labels)),
        alt.Chart(b).mark_circle(clip=True).encode(x=alt.X("t:Q", scale=alt.Scale(nice=False)), y="p:Q"),
        alt.Chart(a).mark_rule().encode(x="x0:Q", color=_role_color(labels)),
    ).properties(width=300, height=200, title=alt.TitleParams(**VL.titled("t", ["one", "two"])))
    want = vegalite_spec(configure(chart))

    data: dict = {}
    color = _role_color_spec(labels)
    layers = [
        VL.layer(
            VL.dataset(a, data),
            "rect",
            {"x": VL.field("x0", "quantitative"), "x2": VL.field("x1"), "color": color},
            opacity=0.13,
        ),
        VL.layer(
            VL.dataset(b, data),
            "circle",
            {"x": VL.field("t", "quantitative", scale={"nice": False}), "y": VL.field("p", "quantitative")},
            clip=True,
        ),
        VL.layer(VL.dataset(a, data), "rule", {"x": VL.field("x0", "quantitative"), "color": color}),
    ]
    body = {"layer": layers, "width": 300, "height": 200, "title": VL.titled("t", ["one", "two"])}
    got = VL.top_level(body, LOOK, data)
    assert got == want
    assert len(got["datasets"]) == 2  # the dataset drawn twice is stored once
