"""The report stage: summary.csv, one PNG per figure and a self-contained index.html."""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import altair as alt
import polars as pl

from fingrav.report import collectives as G
from fingrav.report import figures as F
from fingrav.report.html import FLAG_HELP, FigureOut, render_html
from fingrav.report.load import (
    ScenarioData,
    clock_fit,
    load_binned,
    load_calibration,
    load_lois,
    load_raw,
    load_scenarios,
)
from fingrav.report.table import flag_list, summary_table, write_summary_csv

logger = logging.getLogger(__name__)

MAX_POINTS = 5000
PNG_SCALE = 1.5
# PNG names the report writes; stale ones from an earlier report are removed first.
_OWN_PNG = re.compile(
    r"^(profile_.+|timeline_sync_.+|timeline_binning_.+|components_ssp|interleaved_vs_isolated|sse_vs_ssp_error"
    r"|ssp_vs_reference|validation_truth|gpus_ssp|gpus_profiles|collectives_fig10)\.png$"
)
# the paper's SSE-vs-SSP errors on the MI300X (METHOD.md), used when sweep_meta does not give them
PAPER_SSE_VS_SSP_PCT: dict[str, float] = {"cb-2k": 80.0, "cb-4k": 36.0, "cb-8k": 20.0}


def save_png(chart: alt.TopLevelMixin, path: Path, scale: float = PNG_SCALE) -> bytes:
    """Export a chart to PNG with vl-convert (offline) and return the bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    chart.save(str(tmp), format="png", scale_factor=scale)
    tmp.replace(path)
    return path.read_bytes()


def _sensor_ms(scn: ScenarioData, calibration: Mapping[str, Any] | None) -> dict[str, Any]:
    """The total channel's sensor parameters in ms: calibration.json, else summary.json's "sensor",
    else the plan's (both in ns)."""
    sensor = ((calibration or {}).get("sensor") or {}).get("total")
    if isinstance(sensor, Mapping) and sensor:
        return dict(sensor)
    for src in (scn.summary.get("sensor"), scn.plan.get("sensor")):
        if isinstance(src, Mapping) and src:
            return {k[:-3] + "_ms": float(v) / 1e6 for k, v in src.items()
                    if k.endswith("_ns") and isinstance(v, int | float) and not isinstance(v, bool)}
    return {}


def _ci_pct(sweep_meta: Mapping[str, Any]) -> str:
    """The CI level as text, from the sweep config's analysis.ci_level (95 % when not given)."""
    level = ((sweep_meta.get("config") or {}).get("analysis") or {}).get("ci_level", 0.95)
    try:
        return f"{float(level) * 100:.4g} %"
    except (TypeError, ValueError):
        return "95 %"


def _profile_caption(scn: ScenarioData, ci: str) -> str:
    """The caption of a scenario's profile figure."""
    parts = [
        "Each dot is a LOI: a power sample that fell inside an execution of a golden run, placed at its TOI. "
        "<b>Red</b>: SSE (first execution after the warm-ups); <b>blue</b>: SSP (executions in power steady "
        "state); <b>green</b>: the first execution right after the predecessor, when there is one. Lines: "
        f"polynomial fits (the analysis' fit_coeffs); shaded band: mean ± {ci} CI; dashed: mean. Look for: SSE "
        "below SSP when the kernel is shorter than the sensor's window, a fit that follows the cloud, and narrow "
        "bands."
    ]
    flags = flag_list(scn.row.get("flags"))
    if "kernel_shorter_than_window" in flags:
        parts.append("This kernel is shorter than the sensor's window + lag: the profile's shape is smoothed; "
                     "its mean is still right.")
    if not scn.valid:
        parts.append(f'<b class="bad">Invalid scenario</b> (flags: {", ".join(flags) or "none"}).')
    return " ".join(parts)


def _timeline_caption(sensor: Mapping[str, Any]) -> str:
    """The caption of the clock-sync timeline, with the calibrated delay and lag."""
    delay, lag = sensor.get("delay_ms"), sensor.get("lag_ms")
    resp = ""
    if isinstance(delay, int | float) and isinstance(lag, int | float):
        resp = f" (calibrated delay {delay:.3g} ms, lag {lag:.3g} ms)"
    return (
        "Power samples of one golden run as logged, with the run's executions as coloured intervals (thin lines "
        "mark the SSE and the interleaved execution). <b>Top</b>: GPU stamps read as host time; the executions "
        "do not line up with the power they cause (or lie far outside the run). <b>Bottom</b>: mapped through "
        "the fitted clock offset and drift; the rise of the logged power follows the start of the executions, "
        f"late by the sensor's delay and smoothed by its lag{resp}. Samples are drawn before delay correction."
    )


BINNING_CAPTION = (
    "<b>Left</b>: the SSP execution time of every SSP run; runs inside the golden bin (between the red lines, the "
    "most populated window of width = margin) are kept. <b>Middle</b>: the SSP LOIs of all SSP runs at their TOI "
    "in µs, outlier runs in orange; <b>right</b>: golden runs only. SSE runs are binned the same way on their SSE "
    "execution, separately. Look for: outlier runs that would stretch or smear the profile, and how many runs "
    "binning drops."
)
REFERENCE_CAPTION = (
    "Per scenario with a reference run (the kernel alone, back to back for seconds): the SSP power (blue, "
    "{ci} CI by cluster bootstrap over runs), the reference run's settled power (purple, {ci} CI from 10 "
    "contiguous batch means: the samples are autocorrelated) and the naive SSE power (red, when measurable). "
    "Label: SSP vs reference. Look for: SSP and reference agreeing within their CIs, and the SSE below both for "
    "kernels shorter than the sensor's window."
)
COMPONENTS_CAPTION = (
    "SSP power per channel and scenario (paper Fig. 7), black bars: {ci} CI. Look for: compute-bound GEMMs' total "
    "power close to their compute-die power and well above memory-bound GEMVs; memory-side power following "
    "cache/HBM traffic; no power proportionality (a small GEMM drawing similar compute power)."
)
INTERLEAVED_CAPTION = (
    "The kernel's first execution right after many executions of its predecessor (paper Fig. 9) vs its isolated "
    "SSP: the SSP of the scenario with the same kernel and no predecessor, or the scenario's own SSP if the sweep "
    "has none. Labels: difference in %. Look for: short kernels pulled towards their predecessor's power, long "
    "compute-heavy ones barely moved."
)


def _sse_caption(paper: Mapping[str, Any] | None) -> str:
    """The caption of the SSE-vs-SSP error figure, quoting the paper's values when given."""
    ref = ""
    if paper:
        vals = ", ".join(
            f"{k} {float(v.get('pct') if isinstance(v, Mapping) else v):.0f} %" for k, v in paper.items()
            if isinstance(v.get("pct") if isinstance(v, Mapping) else v, int | float)
        )
        ref = f" Grey: the paper's MI300X values ({vals})."
    return (
        "How far the SSE reading (what one measures naively) is from the steady-state power, per scenario (red)."
        f"{ref} <i>not measurable</i>: too few SSE LOIs (flag too_few_lois_sse), no number is shown. Look for: "
        "large errors for kernels much shorter than the sensor's averaging window, shrinking as the kernel gets "
        "longer. The sign is in the summary table."
    )


TRUTH_CAPTION = (
    "Simulator only: each quantity's measured value minus the simulator's ground truth, in % of the truth, with "
    "its {ci} CI; green band: ±2 %. Look for: every point inside the band and CIs that cross zero."
)


def _clean_pngs(out_dir: Path) -> None:
    """Remove PNGs an earlier report wrote (only names this stage produces)."""
    for p in out_dir.glob("*.png"):
        if _OWN_PNG.match(p.name):
            p.unlink()


def _render(
    key: str, section: str, title: str, caption: str, build: Callable[[], Any], out_dir: Path, strict: bool
) -> FigureOut | None:
    """Build one chart and export it; None when the figure does not apply."""
    t = time.perf_counter()
    try:
        chart = build()
        if chart is None:
            logger.info("figure %s: not applicable", key)
            return None
        filename = f"{key}.png"
        png = save_png(chart, out_dir / filename)
    except Exception as err:
        if strict:
            raise
        logger.exception("figure %s failed", key)
        return FigureOut(key, section, title, caption, error=f"{type(err).__name__}: {err}")
    logger.debug("figure %s: %.2f s", key, time.perf_counter() - t)
    return FigureOut(key, section, title, caption, png=png, filename=filename)


def _timeline_scenario(scns: Sequence[ScenarioData], sweep_meta: Mapping[str, Any]) -> ScenarioData | None:
    """The scenario of the timeline figures: sweep_meta["timeline_scenario"], else the first with raw data."""
    wanted = sweep_meta.get("timeline_scenario")
    ordered = sorted(scns, key=lambda s: s.name != wanted)
    for s in ordered:
        if all((s.raw_dir / f"{k}.parquet").exists() for k in ("executions", "runs", "samples")):
            return s
    return None


def _recorded_device(sweep_dir: Path) -> str | None:
    """The device name in calibration.json's provenance (what replayed raw data was measured on)."""
    try:
        dev = json.loads((sweep_dir / "calibration.json").read_text())["provenance"]["device"]
    except (OSError, KeyError, TypeError, ValueError):
        return None
    return str(dev.get("name") or dev.get("backend") or "") or None


def build_report(
    sweep_dir: Path,
    scenarios: list[str],
    sweep_meta: dict[str, Any],
    out_dir: Path,
    *,
    max_points: int = MAX_POINTS,
    strict: bool = False,
) -> None:
    """Write `sweep_dir/summary.csv`, one PNG per figure in `out_dir` and `out_dir/index.html`.

    sweep_meta: {"sweep", "backend", "config_hash", "provenance", "paper_sse_vs_ssp_pct" (optional dict
    name -> % error, matched to scenarios by name; default PAPER_SSE_VS_SSP_PCT, None or {} for none),
    "timeline_scenario" (optional)}. `max_points` caps the
    points drawn per chart (deterministic subsampling). A figure that fails is logged and reported in the
    page; with `strict=True` it raises instead.
    """
    t_start = time.perf_counter()
    sweep_dir, out_dir = Path(sweep_dir), Path(out_dir)
    ci = _ci_pct(sweep_meta)
    scns = load_scenarios(sweep_dir, scenarios)
    table = summary_table([s.row for s in scns], sweep_dir, scenarios)
    combined = G.load_combined(sweep_dir, scenarios)  # several GPUs: per-GPU and combined columns
    table = G.add_rank_columns(table, combined)
    write_summary_csv(table, sweep_dir / "summary.csv")
    calibration = load_calibration(sweep_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _clean_pngs(out_dir)

    unknown = {f for s in scns for f in flag_list(s.row.get("flags"))} - set(FLAG_HELP)
    if unknown:
        logger.info("flags without a description in the report: %s", sorted(unknown))

    figs: list[FigureOut | None] = []

    def add(key: str, section: str, title: str, caption: str, build: Callable[[], Any]) -> None:
        """Render a figure and keep it for the page."""
        figs.append(_render(key, section, title, caption, build, out_dir, strict))

    # 1. per-scenario profiles
    for s in scns:
        def build_profile(s: ScenarioData = s) -> Any:
            """Figure 1 for scenario `s`."""
            lois = load_lois(s.lois_path, golden_only=True, roles=F.PROFILE_ROLES)
            return F.profile_chart(s, lois, max_points)

        add(f"profile_{s.name}", "profiles", f"{s.name}: TOI-power profile", _profile_caption(s, ci), build_profile)
        for k in range(1, int((combined.get(s.name) or {}).get("world_size") or 1)):  # GPUs 1.. of the scenario
            rs = G.rank_scenario(sweep_dir, s.name, k)
            if rs is None:
                continue

            def build_rank_profile(rs: ScenarioData = rs, k: int = k, name: str = s.name) -> Any:
                """Figure 1 for GPU k of a multi-GPU scenario."""
                lois = load_lois(sweep_dir / "profiles" / name / f"rank{k}" / "lois.parquet", golden_only=True,
                                 roles=F.PROFILE_ROLES)
                return F.profile_chart(rs, lois, max_points)

            add(f"profile_{s.name}_rank{k}", "profiles", f"{rs.name}: TOI-power profile",
                _profile_caption(rs, ci), build_rank_profile)

    # 2. timeline of one scenario: clock sync and binning
    tl = _timeline_scenario(scns, sweep_meta)
    if tl is not None:
        sensor = _sensor_ms(tl, calibration)
        binned = load_binned(tl.binned_path)

        def build_sync() -> Any:
            """Figure 2a."""
            raw = load_raw(tl.raw_dir)
            if raw is None:
                return None
            return F.timeline_sync_chart(tl, raw, clock_fit(tl, calibration), binned[0] if binned else None, sensor)

        def build_binning() -> Any:
            """Figure 2b."""
            lois = load_lois(tl.lois_path, golden_only=False, roles=("ssp",), channels=("total",))
            return F.binning_chart(tl, lois, binned[0] if binned else None, binned[1] if binned else None, max_points)

        add(f"timeline_sync_{tl.name}", "timeline", f"{tl.name}: without vs with clock sync",
            _timeline_caption(sensor), build_sync)
        add(f"timeline_binning_{tl.name}", "timeline", f"{tl.name}: without vs with binning", BINNING_CAPTION,
            build_binning)
    else:
        logger.info("no scenario has raw data; no timeline figures")

    # 3-5. across scenarios
    backend = str(sweep_meta.get("backend") or "")
    if backend == "replay":  # name the device the replayed data was measured on
        backend = _recorded_device(sweep_dir) or backend
    source = f"this sweep ({backend})" if backend else "this sweep"
    paper = sweep_meta.get("paper_sse_vs_ssp_pct", PAPER_SSE_VS_SSP_PCT)
    add("components_ssp", "across", "SSP power per channel", COMPONENTS_CAPTION.format(ci=ci),
        lambda: F.components_chart(scns))
    add("interleaved_vs_isolated", "across", "Interleaved vs isolated power", INTERLEAVED_CAPTION,
        lambda: F.interleaved_chart(scns))
    add("sse_vs_ssp_error", "across", "SSE-vs-SSP error", _sse_caption(paper),
        lambda: F.sse_error_chart(scns, paper, source))
    if F.has_reference(scns):
        add("ssp_vs_reference", "across", "SSP vs reference run", REFERENCE_CAPTION.format(ci=ci),
            lambda: F.reference_chart(scns))

    # 5b. several GPUs: per GPU and combined; collectives vs GEMM (paper Fig. 10)
    if combined:
        add("gpus_ssp", "gpus", "SSP power per GPU and combined", G.GPUS_CAPTION.format(ci=ci),
            lambda: G.gpus_chart(scns, combined))
        add("gpus_profiles", "gpus", "SSP profiles per GPU and combined", G.PROFILES_CAPTION,
            lambda: G.combined_profiles_chart(scns, combined, sweep_dir))
    if any(G.kernel_class(G.scenario_kernel(s)) not in (None, "GEMM") for s in scns):
        add("collectives_fig10", "gpus", "Collectives vs GEMM: total and memory-side power",
            G.fig10_caption(scns, combined, ci), lambda: G.fig10_chart(scns, combined))

    # 6. simulator truth
    validation: pl.DataFrame | None = None
    if F.has_truth(scns):
        validation = F.validation_data(scns)
        val = validation
        add("validation_truth", "truth", "Measured vs truth", TRUTH_CAPTION.format(ci=ci),
            lambda: F.truth_chart(val, [s.name for s in scns]))

    rendered = [f for f in figs if f is not None]
    page = render_html(
        sweep_meta=sweep_meta, scns=scns, calibration=calibration, figures=rendered, validation=validation,
        render_s=time.perf_counter() - t_start, ci_pct=ci,
    )
    index = out_dir / "index.html"
    tmp = index.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    failed = [f.key for f in rendered if f.png is None]
    logger.info(
        "report: %s (%d figures%s) in %.1f s", index, len(rendered) - len(failed),
        f", {len(failed)} failed: {failed}" if failed else "", time.perf_counter() - t_start,
    )
