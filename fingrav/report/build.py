"""The report stage: summary.csv, one PNG per figure and a self-contained index.html (`build_report`).

Figures are built (altair, Python) in this process and rendered to PNG (vl-convert) in one forked child process,
so that building the next chart overlaps rendering the last on another core: vl-convert holds the GIL while its
JavaScript engine starts (~0.4 s) and in parts of every conversion, so a render thread would stall the builder (and
every call of the builder that releases the GIL: file reads, polars). The child starts the engine while the inputs
are read. A report whose figures are all drawn by the browser (`fingrav.report.lazy`) starts no child.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import altair as alt
import vl_convert as vlc

from fingrav.contracts import flags as FL
from fingrav.contracts import roles as R
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.multigpu import CombinedResult
from fingrav.contracts.paper import SSE_VS_SSP_PCT
from fingrav.contracts.units import ms
from fingrav.layout import SweepLayout
from fingrav.report import collectives as G
from fingrav.report import figures as F
from fingrav.report import fleet as FLT
from fingrav.report import vegalite as VL
from fingrav.report.html import FigureOut, render_html
from fingrav.report.lazy import LAZY_ABOVE, LAZY_MAX_POINTS, pack_spec
from fingrav.report.load import (
    ScenarioData,
    clock_map,
    load_binned,
    load_calibration,
    load_lois,
    load_raw,
    load_scenarios,
    sensor_ns,
)
from fingrav.report.overview import overview_caption, overview_chart
from fingrav.report.table import metrics_frame, summary_frame, write_metrics, write_summary_csv

logger = logging.getLogger(__name__)

MAX_POINTS: Final = 5000
PNG_SCALE: Final = 1.5
PNG_PPI: Final = 72  # vl-convert's (and altair's) default
# PNG names the report writes; stale ones from an earlier report are removed first.
_OWN_PNG: Final = re.compile(
    r"^(profile_.+|timeline_sync_.+|timeline_binning_.+|components_ssp|interleaved_vs_ssp|sse_vs_ssp_error"
    r"|ssp_vs_reference|validation_truth|sensor_readings|gpus_ssp|gpus_profiles|collectives_fig10|fleet_spread"
    r"|overview)\.png$"
)
# in the report folder: what each PNG was rendered from (its name -> {"spec": `render_key`, "png": sha256 of its
# bytes}), so that a report whose figure did not change (a re-analysis changes some figures only) reuses the PNG
PNG_KEYS: Final = ".png-specs.json"
_WARMUP_SPEC: Final = {"mark": "point", "data": {"values": [{"x": 0}]}, "encoding": {"x": {"field": "x"}}}


def _cache_altair_class_tables() -> None:
    """Altair (5.x, 6.x) builds a table of every schema class's hash (json.dumps of ~570 schemas) on each
    `SchemaBase.from_dict`, i.e. for every encoding given as a string: a quarter of a profile chart's build time.
    The table depends only on the classes, so build it once per set of classes. Nothing changes in the charts;
    without the private class (another altair) nothing is patched."""
    try:
        from altair.utils import schemapi
    except ImportError:  # pragma: no cover - altair without schemapi
        return
    cls = getattr(schemapi, "_FromDict", None)
    if cls is None or getattr(cls, "_fingrav_cached", False):
        return
    original = cls.__init__
    tables: dict[tuple[type, ...], Any] = {}

    def init(self: Any, wrapper_classes: Any, /) -> None:
        key = tuple(wrapper_classes)
        if key not in tables:
            original(self, key)
            tables[key] = self.class_dict
        self.class_dict = tables[key]

    cls.__init__ = init
    cls._fingrav_cached = True


_cache_altair_class_tables()


def vegalite_spec(chart: alt.TopLevelMixin, validate: bool = False) -> dict[str, Any]:
    """The chart's Vega-Lite spec with every dataset inlined, as `altair.Chart.save` builds it for vl-convert
    (validation against the schema only when asked: it does not change the spec and is slow)."""
    with alt.data_transformers.enable("default"), alt.data_transformers.disable_max_rows():
        return chart.to_dict(validate=validate, context={"pre_transform": False})


def figure_spec(figure: alt.TopLevelMixin | Mapping[str, Any], validate: bool = False) -> dict[str, Any]:
    """A figure's Vega-Lite spec: an altair chart's (`vegalite_spec`), or a spec a builder wrote itself
    (`fingrav.report.vegalite`) as is; `validate`: against the Vega-Lite schema either way."""
    if not isinstance(figure, Mapping):
        return vegalite_spec(figure, validate=validate)
    if validate:
        VL.validate(figure)
    return dict(figure)


def _vl_version() -> str:
    return "_".join(alt.SCHEMA_VERSION.split(".")[:2])


def render_key(spec: Mapping[str, Any], scale: float = PNG_SCALE) -> str:
    """What a PNG is a function of: the sha256 of the spec (JSON, sorted keys), the Vega-Lite and vl-convert
    versions, the scale and the resolution."""
    head = f"{getattr(vlc, '__version__', '')}|{_vl_version()}|{scale}|{PNG_PPI}|"
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256((head + text).encode()).hexdigest()


def _write_png(png: bytes, path: Path) -> bytes:
    """Write PNG bytes atomically; return them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.stem + ".tmp.png")
    tmp.write_bytes(png)
    tmp.replace(path)
    return png


def render_png(spec: Mapping[str, Any], path: Path, scale: float = PNG_SCALE) -> bytes:
    """Render a Vega-Lite spec to PNG with vl-convert (offline), write it atomically and return the bytes
    (the same call and bytes as `altair.Chart.save(path, format="png", scale_factor=scale)`)."""
    png = vlc.vegalite_to_png(dict(spec), vl_version=_vl_version(), scale=scale, ppi=PNG_PPI)
    return _write_png(png, path)


def _sensor_ns(scn: ScenarioData, calibration: Calibration | None) -> dict[str, Any]:
    """The total channel's sensor parameters (ns): the calibration's, else summary.json's "sensor", else the
    plan's."""
    cal = calibration.sensor.get(R.TOTAL) if calibration is not None else None
    for src in (cal, scn.summary.sensor, scn.summary.plan.sensor):
        rec = src.model_dump(mode="json", exclude_none=True) if src is not None else {}
        if rec.get("period_ns") is not None or rec.get("delay_ns") is not None:
            return sensor_ns(rec)
    return {}


def _ci_pct(meta: Mapping[str, Any]) -> str:
    """The CI level as text, from the sweep config's analysis.ci_level (95 % when not given)."""
    level = ((meta.get("config") or {}).get("analysis") or {}).get("ci_level", 0.95)
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
        "polynomial fits of a cross-validated degree (the analysis' fit_coeffs), shaded around each line: its "
        f"pointwise {ci} CI band (the analysis' fit_band: a cluster bootstrap over runs, re-fitting at the same "
        f"degree); dashed: the mean, light box: the mean's {ci} CI. Look for: SSE below SSP when the kernel is "
        "shorter than the sensor's window, a fit that follows the cloud, and narrow bands."
    ]
    flags = scn.flags
    if "kernel_shorter_than_window" in flags:
        parts.append(
            "This kernel is shorter than the sensor's window + lag: the profile's shape is smoothed; "
            "its mean is still right."
        )
    if not scn.valid:
        parts.append(f'<b class="bad">Invalid scenario</b> (flags: {", ".join(flags) or "none"}).')
    return " ".join(parts)


def _timeline_caption(sensor: Mapping[str, Any]) -> str:
    """The caption of the clock-sync timeline, with the calibrated delay and lag (`sensor`: ns)."""
    delay, lag = sensor.get("delay_ns"), sensor.get("lag_ns")
    resp = ""
    if isinstance(delay, int | float) and isinstance(lag, int | float):
        resp = f" (calibrated delay {ms(delay):.3g} ms, lag {ms(lag):.3g} ms)"
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
    "Per scenario with a reference run (the kernel alone, back to back for seconds): the method SSP (blue, "
    "{ci} CI by cluster bootstrap over runs), the reference run's settled power (purple, {ci} CI from 10 "
    "contiguous batch means: the samples are autocorrelated) and the naive SSE power (red, when measurable). "
    "Label: SSP vs reference. Look for: SSP and reference agreeing within their CIs, and the SSE below both for "
    "kernels shorter than the sensor's window."
)
COMPONENTS_CAPTION = (
    "The method SSP (short stamped runs after idle: ssp_power_w and ssp_<channel>_power_w, whatever the headline) "
    "per channel and scenario (paper Fig. 7), black bars: {ci} CI. Look for: compute-bound GEMMs' total "
    "power close to their compute-die power and well above memory-bound GEMVs; memory-side power following "
    "cache/HBM traffic; no power proportionality (a small GEMM drawing similar compute power)."
)
INTERLEAVED_CAPTION = (
    "The sensor's reading of the kernel's first execution right after many executions of its predecessor (paper "
    "Fig. 9) vs the method SSP of the same runs. Labels: interleaved_reading_vs_ssp_pct, the number the tables "
    "show. Look for: short kernels pulled towards their predecessor's power, long "
    "compute-heavy ones barely moved. The interleaved number is a <b>sensor reading</b> (what the sensor reported "
    "during that execution), not the kernel's own power, when the kernel is shorter than the sensor's window + lag."
)


def _sse_caption(paper: Mapping[str, Any] | None) -> str:
    """The caption of the SSE-vs-SSP error figure, quoting the paper's values when given."""
    ref = ""
    if paper:
        vals = ", ".join(
            f"{k} {float(v.get('pct') if isinstance(v, Mapping) else v):.0f} %"
            for k, v in paper.items()
            if isinstance(v.get("pct") if isinstance(v, Mapping) else v, int | float)
        )
        ref = f" Grey: the paper's MI300X values ({vals})."
    return (
        "How far the SSE reading (what one measures naively) is from the steady-state power, per scenario (red)."
        f"{ref} <i>not measurable</i>: too few SSE LOIs (flag too_few_lois_sse), no number is shown. Look for: "
        "large errors for kernels much shorter than the sensor's averaging window, shrinking as the kernel gets "
        "longer. The sign is in the summary table. SSE numbers are <b>sensor readings</b>: for a kernel shorter than "
        "the sensor's window + lag they show what the sensor reported, not what the kernel drew."
    )


READINGS_CAPTION = (
    "The SSE and interleaved numbers are <b>sensor readings</b>: what the power sensor reported during that one "
    "execution, the number naive profiling gives. The SSP is the kernel's steady-state power. For a kernel shorter "
    "than the sensor's window + lag a reading is not what the kernel drew; on the simulator, grey is the SSE "
    "execution's true power."
)

TRUTH_CAPTION = (
    "Simulator only: each kernel-power number (SSP, energy per execution, reference) minus the simulator's "
    "ground truth, in % of the truth, with its {ci} CI, on a ±2.5 % axis; green band: ±2 %. Look for: every point "
    "inside the band and CIs that cross zero. Sensor readings are in their own panel above."
)


def _clean_pngs(out_dir: Path) -> dict[str, bytes]:
    """Remove PNGs an earlier report wrote (only names this stage produces) and their record (`PNG_KEYS`); return
    the bytes of those the record names with the bytes it saw, by `render_key` (what an unchanged figure reuses)."""
    keys = out_dir / PNG_KEYS
    try:
        recorded = json.loads(keys.read_text())
    except (OSError, ValueError):
        recorded = {}
    reusable: dict[str, bytes] = {}
    for p in out_dir.glob("*.png"):
        if not _OWN_PNG.match(p.name):
            continue
        rec = recorded.get(p.name) if isinstance(recorded, dict) else None
        if isinstance(rec, dict) and isinstance(rec.get("spec"), str):
            png = p.read_bytes()
            if hashlib.sha256(png).hexdigest() == rec.get("png"):
                reusable[rec["spec"]] = png
        p.unlink()
    keys.unlink(missing_ok=True)
    return reusable


def _write_png_keys(out_dir: Path, figures: Sequence[FigureOut], keys: Mapping[str, str]) -> None:
    """Record what each PNG written was rendered from (`PNG_KEYS`)."""
    record = {
        f.filename: {"spec": keys[f.filename], "png": hashlib.sha256(f.png).hexdigest()}
        for f in figures
        if f.png is not None and f.filename in keys
    }
    path = out_dir / PNG_KEYS
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(record, indent=1, sort_keys=True))
    tmp.replace(path)


@dataclass
class _Pending:
    """A figure whose PNG is being rendered."""

    fig: FigureOut
    png: Future[bytes] | None
    t_build_s: float


def _start_engine() -> None:
    """Start vl-convert's JavaScript engine (the render process' initializer: its first conversion)."""
    vlc.vegalite_to_png(_WARMUP_SPEC)


def _render_pool() -> Executor:
    """One process that renders PNGs (forked: it inherits the loaded modules, and starts its engine at once), or,
    where processes cannot be forked, one thread."""
    if "fork" not in multiprocessing.get_all_start_methods():  # pragma: no cover - not on Linux
        pool: Executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="vl-convert")
        pool.submit(_start_engine)
        return pool
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"), initializer=_start_engine)
    pool.submit(int)  # forks the child now (it starts the engine while the inputs are read), not at the first PNG
    return pool


class _Renderer:
    """Builds charts in this process and renders them to PNG in one child process (`_render_pool`; vl-convert runs
    one conversion at a time anyway). A figure that fails is kept with its error, or raised with `strict`; with
    `strict` every spec is also validated against the Vega-Lite schema. `lazy`: every figure drawn by the browser,
    none rendered to PNG (`fingrav.report.lazy`), and no render process."""

    def __init__(self, out_dir: Path, strict: bool, lazy: bool = False) -> None:
        self.out_dir, self.strict = out_dir, strict
        self.lazy = lazy
        self.pool: Executor | None = None if lazy else _render_pool()
        self.pending: list[_Pending] = []
        self.reuse: dict[str, bytes] = {}  # PNGs of an earlier report by `render_key` (`_clean_pngs`)
        self.keys: dict[str, str] = {}  # PNG name -> `render_key` of its spec

    def add(
        self, key: str, section: str, title: str, caption: str, build: Callable[[], Any], lazy: bool = False
    ) -> None:
        """Build one chart and queue its PNG (with `lazy`, or the renderer's `lazy`: keep its packed spec for the
        browser to draw, no PNG); nothing when the figure does not apply (build returns None)."""
        t = time.perf_counter()
        fig = FigureOut(key, section, title, caption)
        try:
            chart = build()
            if chart is None:
                logger.info("figure %s: not applicable", key)
                return
            spec = figure_spec(chart, validate=self.strict)
        except Exception as err:
            if self.strict:
                raise
            logger.exception("figure %s failed", key)
            fig.error = f"{type(err).__name__}: {err}"
            self.pending.append(_Pending(fig, None, time.perf_counter() - t))
            return
        if lazy or self.lazy:
            fig.spec = pack_spec(spec)
            self.pending.append(_Pending(fig, None, time.perf_counter() - t))
            return
        fig.filename = f"{key}.png"
        self.keys[fig.filename] = rkey = render_key(spec)
        png: Future[bytes]
        if rkey in self.reuse:  # the same spec as the earlier report's PNG: the same bytes, not rendered again
            png = Future()
            png.set_result(_write_png(self.reuse[rkey], self.out_dir / fig.filename))
            logger.debug("figure %s: unchanged, PNG reused", key)
        else:
            if self.pool is None:
                self.pool = _render_pool()
            png = self.pool.submit(render_png, spec, self.out_dir / fig.filename)
        self.pending.append(_Pending(fig, png, time.perf_counter() - t))

    def finish(self) -> list[FigureOut]:
        """Wait for every PNG; the figures in the order they were added."""
        out = []
        try:
            for p in self.pending:
                if p.png is not None:
                    try:
                        p.fig.png = p.png.result()
                    except Exception as err:
                        if self.strict:
                            raise
                        logger.error("figure %s: PNG export failed: %s", p.fig.key, err)
                        p.fig.error, p.fig.filename = f"{type(err).__name__}: {err}", None
                logger.debug("figure %s: built in %.2f s", p.fig.key, p.t_build_s)
                out.append(p.fig)
        finally:
            if self.pool is not None:
                self.pool.shutdown(wait=True, cancel_futures=True)
        return out


def _timeline_scenario(scns: Sequence[ScenarioData], meta: Mapping[str, Any]) -> ScenarioData | None:
    """The scenario of the timeline figures: meta["timeline_scenario"], else the first with raw data."""
    wanted = meta.get("timeline_scenario")
    for s in sorted(scns, key=lambda s: s.name != wanted):
        if all((s.raw_dir / f"{k}.parquet").exists() for k in ("executions", "runs", "samples")):
            return s
    return None


def _recorded_device(calibration: Calibration | None) -> str | None:
    """The device name in the calibration's provenance (what replayed raw data was measured on)."""
    dev = calibration.provenance.device if calibration is not None else None
    return str(dev.name or dev.backend or "") or None if dev is not None else None


def _write_tables(
    layout: SweepLayout,
    scns: Sequence[ScenarioData],
    combined: Mapping[str, CombinedResult],
    gpu_rows: Mapping[str, Mapping[str, Any]],
) -> list[Path]:
    """summary.csv and metrics.parquet / metrics.csv from the scenarios' results, the multi-GPU results' and the
    fleet's columns (`gpu_rows`) in the metrics; returns the files written."""
    extra: dict[str, dict[str, Any]] = {}
    for name, c in combined.items():
        extra.setdefault(name, {}).update(c.row)
    for name, row in gpu_rows.items():
        extra.setdefault(name, {}).update(row)
    results = [s.result for s in scns]
    written = [write_summary_csv(summary_frame(results), layout.summary_csv)]
    return written + write_metrics(metrics_frame(results, extra), layout.metrics_parquet, layout.metrics_csv)


def build_report(
    layout: SweepLayout,
    scenarios: Sequence[str],
    meta: Mapping[str, Any],
    world_size: int = 1,
    *,
    cards: Mapping[str, Sequence[int]] | None = None,
    max_points: int = MAX_POINTS,
    strict: bool = False,
) -> list[Path]:
    """Write `layout.summary_csv`, one PNG per figure in `layout.report_dir` and `layout.report_html`; return
    the files written (summary.csv, the PNGs, index.html).

    meta: {"sweep", "backend", "config_hash", "provenance", "config" (its analysis.ci_level sets the CI level
    shown), "paper_sse_vs_ssp_pct" (optional dict name -> % error, matched to scenarios by name; default
    SSE_VS_SSP_PCT, None or {} for none), "timeline_scenario" (optional)}. world_size: GPUs per
    scenario (> 1: GPU k's profiles and the combined numbers of `fingrav.analysis.combine` are shown too).
    cards: a sweep over listed GPUs (device.gpus): scenario -> the GPUs it ran on; each scenario is shown from the
    first (`SweepLayout.card`), summary.csv says which (`gpu`) and, for a fleet survey, has the card-to-card spread
    (`fingrav.analysis.fleet`), which a figure and a table show too (`fingrav.report.fleet`).
    `max_points` caps the points drawn per chart (deterministic subsampling). A figure that fails is logged and
    reported in the page; with `strict=True` it raises instead (and every spec is schema-validated)."""
    t_start = time.perf_counter()
    out_dir = layout.report_dir
    out_dir.mkdir(parents=True, exist_ok=True)
    renderer = _Renderer(out_dir, strict, lazy=len(scenarios) > LAZY_ABOVE)
    try:
        ci = _ci_pct(meta)
        scns = load_scenarios(layout, scenarios) if not cards else FLT.load_card_scenarios(layout, scenarios, cards)
        combined = G.load_combined(layout, scenarios) if world_size > 1 else {}
        fleet = FLT.load_fleet(layout, scenarios) if cards else {}
        written = _write_tables(layout, scns, combined, FLT.gpu_rows(cards, fleet) if cards else {})
        calibration = load_calibration(scns[0].layout if cards and scns else layout)
        renderer.reuse = _clean_pngs(out_dir)
        unknown = {f for s in scns for f in s.flags} - set(FL.BY_NAME)
        if unknown:
            logger.warning("flags the registry (fingrav.contracts.flags) does not know: %s", sorted(unknown))
        _add_figures(renderer, layout, scns, combined, calibration, meta, world_size, ci, max_points)
        if fleet:
            caption = FLT.FLEET_CAPTION.format(ci=ci) + FLT.fleet_table_html(fleet, scenarios)
            order = list(scenarios)
            renderer.add("fleet_spread", "fleet", "Card-to-card spread", caption, lambda: FLT.fleet_chart(fleet, order))
    finally:
        figures = renderer.finish()
    _write_png_keys(out_dir, figures, renderer.keys)
    validation = F.validation_data(scns) if F.has_truth(scns) else None
    page = render_html(
        sweep_meta=meta,
        scns=scns,
        calibration=calibration,
        figures=figures,
        validation=validation,
        render_s=time.perf_counter() - t_start,
        ci_pct=ci,
        many=len(scns) > LAZY_ABOVE,
    )
    index = layout.report_html
    tmp = index.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(index)
    written += [out_dir / f.filename for f in figures if f.png is not None and f.filename]
    written.append(index)
    failed = [f.key for f in figures if not f.drawn]
    logger.info(
        "report: %s (%d figures%s) in %.1f s",
        index,
        len(figures) - len(failed),
        f", {len(failed)} failed: {failed}" if failed else "",
        time.perf_counter() - t_start,
    )
    return written


def _add_figures(
    renderer: _Renderer,
    layout: SweepLayout,
    scns: Sequence[ScenarioData],
    combined: Mapping[str, CombinedResult],
    calibration: Calibration | None,
    meta: Mapping[str, Any],
    world_size: int,
    ci: str,
    max_points: int,
) -> None:
    """Every figure of the page, in page order: the overview, profiles, the timeline, across scenarios, several
    GPUs, the readings, the simulator's truth. Above `LAZY_ABOVE` scenarios every figure is drawn by the browser
    (`fingrav.report.lazy`), the profiles with at most `LAZY_MAX_POINTS` points each."""
    add = renderer.add
    renderer.lazy = len(scns) > LAZY_ABOVE
    results = [s.result for s in scns]
    add(
        "overview",
        "overview",
        "Power and energy per flop against arithmetic intensity",
        overview_caption(results, ci),
        lambda: overview_chart(results),
    )
    _add_profiles(renderer, layout, scns, world_size, ci, max_points)
    _add_timeline(renderer, scns, calibration, meta, max_points)
    _add_across(renderer, scns, calibration, meta, ci)
    _add_gpus(renderer, layout, scns, combined, ci)

    add(
        "sensor_readings",
        "across",
        "Sensor readings next to kernel power",
        READINGS_CAPTION,
        lambda: F.readings_chart(F.readings_data(scns), [s.name for s in scns]),
    )

    # 6. simulator truth
    if F.has_truth(scns):
        add(
            "validation_truth",
            "truth",
            "Measured vs truth",
            TRUTH_CAPTION.format(ci=ci),
            lambda: F.truth_chart(F.validation_data(scns), [s.name for s in scns]),
        )


def _add_profiles(
    renderer: _Renderer,
    layout: SweepLayout,
    scns: Sequence[ScenarioData],
    world_size: int,
    ci: str,
    max_points: int,
) -> None:
    """Figure 1 per scenario (GPU 0, then GPUs 1.. of a multi-GPU sweep)."""
    add = renderer.add
    profile_points = min(max_points, LAZY_MAX_POINTS) if renderer.lazy else max_points

    # 1. per-scenario profiles (GPU 0, then GPUs 1.. of a multi-GPU sweep)
    for s in scns:
        ranks = [s] + [rs for k in range(1, world_size) if (rs := G.rank_scenario(layout, s.scenario, k))]
        for rs in ranks:

            def build_profile(rs: ScenarioData = rs) -> Any:
                """Figure 1 for one scenario on one GPU."""
                lois = load_lois(rs.lois_path, golden_only=True, roles=F.PROFILE_ROLES)
                return F.profile_chart(rs, lois, profile_points)

            key = f"profile_{s.name}" if rs.rank == 0 else f"profile_{s.name}_gpu{rs.rank}"
            title = f"{rs.name}: TOI-power profile"
            # folded, and needed by no reader at a glance: drawn by the browser when opened, never a PNG
            add(key, "profiles", title, _profile_caption(rs, ci), build_profile, lazy=True)


def _add_timeline(
    renderer: _Renderer,
    scns: Sequence[ScenarioData],
    calibration: Calibration | None,
    meta: Mapping[str, Any],
    max_points: int,
) -> None:
    """Figures 2a and 2b: clock sync and binning of one scenario."""
    add = renderer.add

    # 2. timeline of one scenario: clock sync and binning
    tl = _timeline_scenario(scns, meta)
    if tl is not None:
        sensor = _sensor_ns(tl, calibration)
        binned = load_binned(tl.binned_path)
        b_frame, b_meta = binned if binned else (None, None)

        def build_sync() -> Any:
            """Figure 2a."""
            raw = load_raw(tl.raw_dir)
            if raw is None:
                return None
            return F.timeline_sync_chart(tl, raw, clock_map(tl, calibration), b_frame, sensor)

        def build_binning() -> Any:
            """Figure 2b."""
            lois = load_lois(tl.lois_path, golden_only=False, roles=(R.SSP,), channels=(R.TOTAL,))
            return F.binning_chart(tl, lois, b_frame, b_meta, max_points)

        add(
            f"timeline_sync_{tl.name}",
            "timeline",
            f"{tl.name}: without vs with clock sync",
            _timeline_caption(sensor),
            build_sync,
        )
        add(
            f"timeline_binning_{tl.name}",
            "timeline",
            f"{tl.name}: without vs with binning",
            BINNING_CAPTION,
            build_binning,
        )
    else:
        logger.info("no scenario has raw data; no timeline figures")


def _add_across(
    renderer: _Renderer,
    scns: Sequence[ScenarioData],
    calibration: Calibration | None,
    meta: Mapping[str, Any],
    ci: str,
) -> None:
    """Figures 3-5 across scenarios: method SSP per channel, interleaved, SSE vs SSP, the reference run."""
    add = renderer.add

    # 3-5. across scenarios
    backend = str(meta.get("backend") or "")
    if backend == "replay":  # name the device the replayed data was measured on
        backend = _recorded_device(calibration) or backend
    source = f"this sweep ({backend})" if backend else "this sweep"
    paper = meta.get("paper_sse_vs_ssp_pct", SSE_VS_SSP_PCT)
    add(
        "components_ssp",
        "across",
        "Method SSP per channel",
        COMPONENTS_CAPTION.format(ci=ci),
        lambda: F.components_chart(scns),
    )
    add(
        "interleaved_vs_ssp",
        "across",
        "Interleaved reading vs the method SSP",
        INTERLEAVED_CAPTION,
        lambda: F.interleaved_chart(scns),
    )
    add(
        "sse_vs_ssp_error",
        "across",
        "SSE-vs-SSP error",
        _sse_caption(paper),
        lambda: F.sse_error_chart(scns, paper, source),
    )
    if F.has_reference(scns):
        add(
            "ssp_vs_reference",
            "across",
            "SSP vs reference run",
            REFERENCE_CAPTION.format(ci=ci),
            lambda: F.reference_chart(scns),
        )


def _add_gpus(
    renderer: _Renderer,
    layout: SweepLayout,
    scns: Sequence[ScenarioData],
    combined: Mapping[str, CombinedResult],
    ci: str,
) -> None:
    """Several GPUs: per GPU and combined; collectives vs GEMM (paper Fig. 10)."""
    add = renderer.add

    # 5b. several GPUs: per GPU and combined; collectives vs GEMM (paper Fig. 10)
    if combined:
        add(
            "gpus_ssp",
            "gpus",
            "Power per GPU and combined",
            G.GPUS_CAPTION.format(ci=ci),
            lambda: G.gpus_chart(scns, combined),
        )
        add(
            "gpus_profiles",
            "gpus",
            "SSP profiles per GPU and combined",
            G.PROFILES_CAPTION,
            lambda: G.combined_profiles_chart(scns, combined, layout),
        )
    if any(G.kernel_class(G.scenario_kernel(s)) not in (None, "GEMM") for s in scns):
        add(
            "collectives_fig10",
            "gpus",
            "Collectives vs GEMM: total and memory-side power",
            G.fig10_caption(scns, combined, ci),
            lambda: G.fig10_chart(scns, combined),
        )
