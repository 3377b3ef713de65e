"""The report's figures (fingrav/report/figures.py) show the analysis' numbers under their names, and agree with the
tables of the same report: one generated report is read twice (its figure data and its HTML)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fingrav.config import AnalysisConfig
from fingrav.layout import SweepLayout
from fingrav.report import build_report
from fingrav.report import figures as F
from fingrav.report.load import load_scenarios
from fingrav.testing.synthetic import write_analyzed

ANALYSIS = AnalysisConfig(bootstrap_reps=200, min_lois=10)
NAMES = ("gemm", "gemm-after-gemv")


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> SweepLayout:
    """A report of two differentiated synthetic scenarios (one with a predecessor), built by `build_report`."""
    layout = SweepLayout(tmp_path_factory.mktemp("fig") / "sweep")
    for name, pred in zip(NAMES, (0, 2), strict=True):
        write_analyzed(layout, name, ANALYSIS, predecessor_count=pred)
    build_report(layout, list(NAMES), {"sweep": "fig", "backend": "synthetic"})
    return layout


def _cells(html: str, table: str, scenario: str) -> list[str]:
    """The cells (text, tags stripped) of a scenario's row in one of the page's tables."""
    body = html[html.index(f'<table class="{table}"') :]
    body = body[: body.index("</table>")]
    row = next(r for r in body.split("<tr")[1:] if f"<b>{scenario}</b>" in r)
    return [re.sub(r"<[^>]+>", " ", c).strip() for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]


def test_interleaved_figure_and_core_table_show_the_same_percentage(report: SweepLayout) -> None:
    """The interleaved figure's label is the result's interleaved_reading_vs_ssp_pct, the number the core table
    shows (before: the figure compared with another scenario's headline and said -52.1 % where the table said
    -50.9 %)."""
    scns = load_scenarios(report, list(NAMES))
    fig = F.interleaved_data(scns)
    label = fig.filter(fig["label"] != "")["label"].item()  # "+x.x %"
    ssp_bar = fig.filter(fig["measure"] == F.INTERLEAVED_SSP)["power_w"].item()
    html = report.report_html.read_text(encoding="utf-8")
    cells = _cells(html, "core", "gemm-after-gemv")
    r = scns[1].result
    assert label == f"{r.interleaved.reading_vs_ssp.value:+.1f} %"
    assert any(c.startswith(label.removesuffix(" %")) for c in cells), (label, cells)
    assert ssp_bar == r.ssp.power.value  # the bar it is compared with is the method SSP of the same runs


def test_components_figure_is_the_method_ssp_the_tables_show(report: SweepLayout) -> None:
    """Every bar of the per-channel figure is the method SSP (ssp_power_w, ssp_<channel>_power_w), whatever the
    headline; the full table shows the same total."""
    scns = load_scenarios(report, list(NAMES))
    df = F.components_data(scns)
    for s in scns:
        total = df.filter((df["scenario"] == s.name) & (df["channel"] == "total"))["power_w"].item()
        assert total == s.result.ssp.power.value
        for ch, e in s.result.ssp.channels.items():
            assert df.filter((df["scenario"] == s.name) & (df["channel"] == ch))["power_w"].item() == e.value
    html = report.report_html.read_text(encoding="utf-8")
    shown = _cells(html, "all", "gemm")
    assert any(c.startswith(f"{scns[0].result.headline.power.value:.1f}") for c in shown)


def test_reference_figure_compares_the_method_ssp(report: SweepLayout) -> None:
    """The reference figure's first measure is the method SSP (its label: ssp_vs_reference_pct)."""
    assert F.REF_MEASURES[0].startswith("method SSP")
    r = load_scenarios(report, list(NAMES))[0].result
    assert F.TRUTH_QUANTITIES[0].measured(r) is r.headline.power and F.TRUTH_QUANTITIES[1].measured(r) is r.ssp.power


def test_figure_files_are_named_for_what_they_show(report: SweepLayout) -> None:
    names = {p.name for p in Path(report.report_dir).glob("*.png")}
    assert "interleaved_vs_ssp.png" in names and "components_ssp.png" in names
