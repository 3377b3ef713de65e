"""The report's page (fingrav/report/html.py): each number once under its name, flags shown apart, the reference
table's method SSP and its difference with a CI."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fingrav.analysis.binning import bin_runs
from fingrav.analysis.differentiate import differentiate
from fingrav.config import AnalysisConfig
from fingrav.contracts.result import Estimate, Flags
from fingrav.layout import SweepLayout
from fingrav.report import html as H
from fingrav.report.load import ScenarioData
from fingrav.testing.synthetic import SynthSpec, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200, min_lois=10)


@pytest.fixture(scope="module")
def scn() -> ScenarioData:
    """A scenario with a reference run (a sustained headline) and a predecessor."""
    d = generate(SynthSpec(runs=40, sse_runs=20, predecessor_count=2, reference_executions=1000, seed=2))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    _, summary = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], ANALYSIS,
        d["truth"], max_clock_residual_us=20.0, scenario="cb",
    )  # fmt: skip
    return ScenarioData("cb", summary, SweepLayout(Path(".")))


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_headline_shows_the_power_with_its_source(scn: ScenarioData) -> None:
    r = scn.result
    page = H.headline_section([scn])
    heads = re.findall(r"<th>(.*?)</th>", page)
    assert "power (W)" in heads and not any("SSP power" in h for h in heads)
    assert r.headline.power_source in page
    assert f"{r.headline.power.value:.1f}" in _text(page)


def test_summary_names_the_method_ssp_and_the_headline_apart(scn: ScenarioData) -> None:
    r = scn.result
    page = H.summary_section([scn])
    heads = re.findall(r"<th>(.*?)</th>", page)
    assert {"power (W)", "power source", "SSP (W, stamped runs after idle)", "SSP vs power (%)"} <= set(heads)
    text = _text(page)
    assert f"{r.ssp.power.value:.1f}" in text and f"{r.headline.power.value:.1f}" in text
    # the method SSP vs the headline, with its CI: the table's number is the result's
    e = r.sustained.ssp_vs_power
    assert e.has_ci and f"{e.value:.1f}" in text


def test_flags_are_shown_apart(scn: ScenarioData) -> None:
    flags = Flags(invalidating=["imprecise"], notes=["kernel_shorter_than_window", "power_limit_cycling"])
    summary = scn.summary.model_copy(update={"result": scn.result.model_copy(update={"flags": flags})})
    flagged = ScenarioData("cb", summary, SweepLayout(Path(".")))
    cell = H.flags_cell(flagged)
    inv, _, notes = cell.partition("notes:")
    assert "imprecise" in inv and 'class="flag inv"' in inv and "imprecise" not in notes
    assert all(f in notes for f in flags.notes) and not any(f in inv for f in flags.notes)
    assert "notes:" not in H.flags_cell(scn) and H.flags_cell(scn) == ""  # nothing fired


def test_reference_table_compares_the_method_ssp_with_a_ci(scn: ScenarioData) -> None:
    r = scn.result
    page = H.reference_section([scn])
    heads = re.findall(r"<th>(.*?)</th>", page)
    assert heads[1:4] == ["reference power, settled (W) [CI]", "method SSP (W) [CI]", "SSP vs reference (%) [CI]"]
    text = _text(page)
    assert f"{r.ssp.power.value:.1f}" in text and f"{r.sustained.reference_power.value:.1f}" in text
    e = r.sustained.ssp_vs_reference
    assert e.has_ci and f"{e.value:.2f}" in text


def test_an_invalid_method_ssp_is_marked_beside_it(scn: ScenarioData) -> None:
    assert H.ssp_validity(scn) == ""  # valid: no mark
    ssp = scn.result.ssp.model_copy(update={"valid": False, "invalid_by": ["imprecise", "unsettled"]})
    bad = ScenarioData("cb", scn.summary.model_copy(update={"result": scn.result.model_copy(update={"ssp": ssp})}),
                       SweepLayout(Path(".")))  # fmt: skip
    assert "not valid (imprecise, unsettled)" in H.ssp_validity(bad)
    assert "not valid (imprecise, unsettled)" in H.summary_section([bad])


def test_the_page_reads_the_typed_result_not_columns(scn: ScenarioData) -> None:
    """The page shows what the typed result holds (a number changed in `result.headline` is what the headline
    shows); no report module reads a result number by column name (`value_ci`, `flat()`, a scenario's `row`)."""
    e = scn.result.headline.power
    assert H.ci3(e) == (e.value, e.ci_low, e.ci_high) and not hasattr(scn, "row")
    headline = scn.result.headline.model_copy(update={"power": Estimate.of(123.45, 120.0, 126.0, "W")})
    bumped = scn.summary.model_copy(update={"result": scn.result.model_copy(update={"headline": headline})})
    text = _text(H.headline_section([ScenarioData("cb", bumped, SweepLayout(Path(".")))]))
    assert "123.5" in text and f"{e.value:.1f}" not in text
    report = Path(H.__file__).parent
    for path in report.glob("*.py"):
        if path.name == "table.py":  # summary.csv and metrics are the model flattened (`contracts.result.flatten`)
            continue
        src = path.read_text()
        assert not re.search(r"\bvalue_ci\(|\.flat\(\)|\bs\.row\b|scn\.row\b|\.metric\(", src), path.name
