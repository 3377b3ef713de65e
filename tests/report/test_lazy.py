"""A report of many scenarios (fingrav/report/lazy.py): above `LAZY_ABOVE` scenarios no figure is rendered to PNG;
each is a packed Vega-Lite spec in a folded section that the browser draws when opened, and the tables sort and
filter. Built from copies of two analyzed synthetic scenarios (`fingrav.testing.clones`). The page is then opened
in Debian's Chromium (skipped locally without it, required in CI) to check that a folded profile is drawn on
opening and that sorting and filtering work. Sizes and opening times at 200 scenarios: benchmarks/report_scale.py."""

from __future__ import annotations

import os
import re

import pytest

from fingrav import rawio
from fingrav.config import AnalysisConfig
from fingrav.layout import SweepLayout
from fingrav.report import build_report
from fingrav.report.lazy import LAZY_ABOVE, LAZY_MAX_POINTS, pack_spec, unpack_spec, vega_bundle
from fingrav.testing.browser import CHROMIUM, CHROMIUM_ARGS
from fingrav.testing.clones import clone_scenarios
from fingrav.testing.synthetic import write_analyzed

ANALYSIS = AnalysisConfig(bootstrap_reps=200, min_lois=10)
N = LAZY_ABOVE + 6
BUDGET_MB_AT_200 = 10.0  # issue 20: the report of a 200-scenario sweep stays under 10 MB


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[SweepLayout, list[str]]:
    """A report of N scenarios: copies of two analyzed synthetic ones."""
    root = tmp_path_factory.mktemp("lazy")
    src = SweepLayout(root / "src")
    for name, pred in (("gemm", 0), ("gemm-after-gemv", 2)):
        write_analyzed(src, name, ANALYSIS, predecessor_count=pred)
    dst = SweepLayout(root / "big")
    names = clone_scenarios(src, dst, ["gemm", "gemm-after-gemv"], N)
    build_report(dst, names, {"sweep": "big", "backend": "synthetic"})
    return dst, names


def test_clones_are_the_sources_under_new_names(big: tuple[SweepLayout, list[str]]) -> None:
    layout, names = big
    assert len(names) == N == len(set(names))
    data = rawio.read_json(layout.summary_json(names[1]))
    assert data["scenario"] == names[1] == data["result"]["labels"]["scenario"]


def test_every_figure_is_a_packed_spec_and_no_png_is_written(big: tuple[SweepLayout, list[str]]) -> None:
    layout, names = big
    html = layout.report_html.read_text(encoding="utf-8")
    assert not list(layout.report_dir.glob("*.png"))
    assert "data:image/png" not in html
    specs = re.findall(r'<script type="application/octet-stream" class="spec">([^<]+)</script>', html)
    profiles = re.findall(r'<details class="lazy" id="fig-profile_([^"]+)"', html)
    assert profiles == names  # one folded profile per scenario, in order
    assert len(specs) >= N
    for payload in specs[:3]:
        spec = unpack_spec(payload)
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        points = max(len(v) for v in spec.get("datasets", {}).values())
        assert points <= LAZY_MAX_POINTS
    assert "vegaEmbed" in html and "DecompressionStream" in html  # the bundle and the drawing code, inline
    assert not re.search(r"<script[^>]*\bsrc=", html)  # nothing fetched: works offline


def test_size_per_scenario_keeps_200_scenarios_under_budget(big: tuple[SweepLayout, list[str]]) -> None:
    """What each scenario adds, projected to 200 scenarios (measured at 200: benchmarks/RESULTS.md)."""
    layout, _ = big
    html = layout.report_html.read_text(encoding="utf-8")
    bundle = len(vega_bundle())
    projected = (bundle + (len(html) - bundle) / N * 200) / 1e6  # all but the bundle grows with the rows (upper bound)
    assert projected < BUDGET_MB_AT_200, projected


def test_pack_spec_rounds_to_significant_digits_and_is_deterministic() -> None:
    spec = {"datasets": {"d": [{"x": 608.5648193359375, "n": 3, "s": "a"}]}}
    assert pack_spec(spec) == pack_spec(spec)
    assert unpack_spec(pack_spec(spec)) == {"datasets": {"d": [{"x": 608.56, "n": 3, "s": "a"}]}}


def test_a_folded_profile_is_drawn_when_opened_and_tables_sort_and_filter(big: tuple[SweepLayout, list[str]]) -> None:
    layout, names = big
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        sync_playwright = None
    if sync_playwright is None or not CHROMIUM.exists():
        msg = "Chromium or playwright is missing: apt-get install chromium; pip install -e '.[test]'"
        if os.environ.get("CI"):
            pytest.fail(f"on CI this test must run: {msg}")
        pytest.skip(msg)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(layout.report_html.as_uri(), wait_until="load")
        fig = page.locator(f"details#fig-profile_{names[3]}")
        assert fig.locator(".vega").get_attribute("data-state") is None  # folded: not drawn yet
        fig.locator("summary").click()
        fig.locator('.vega[data-state="drawn"]').wait_for(timeout=30_000)
        assert fig.locator(".vega canvas").count() == 1
        # sort the core table by scenario, descending (second click), then filter it to one scenario
        head = page.locator("#core-table tr").first.locator("th", has_text="scenario").first
        head.click()
        head.click()
        first = page.locator("#core-table tr").nth(1).inner_text()
        assert max(names) in first, first
        page.fill('input.table-filter[data-table="core-table"]', names[7])
        assert page.locator("#core-table-count").inner_text() == f"1 of {N} rows"
        browser.close()
    assert not errors, errors
