"""The report of a kernel power database: size, build time and opening time in headless Chromium at N scenarios.

The N scenarios are copies of an analyzed sweep's scenarios (`fingrav.testing.clones`: nothing measured or
analyzed again; default source: the default sweep's results/sim-mi300x, run `snakemake --cores 1` first). The
report is built by `fingrav.report.build.build_report` as the report stage does; then Debian's Chromium (driven by
Playwright, /usr/bin/chromium) opens index.html at 1400 px and the script records the time to the load event and
to the overview figure drawn, opens one folded profile and waits for it to be drawn, sorts the core table by power
and filters it. Issue 20's targets: under 10 MB, opens in under 3 s.

    python benchmarks/report_scale.py [--n 200] [--source results/sim-mi300x] [--out /tmp/report-scale]

Prints one table row (markdown) for benchmarks/RESULTS.md, with the machine's load."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import time
from pathlib import Path

from fingrav.layout import SweepLayout
from fingrav.report.build import build_report
from fingrav.testing.browser import CHROMIUM, CHROMIUM_ARGS
from fingrav.testing.clones import clone_scenarios

logger = logging.getLogger("report_scale")


def open_in_chromium(index: Path) -> dict[str, float | int | str]:
    """Times (s) to the load event and to the overview drawn; a profile opened and drawn; sort and filter."""
    from playwright.sync_api import sync_playwright

    out: dict[str, float | int | str] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=list(CHROMIUM_ARGS))
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        t = time.perf_counter()
        page.goto(index.as_uri(), wait_until="load")
        out["load_s"] = time.perf_counter() - t
        page.wait_for_selector('#fig-overview .vega[data-state="drawn"]', timeout=30_000)
        out["overview_drawn_s"] = time.perf_counter() - t
        key = page.locator("details.lazy:not([open])").first.get_attribute("id")
        first = page.locator(f"details#{key}")
        t = time.perf_counter()
        first.locator("summary").click()
        first.locator('.vega[data-state="drawn"]').wait_for(timeout=30_000)
        out["profile_drawn_s"] = time.perf_counter() - t
        page.locator("#core-table tr th", has_text="power (W)").first.click()
        out["sorted_first"] = page.locator("#core-table tr").nth(1).inner_text()[:40]
        page.fill('input.table-filter[data-table="core-table"]', "-c1 ")
        out["filter_count"] = page.locator("#core-table-count").inner_text()
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--source", type=Path, default=Path("results/sim-mi300x"))
    ap.add_argument("--out", type=Path, default=Path("/tmp/report-scale"))
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    src, dst = SweepLayout(args.source), SweepLayout(args.out)
    shutil.rmtree(dst.root, ignore_errors=True)
    names = sorted(p.name for p in (src.root / "profiles" / "gpu0").iterdir() if p.is_dir())
    scenarios = clone_scenarios(src, dst, names, args.n)
    t = time.perf_counter()
    cpu = time.process_time()
    build_report(dst, scenarios, {"sweep": dst.root.name, "backend": "sim"})
    build_s, build_cpu = time.perf_counter() - t, time.process_time() - cpu
    size_mb = sum(f.stat().st_size for f in dst.report_dir.iterdir()) / 1e6
    got = open_in_chromium(dst.report_html)
    load = os.getloadavg()[0]
    print("| scenarios | report folder (MB) | build (s wall / CPU) | load event (s) | overview drawn (s) "
          "| a profile drawn on opening (s) | load avg |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    print(f"| {args.n} | {size_mb:.1f} | {build_s:.1f} / {build_cpu:.1f} | {got['load_s']:.2f} "
          f"| {got['overview_drawn_s']:.2f} | {got['profile_drawn_s']:.2f} | {load:.1f} |")  # fmt: skip
    print(f"sorted by power, first row: {got['sorted_first']!r}; filter '-c1 ': {got['filter_count']}")


if __name__ == "__main__":
    main()
