"""The report's figures as altair charts (exported to PNG by `fingrav.report.build`).

Each builder takes already loaded data and returns a chart, or None when the figure does not apply
(e.g. no scenario has a predecessor). Builders never read files themselves, except through the data
passed in, and keep every embedded dataset small (LOIs are subsampled by the caller).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import altair as alt
import numpy as np
import polars as pl

from fingrav.analysis.roles import role_expr
from fingrav.contracts import roles as R
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.paper import norm_name
from fingrav.contracts.result import Estimate, ScenarioResult, Truth, is_finite
from fingrav.contracts.units import MW_PER_W, NS_PER_MS, NS_PER_US, ms, us, w
from fingrav.report import vegalite as VL
from fingrav.report.load import ScenarioData, subsample

logger = logging.getLogger(__name__)

Chart = alt.TopLevelMixin

# every execution role (fingrav.contracts.roles), labelled and coloured in the order of a run in time
ROLE_LABELS: dict[str, str] = {
    R.PRED: "predecessor",
    R.WARMUP: "warm-up",
    R.FIRST: "interleaved (1st)",
    R.SSE: "SSE",
    R.SSP: "SSP",
    R.TRAIL: "trailing",
}
assert tuple(ROLE_LABELS) == R.TIME_ORDER
ROLE_COLORS: dict[str, str] = {
    "predecessor": "#ff7f0e",
    "warm-up": "#b0b0b0",
    "interleaved (1st)": "#2ca02c",
    "SSE": "#d62728",
    "SSP": "#1f77b4",
    "trailing": "#9edae5",
}
PROFILE_ROLES: tuple[str, ...] = (R.SSP, R.FIRST, R.SSE)  # drawing order: SSP first, the sparse roles on top
FONT = "sans-serif"


def _role_color_spec(labels: Sequence[str], title: str = "execution") -> dict[str, Any]:
    """The role colour encoding as a Vega-Lite dict, restricted to the roles present."""
    domain = [lab for lab in ROLE_COLORS if lab in set(labels)]
    legend = {"orient": "right", "symbolOpacity": 0.9, "symbolType": "circle", "symbolSize": 80}
    scale = {"domain": domain, "range": [ROLE_COLORS[d] for d in domain]}
    return VL.field("role_label", "nominal", title=title, scale=scale, legend=legend)


def _role_color(labels: Sequence[str], title: str = "execution") -> alt.Color:
    """The role colour encoding (`_role_color_spec`) for an altair chart."""
    return alt.Color(**_role_color_spec(labels, title))


def _title(text: str, subtitle: str | Sequence[str] | None = None) -> alt.TitleParams:
    """A left-aligned chart title with an optional subtitle."""
    return alt.TitleParams(**VL.titled(text, subtitle))


# the shared look of every figure (Vega-Lite `config`)
LOOK: dict[str, Any] = {
    "font": FONT,
    "background": "white",
    "view": {"stroke": "#dddddd"},
    "axis": {"labelFontSize": 10, "titleFontSize": 11, "gridColor": "#eeeeee"},
}


def configure(chart: Chart) -> Chart:
    """Shared look of every figure (`LOOK`, set in place on a freshly built chart: the same spec as
    `chart.configure(...).configure_view(...).configure_axis(...)` without three deep copies of it)."""
    chart.config = alt.Config(
        font=LOOK["font"],
        background=LOOK["background"],
        view=alt.ViewConfig(**LOOK["view"]),
        axis=alt.AxisConfig(**LOOK["axis"]),
    )
    return chart


# --------------------------------------------------------------------------- 1. TOI-power profile
def exec_time_us(scn: ScenarioData, lois: pl.DataFrame | None) -> float | None:
    """The scenario's execution time (µs): the result's, else estimated from the LOIs."""
    v = scn.result.headline.exec_time.value
    if is_finite(v) and v > 0:
        return float(v)
    if lois is not None and lois.height and "toi_ns" in lois.columns:
        est = lois.filter(pl.col("toi_frac") > 0.05).select((pl.col("toi_ns") / pl.col("toi_frac")).median()).item()
        if est is not None and np.isfinite(est):
            return float(us(est))
    return None


DENSITY_ABOVE_POINTS = 800  # a panel with more LOIs than this shows their density instead of the points


@dataclass
class _ProfileLines:
    """What the analysis computed for a profile's lines (summary.json, never recomputed): the fits evaluated on a
    TOI grid, their pointwise CI bands, and each role's mean with its CI, as rows per channel and role."""

    fits: list[dict[str, Any]]
    fit_bands: list[dict[str, Any]]
    bands: list[dict[str, Any]]
    degrees: set[int]
    band_levels: set[float]


def _profile_points(
    scn: ScenarioData, lois: pl.DataFrame | None, exec_us: float, max_points: int
) -> tuple[pl.DataFrame, list[str], int, int]:
    """The golden runs' LOIs to draw (subsampled to `max_points`, in drawing order: SSP first), the channels to
    draw, and how many LOIs are shown of how many."""
    channels = scn.channels
    pts = pl.DataFrame(schema={"channel": pl.String, "role": pl.String, "toi_us": pl.Float64, "power_w": pl.Float64})
    shown = total = 0
    if lois is not None and lois.height:
        sel = lois.filter(pl.col("golden") & pl.col("role").is_in(list(PROFILE_ROLES)))
        total = sel.height
        sel = subsample(sel, max_points, by=("channel", "role"))
        shown = sel.height
        pts = sel.select(
            "channel",
            "role",
            (pl.col("toi_frac") * exec_us).alias("toi_us"),
            (pl.col("power_mw") / MW_PER_W).alias("power_w"),
        )
        channels = [c for c in channels if c in set(pts["channel"].to_list())] or channels
    rank = {r: i for i, r in enumerate(PROFILE_ROLES)}
    pts = (
        pts.with_columns(
            pl.col("role").replace_strict(ROLE_LABELS, default=pl.col("role")).alias("role_label"),
            pl.col("role").replace_strict(rank, default=99, return_dtype=pl.Int32).alias("_rank"),
        )
        .sort("_rank", maintain_order=True)
        .drop("_rank")
    )
    return pts, channels, shown, total


def _profile_lines(scn: ScenarioData, channels: Sequence[str], exec_us: float) -> _ProfileLines:
    """The fits (fit_coeffs on 41 TOIs), their CI bands (fit_band) and the means with CIs of every channel and
    role the summary has (none for an SSE that is not measurable)."""
    out = _ProfileLines([], [], [], set(), set())
    frac = np.linspace(0.0, 1.0, 41)
    for ch in channels:
        for role in PROFILE_ROLES:
            stats = scn.summary.role(ch, role)
            if stats is None or (role == R.SSE and not scn.sse_measurable):  # too few SSE LOIs: no fit, no mean
                continue
            label = ROLE_LABELS[role]
            coeffs = stats.fit_coeffs
            if coeffs and all(is_finite(c) for c in coeffs):
                ys = np.polyval(np.asarray(coeffs, dtype=float), frac) / MW_PER_W
                out.degrees.add(len(coeffs) - 1)
                out.fits += [
                    {"channel": ch, "role_label": label, "toi_us": float(f * exec_us), "power_w": float(y)}
                    for f, y in zip(frac, ys, strict=True)
                ]
                fb = stats.fit_band
                if fb is not None and all(is_finite(v) for v in (*fb.ci_low_mw, *fb.ci_high_mw)):
                    out.band_levels.add(fb.level)
                    out.fit_bands += [
                        {"channel": ch, "role_label": label, "toi_us": float(f * exec_us), "lo_w": w(lo), "hi_w": w(hi)}
                        for f, lo, hi in zip(fb.toi_frac, fb.ci_low_mw, fb.ci_high_mw, strict=True)
                    ]
            mean, lo, hi = stats.power.value, stats.power.ci_low, stats.power.ci_high
            if is_finite(mean):
                lo_w, hi_w = (w(lo) if is_finite(lo) else w(mean)), (w(hi) if is_finite(hi) else w(mean))
                row = {"channel": ch, "role_label": label, "mean_w": w(mean), "lo_w": lo_w, "hi_w": hi_w}
                out.bands.append({**row, "x0": 0.0, "x1": exec_us})
    return out


def _profile_layers(
    ch: str, pts: pl.DataFrame, frames: Mapping[str, pl.DataFrame | None], enc: Mapping[str, Any], data: dict
) -> tuple[list[dict[str, Any]], bool]:
    """The layers of one channel's panel (CI boxes of the means, LOIs or their density, mean rules, fit bands,
    fits) as Vega-Lite dicts, and whether the LOIs are drawn as their density."""
    x, y, y_mean, color = enc["x"], enc["y"], enc["y_mean"], enc["color"]
    x_y = {"x": x("toi_us"), "y": y("power_w")}
    sel = {k: f.filter(pl.col("channel") == ch) if f is not None else None for k, f in frames.items()}
    b, fb, f = sel["bands"], sel["fit_bands"], sel["fits"]
    p = pts.filter(pl.col("channel") == ch)
    dense = p.height > DENSITY_ABOVE_POINTS  # where points would overplot: their density (darker: more LOIs)
    layers = []
    if b is not None and b.height:
        boxes = {"x": x("x0"), "x2": VL.field("x1"), "y": y("lo_w"), "y2": VL.field("hi_w"), "color": color}
        layers.append(VL.layer(VL.dataset(b, data), "rect", boxes, opacity=0.13))
    if dense:
        cells = {
            "x": {**x_y["x"], "bin": {"maxbins": 48}},
            "y": {**x_y["y"], "bin": {"maxbins": 36}},
            "color": color,
            "opacity": {"aggregate": "count", "type": "quantitative", "scale": {"range": [0.08, 0.9]}, "legend": None},
        }
        layers.append(VL.layer(VL.dataset(p, data), "rect", cells, clip=True))
    elif p.height:
        dots = {**x_y, "color": color, "size": enc["size"]}
        layers.append(VL.layer(VL.dataset(p, data), "circle", dots, opacity=0.5, clip=True))
    if b is not None and b.height:
        rule = {"y": y_mean("mean_w"), "color": color}
        layers.append(VL.layer(VL.dataset(b, data), "rule", rule, strokeDash=[5, 3], size=1.2))
    if fb is not None and fb.height:
        area = {"x": x("toi_us"), "y": y("lo_w"), "y2": VL.field("hi_w"), "color": color, "detail": enc["detail"]}
        layers.append(VL.layer(VL.dataset(fb, data), "area", area, opacity=0.28, clip=True))
    if f is not None and f.height:
        line = {"x": x("toi_us"), "y": y_mean("power_w"), "color": color, "detail": enc["detail"]}
        layers.append(VL.layer(VL.dataset(f, data), "line", line, size=2.2, clip=True))
    return layers, dense


def _profile_subtitle(
    scn: ScenarioData, exec_us: float, shown: int, total: int, lines: _ProfileLines, dense: bool
) -> list[str]:
    """The profile's subtitle lines: the kernel, its execution time, LOIs shown, what the lines and boxes are."""
    kernel = f"{scn.result.labels.kernel}; " if scn.result.labels.kernel else ""
    degrees = "/".join(map(str, sorted(lines.degrees)))
    fit_line = f"lines: cross-validated degree-{degrees} fits" if lines.degrees else ""
    if lines.band_levels:
        levels = "/".join(f"{lv * 100:.4g}" for lv in sorted(lines.band_levels))
        fit_line += f"; shaded around them: their {levels} % CI bands (cluster bootstrap over runs)"
    subtitle = [  # one short line each: a long subtitle widens the PNG, and the page then shrinks the panels
        f"{kernel}execution ≈ {_duration(exec_us / 1000.0)}; LOIs of golden runs: {shown} of {total} shown "
        f"(the table's SSP LOIs: {scn.result.counts.ssp_lois})",
        *([fit_line] if fit_line else []),
        "dashed: mean, light box: its CI" + ("; shaded cells: LOI density" if dense else ""),
    ]
    if not scn.sse_measurable:
        subtitle.append("SSE: not measurable (too_few_lois_sse): its few LOIs are drawn, without fit or mean")
    if not scn.valid:
        subtitle.append("INVALID: " + ", ".join(scn.flags))
    return subtitle


def _profile_encodings(labels: Sequence[str], exec_us: float) -> dict[str, Any]:
    """The encodings every panel of a profile shares: x (TOI, µs) and y (power, W) builders, colour, size, detail."""
    x_scale = {"domain": [0, exec_us], "nice": False}
    x_title, y_title = "TOI (µs into the execution)", "power (W)"
    size_scale = {"domain": ["SSP", "interleaved (1st)", "SSE"], "range": [12, 30, 30]}
    return {
        "x": lambda col: VL.field(col, "quantitative", scale=x_scale, title=x_title),
        "y_mean": lambda col: VL.field(col, "quantitative", title=y_title),
        "color": _role_color_spec(labels),
        "size": VL.field("role_label", "nominal", scale=size_scale, legend=None),
        "detail": VL.field("role_label", "nominal"),
        "y_title": y_title,
    }


def profile_chart(scn: ScenarioData, lois: pl.DataFrame | None, max_points: int = 5000) -> VL.Spec | None:
    """TOI-power scatter of the golden runs' LOIs (SSE, SSP and the interleaved first execution), the
    cross-validated fits from summary.json with their pointwise CI bands (`RoleStats.fit_band`, shaded around each
    fit line) and the mean with its CI (dashed, light box) per role; one panel per channel. Where points would
    overplot (more than DENSITY_ABOVE_POINTS), their density in TOI x power cells instead. Returned as the
    Vega-Lite spec itself (`fingrav.report.vegalite`: the spec altair would write, without its copies)."""
    exec_us = exec_time_us(scn, lois)
    if exec_us is None:
        logger.warning("%s: no execution time; no profile figure", scn.name)
        return None
    pts, channels, shown, total = _profile_points(scn, lois, exec_us, max_points)
    lines = _profile_lines(scn, channels, exec_us)
    labels = pts["role_label"].unique().to_list() + [b["role_label"] for b in lines.bands]
    if not labels:
        logger.warning("%s: no LOIs and no role statistics; no profile figure", scn.name)
        return None
    frames = {k: pl.DataFrame(v) if v else None for k, v in (("fits", lines.fits), ("fit_bands", lines.fit_bands))}
    frames["bands"] = pl.DataFrame(lines.bands) if lines.bands else None
    enc = _profile_encodings(labels, exec_us)
    multi = len(channels) > 1
    width, height = (330, 190) if multi else (560, 260)
    data: dict[str, list[dict[str, Any]]] = {}
    panels, dense = [], False
    for ch in channels:
        y_scale = {"zero": False, "nice": True, **_y_domain(pts, frames["bands"], ch)}
        enc["y"] = lambda col, s=y_scale: VL.field(col, "quantitative", scale=s, title=enc["y_title"])
        layers, dense_here = _profile_layers(ch, pts, frames, enc, data)
        dense |= dense_here
        if layers:
            panel_title = f"channel: {ch}" if multi else ""
            panels.append({"layer": layers, "width": width, "height": height, "title": panel_title})
    if not panels:
        return None
    title = VL.titled(f"{scn.name}: TOI-power profile", _profile_subtitle(scn, exec_us, shown, total, lines, dense))
    body = {"concat": panels, "columns": 2, "title": title} if multi else {**panels[0], "title": title}
    return VL.top_level(body, LOOK, data)


def _y_domain(pts: pl.DataFrame, bands: pl.DataFrame | None, channel: str) -> dict[str, list[float]]:
    """The power axis of a profile panel ({"domain": [low, high]}, {} when nothing is finite): spans the LOIs and
    the CI bands (not the fit curves, which may swing wildly where LOIs are sparse and are clipped instead)."""
    vals: list[float] = []
    p = pts.filter(pl.col("channel") == channel)["power_w"]
    if p.len():
        vals += [float(p.min()), float(p.max())]  # type: ignore[arg-type]
    if bands is not None:
        b = bands.filter(pl.col("channel") == channel)
        if b.height:
            vals += [float(b["lo_w"].min()), float(b["hi_w"].max())]  # type: ignore[arg-type]
    vals = [v for v in vals if np.isfinite(v)]
    if not vals:
        return {}
    lo, hi = min(vals), max(vals)
    pad = max((hi - lo) * 0.08, abs(hi) * 0.01, 1e-6)
    return {"domain": [lo - pad, hi + pad]}


# --------------------------------------------------------------------------- 2a. timeline: clock sync
def _duration(ms: float) -> str:
    """A duration given in ms, in readable units."""
    if ms < 1:
        return f"{ms * 1000:.3g} µs"
    if ms < 1000:
        return f"{ms:.3g} ms"
    s = ms / 1000
    if s < 120:
        return f"{s:.3g} s"
    if s < 7200:
        return f"{s / 60:.3g} min"
    if s < 172800:
        return f"{s / 3600:.3g} h"
    return f"{s / 86400:,.3g} days"


def pick_run(raw: Mapping[str, pl.DataFrame], binned: pl.DataFrame | None) -> int | None:
    """The run shown in the timeline: the first golden SSP run, else the first SSP run."""
    runs = raw["runs"].filter(pl.col("phase") == R.SSP)
    ids = set(runs["run"].to_list())
    have_exec = set(raw["executions"]["run"].unique().to_list())
    ids &= have_exec
    if not ids:
        return None
    if binned is not None and binned.height:
        golden = sorted(set(binned.filter(pl.col("golden"))["run"].to_list()) & ids)
        if golden:
            return int(golden[0])
    return int(min(ids))


def merge_spans(execs: pl.DataFrame) -> pl.DataFrame:
    """Consecutive executions of the same role merged into one interval (x0, x1, role_label), so that
    thousands of back-to-back executions become a handful of rectangles."""
    ordered = execs.sort("x0")
    block = (pl.col("role_label") != pl.col("role_label").shift(1)).fill_null(True).cum_sum()
    return (
        ordered.with_columns(block.alias("_block"))
        .group_by("_block", maintain_order=True)
        .agg(pl.col("x0").min(), pl.col("x1").max(), pl.col("role_label").first())
        .select("x0", "x1", "role_label")
    )


def timeline_window(
    ex_sync: pl.DataFrame, samples: pl.DataFrame, sensor: Mapping[str, Any] | None
) -> tuple[float, float]:
    """The ms window [lo, hi] around a run's (synchronized) executions (x0, x1 in ms): enough before to see
    idle and enough after for the sensor's response to fall back. `sensor`: delay_ns, window_ns, lag_ns."""
    s0 = float(ex_sync["x0"].min())  # type: ignore[arg-type]
    s1 = float(ex_sync["x1"].max())  # type: ignore[arg-type]
    busy = max(s1 - s0, 1e-3)
    t = samples.filter(pl.col("channel") == R.TOTAL)["t_ns"] if R.TOTAL in samples["channel"] else samples["t_ns"]
    dt_ms = ms(float(np.median(np.diff(np.sort(t.to_numpy()))))) if t.len() > 2 else busy
    sensor = sensor or {}
    response = ms(
        sum(float(sensor.get(k) or 0.0) for k in ("delay_ns", "window_ns")) + 3 * float(sensor.get("lag_ns") or 0.0)
    )
    before = max(3 * dt_ms, 0.3 * busy)
    after = max(3 * dt_ms, 0.3 * busy, response)
    return min(0.0, s0) - before, s1 + after


def timeline_sync_chart(
    scn: ScenarioData,
    raw: Mapping[str, pl.DataFrame],
    clock: ClockMap | None,
    binned: pl.DataFrame | None,
    sensor: Mapping[str, Any] | None = None,
) -> Chart | None:
    """Paper Fig. 5(a): one run's power samples over time (ms after the run's launch) with its executions
    drawn as intervals by role (`fingrav.analysis.roles.role_expr` on the plan), once with GPU stamps taken as
    host time and once mapped through the clock fit. `sensor`: the total channel's delay_ns, window_ns, lag_ns."""
    if clock is None:
        logger.warning("%s: no clock fit; no timeline figure", scn.name)
        return None
    run = pick_run(raw, binned)
    if run is None:
        return None
    runs = raw["runs"].filter(pl.col("run") == run)
    t0 = int(runs["host_start_ns"][0])
    role = role_expr(scn.summary.plan, segment="segment", exec_index="exec_index", phase="phase")
    ex = (
        raw["executions"]
        .filter(pl.col("run") == run)
        .with_columns(pl.lit(str(runs["phase"][0])).alias("phase"))
        .with_columns(role.cast(pl.String).replace_strict(ROLE_LABELS).alias("role_label"))
    )

    def host_ms(expr: pl.Expr) -> pl.Expr:
        """int64 host ns -> ms after the run's launch."""
        return (expr - t0).cast(pl.Float64) / NS_PER_MS

    sync = ex.with_columns(
        host_ms(clock.host_expr("gpu_start_ns")).alias("x0"), host_ms(clock.host_expr("gpu_end_ns")).alias("x1")
    )
    naive = ex.with_columns(
        host_ms(pl.col("gpu_start_ns").cast(pl.Int64)).alias("x0"),
        host_ms(pl.col("gpu_end_ns").cast(pl.Int64)).alias("x1"),
    )
    samples = raw["samples"]
    lo, hi = timeline_window(sync, samples, sensor)
    pad_ns = int((hi - lo) * NS_PER_MS)
    win = samples.filter(
        pl.col("t_ns").is_between(t0 + int(lo * NS_PER_MS) - pad_ns, t0 + int(hi * NS_PER_MS) + pad_ns)
    )
    win = win.with_columns(
        host_ms(pl.col("t_ns")).alias("t_ms"), (pl.col("power_mw") / MW_PER_W).alias("power_w")
    ).filter(pl.col("t_ms").is_between(lo, hi))
    if win.height == 0:
        logger.warning("%s: no samples around run %d; no timeline figure", scn.name, run)
        return None
    color = _role_color(ex["role_label"].unique().to_list())
    x_scale = alt.Scale(domain=[lo, hi], nice=False)
    x_title = "host time since the run's launch (ms)"
    multi = win["channel"].n_unique() > 1

    def panel(execs: pl.DataFrame, title: str, note: str | None) -> alt.LayerChart:
        """One row of the timeline: executions as intervals, samples as a line."""
        inside = execs.filter((pl.col("x1") >= lo) & (pl.col("x0") <= hi))
        layers: list[alt.Chart] = []
        if inside.height:
            layers.append(
                alt.Chart(merge_spans(inside))
                .mark_rect(opacity=0.35, clip=True)
                .encode(
                    x=alt.X("x0:Q", scale=x_scale, title=x_title),
                    x2="x1:Q",
                    color=color,
                )
            )
            marks = inside.filter(pl.col("role_label").is_in(["SSE", "interleaved (1st)"]))
            if marks.height:
                layers.append(
                    alt.Chart(marks.select("x0", "role_label"))
                    .mark_rule(size=2, clip=True)
                    .encode(
                        x=alt.X("x0:Q", scale=x_scale, title=x_title),
                        color=color,
                    )
                )
        enc: dict[str, Any] = {
            "x": alt.X("t_ms:Q", scale=x_scale, title=x_title),
            "y": alt.Y("power_w:Q", title="power (W)", scale=alt.Scale(zero=False)),
            "detail": "channel:N",
        }
        if multi:
            chans = sorted(win["channel"].unique().to_list(), key=lambda c: (c != R.TOTAL, c))
            enc["strokeDash"] = alt.StrokeDash("channel:N", title="channel", sort=chans)
        layers.append(
            alt.Chart(win.select("t_ms", "power_w", "channel"))
            .mark_line(
                color="#222222",
                size=1.3,
                point=alt.OverlayMarkDef(color="#222222", size=14),
                clip=True,
            )
            .encode(**enc)
        )
        if note:
            layers.append(
                alt.Chart(pl.DataFrame({"n": [0]}))
                .mark_text(
                    text=note,
                    align="left",
                    baseline="top",
                    dx=6,
                    dy=6,
                    color="#b00000",
                    fontSize=11,
                )
                .encode(x=alt.value(0), y=alt.value(0))
            )
        return alt.layer(*layers).properties(width=640, height=150, title=title)

    note = None
    if naive.filter((pl.col("x1") >= lo) & (pl.col("x0") <= hi)).height == 0:
        shift = float(naive["x0"].min()) - float(sync["x0"].min())  # type: ignore[arg-type]
        note = f"the executions lie {_duration(abs(shift))} {'later' if shift > 0 else 'earlier'}: outside this window"
    off_us = us(clock.offset_ns)
    chart = alt.vconcat(
        panel(naive, "without clock sync: GPU stamps read as host time", note),
        panel(sync, f"with clock sync: offset {off_us:,.1f} µs, drift {clock.drift_ppm:+.2f} ppm", None),
        title=_title(
            f"{scn.name}: one run (run {run}) over time",
            "black: power samples as logged (sample time = host clock); bars: executions by role",
        ),
    ).resolve_scale(color="shared")
    return configure(chart)


# --------------------------------------------------------------------------- 2b. timeline: binning
def _histogram(values_us: np.ndarray, golden: np.ndarray, bins: int = 40) -> pl.DataFrame:
    """Golden / not golden runs per execution-time bin (x0, x1 in µs), stacked (y0, y1 in runs)."""
    lo, hi = float(values_us.min()), float(values_us.max())
    if hi <= lo:
        hi = lo + max(abs(lo) * 1e-3, 1e-3)
    edges = np.linspace(lo, hi, bins + 1)
    rows = []
    below = np.zeros(bins)
    for kind, mask in (("golden", golden), ("not golden", ~golden)):
        counts, _ = np.histogram(values_us[mask], bins=edges)
        rows += [
            {
                "x0": float(edges[i]),
                "x1": float(edges[i + 1]),
                "y0": float(below[i]),
                "y1": float(below[i] + c),
                "kind": kind,
            }
            for i, c in enumerate(counts)
            if c
        ]
        below += counts
    schema = {"x0": pl.Float64, "x1": pl.Float64, "y0": pl.Float64, "y1": pl.Float64, "kind": pl.String}
    return pl.DataFrame(rows, schema=schema)


def binning_chart(
    scn: ScenarioData,
    lois_all: pl.DataFrame | None,
    binned: pl.DataFrame | None,
    binning: BinningSummary | None,
    max_points: int = 5000,
) -> Chart | None:
    """Paper Fig. 5(b): SSP execution times of the SSP runs with their golden bin, and the SSP LOIs of
    all SSP runs vs the golden ones only (TOI in absolute µs, so that execution-time spread shows). SSE
    runs are binned on their own (bin_exec_time_ns, metadata "bins"["sse"]); only their counts are
    quoted here."""
    panels: list[Any] = []
    ssp_bin = (binning.bins.get(R.SSP) or binning) if binning is not None else None
    sse_bin = binning.bins.get(R.SSE) if binning is not None else None
    sse_note = ""
    if sse_bin is not None and sse_bin.runs_total:
        sse_note = f"; SSE runs binned separately: {sse_bin.runs_golden} of {sse_bin.runs_total} golden"
    if binned is not None and binned.height and "ssp_exec_time_ns" in binned.columns:
        b = binned
        if "phase" in b.columns:
            b = b.filter(pl.col("phase") == R.SSP)
        b = b.filter(pl.col("ssp_exec_time_ns").is_not_null())
        hist_df = _histogram(
            (b["ssp_exec_time_ns"].cast(pl.Float64) / NS_PER_US).to_numpy(), b["golden"].fill_null(False).to_numpy()
        )
        kind_color = alt.Color(
            "kind:N", title="runs", scale=alt.Scale(domain=["golden", "not golden"], range=["#1f77b4", "#c7c7c7"])
        )
        hist = (
            alt.Chart(hist_df)
            .mark_bar(binSpacing=0)
            .encode(
                x=alt.X(
                    "x0:Q",
                    title="SSP execution time (µs)",
                    scale=alt.Scale(zero=False),
                    axis=alt.Axis(tickCount=5, labelOverlap="greedy"),
                ),
                x2="x1:Q",
                y=alt.Y("y0:Q", title="runs"),
                y2="y1:Q",
                color=kind_color,
            )
        )
        layers = [hist]
        edges = [ssp_bin.bin_low_ns, ssp_bin.bin_high_ns] if ssp_bin is not None else []
        edges_df = pl.DataFrame({"edge_us": [float(us(e)) for e in edges if is_finite(e)]})
        if edges_df.height:
            layers.append(alt.Chart(edges_df).mark_rule(color="#d62728", strokeDash=[4, 2]).encode(x="edge_us:Q"))
        margin = binning.margin if binning is not None else None
        sub = f"golden bin (red): margin {float(margin) * 100:.3g} %" if is_finite(margin) else "golden bin"
        panels.append(
            alt.layer(*layers).properties(width=230, height=190, title=_title("execution-time binning (SSP runs)", sub))
        )
    if lois_all is not None and lois_all.height:
        ssp = lois_all.filter((pl.col("role") == R.SSP) & (pl.col("channel") == R.TOTAL))
        ssp = ssp.with_columns(
            (pl.col("toi_ns") / NS_PER_US).alias("toi_us"),
            (pl.col("power_mw") / MW_PER_W).alias("power_w"),
            pl.when(pl.col("golden")).then(pl.lit("golden")).otherwise(pl.lit("not golden")).alias("kind"),
        ).select("toi_us", "power_w", "kind")
        if ssp.height:
            half = max_points // 2
            all_runs = subsample(ssp, half, by=("kind",)).sort("kind", descending=True)
            golden = subsample(ssp.filter(pl.col("kind") == "golden"), half, by=("kind",))
            kind_color = alt.Color(
                "kind:N", title="runs", scale=alt.Scale(domain=["golden", "not golden"], range=["#1f77b4", "#ff7f0e"])
            )
            x = alt.X("toi_us:Q", title="TOI (µs into the SSP execution)")
            y = alt.Y("power_w:Q", title="power (W)", scale=alt.Scale(zero=False))
            a = (
                alt.Chart(all_runs)
                .mark_circle(size=9, opacity=0.45)
                .encode(x=x, y=y, color=kind_color)
                .properties(
                    width=260, height=190, title=_title("without binning: all runs", f"{ssp.height} SSP LOIs (total)")
                )
            )
            g = (
                alt.Chart(golden)
                .mark_circle(size=9, opacity=0.45)
                .encode(x=x, y=y, color=kind_color)
                .properties(
                    width=260,
                    height=190,
                    title=_title("with binning: golden runs only", f"{int((ssp['kind'] == 'golden').sum())} SSP LOIs"),
                )
            )
            panels.append(alt.hconcat(a, g).resolve_scale(y="shared", x="shared"))
    if not panels:
        return None
    chart = alt.hconcat(
        *panels, title=_title(f"{scn.name}: binning by SSP execution time", f"SSP runs{sse_note}")
    ).resolve_scale(color="independent")
    return configure(chart)


# --------------------------------------------------------------------------- 3. components
def components_data(scns: Sequence[ScenarioData]) -> pl.DataFrame:
    """The method SSP (W, the short stamped runs after idle) and CI per scenario and channel, from the result
    (`ScenarioResult.ssp`: total and per channel): one quantity in every bar, whatever the headline is."""
    rows = []
    for s in scns:
        ssp = s.result.ssp
        for ch, e in [("total", ssp.power), *ssp.channels.items()]:
            if e.has_value:
                rows.append({"scenario": s.name, "channel": ch, "power_w": e.value, "lo_w": e.ci_low,
                             "hi_w": e.ci_high, "valid": s.valid})  # fmt: skip
    schema = {
        "scenario": pl.String,
        "channel": pl.String,
        "power_w": pl.Float64,
        "lo_w": pl.Float64,
        "hi_w": pl.Float64,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def _scenario_x(order: Sequence[str], title: str = "scenario", field: str = "scenario") -> alt.X:
    """A nominal x axis of scenarios in sweep order, with slanted labels."""
    return alt.X(f"{field}:N", sort=list(order), title=title, axis=alt.Axis(labelAngle=-30, labelLimit=220))


def components_chart(scns: Sequence[ScenarioData]) -> Chart | None:
    """Paper Fig. 7: the method SSP per channel per scenario (grouped bars, CI error bars)."""
    df = components_data(scns)
    if df.height == 0:
        return None
    chans = list(dict.fromkeys(["total", *df["channel"].to_list()]))
    chans = [c for c in chans if c in set(df["channel"].to_list())]
    order = [s.name for s in scns]
    base = alt.Chart(df).encode(
        x=_scenario_x(order),
        xOffset=alt.XOffset("channel:N", sort=chans),
    )
    color = alt.Color("channel:N", sort=chans, title="channel")
    bars = base.mark_bar().encode(
        y=alt.Y("power_w:Q", title="method SSP (W)"),
        color=color,
        opacity=alt.condition("datum.valid", alt.value(1.0), alt.value(0.35)),
    )
    err = (
        base.transform_filter("isValid(datum.lo_w) && isValid(datum.hi_w)")
        .mark_rule(color="black", size=1.3)
        .encode(y="lo_w:Q", y2="hi_w:Q")
    )
    width = max(360, 28 * len(chans) * len(order))
    sub = "grouped by channel; black: CI; faded: invalid scenario"
    if len(chans) > 1:
        sub = "total and component channels side by side (components need not add up to total); " + sub
    chart = alt.layer(bars, err).properties(
        width=min(width, 900), height=260, title=_title("method SSP per channel across scenarios", sub)
    )
    return configure(chart)


# --------------------------------------------------------------------------- 4. interleaved vs the SSP
INTERLEAVED_SSP = "method SSP (same runs)"


def interleaved_data(scns: Sequence[ScenarioData]) -> pl.DataFrame:
    """For scenarios with a predecessor: the interleaved (first) execution's reading and the method SSP of the same
    runs, with CIs, labelled with the result's `interleaved_reading_vs_ssp_pct` (the number the tables show)."""
    rows = []
    for s in scns:
        r = s.result
        inter, ssp, pct = r.interleaved.reading, r.ssp.power, r.interleaved.reading_vs_ssp
        if not s.has_predecessor or not inter.has_value:
            continue
        common = {"scenario": s.name, "reference": "method SSP of the same runs", "xlabel": s.name,
                  "predecessor": str(r.labels.predecessor or "")}  # fmt: skip
        label = f"{pct.value:+.1f} %" if pct.has_value else ""
        rows.append({**common, "measure": "interleaved (1st after predecessor)", "power_w": inter.value,
                     "lo_w": inter.ci_low, "hi_w": inter.ci_high, "label": label})  # fmt: skip
        if ssp.has_value:
            rows.append({**common, "measure": INTERLEAVED_SSP, "power_w": ssp.value, "lo_w": ssp.ci_low,
                         "hi_w": ssp.ci_high, "label": ""})  # fmt: skip
    schema = {
        "scenario": pl.String,
        "measure": pl.String,
        "power_w": pl.Float64,
        "lo_w": pl.Float64,
        "hi_w": pl.Float64,
        "label": pl.String,
        "reference": pl.String,
        "xlabel": pl.String,
        "predecessor": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def interleaved_chart(scns: Sequence[ScenarioData]) -> Chart | None:
    """Paper Fig. 9: the interleaved reading vs the method SSP of the same runs, with CIs and the result's
    difference (`interleaved_reading_vs_ssp_pct`)."""
    df = interleaved_data(scns)
    if df.height == 0:
        return None
    measures = ["interleaved (1st after predecessor)", INTERLEAVED_SSP]
    order = list(dict.fromkeys(df["xlabel"].to_list()))
    base = alt.Chart(df).encode(
        x=_scenario_x(order, "scenario", "xlabel"),
        xOffset=alt.XOffset("measure:N", sort=measures),
    )
    color = alt.Color(
        "measure:N", sort=measures, title="", scale=alt.Scale(domain=measures, range=["#2ca02c", "#1f77b4"])
    )
    bars = base.mark_bar().encode(y=alt.Y("power_w:Q", title="power (W)"), color=color)
    err = (
        base.transform_filter("isValid(datum.lo_w) && isValid(datum.hi_w)")
        .mark_rule(color="black")
        .encode(y="lo_w:Q", y2="hi_w:Q")
    )
    text = base.mark_text(dy=-8, fontSize=10).encode(y="power_w:Q", text="label:N")
    width = max(300, 70 * len(order))
    chart = alt.layer(bars, err, text).properties(
        width=min(width, 900),
        height=250,
        title=_title(
            "interleaved reading vs the method SSP",
            "green: the sensor's reading of the kernel's first execution right after its predecessor; blue: the "
            "method SSP of the same runs; label: interleaved_reading_vs_ssp_pct",
        ),
    )
    return configure(chart)


# --------------------------------------------------------------------------- 5. SSE vs SSP error
_norm = norm_name  # a name for loose matching with the paper's names


NOT_MEASURABLE = "not measurable"
PAPER_SOURCE = "paper (MI300X)"


def _paper_rows(paper: Mapping[str, Any] | None, by_norm: Mapping[str, str]) -> list[dict[str, Any]]:
    """The paper's SSE-vs-SSP errors as rows of `sse_error_data` (matched to a scenario by `by_norm`, the
    normalized name; unmatched: their own category)."""
    rows = []
    for key, val in (paper or {}).items():
        v = val.get("pct") if isinstance(val, Mapping) else val
        if not is_finite(v):
            continue
        group = by_norm.get(_norm(str(key)), f"{key} (paper)")
        rows.append(
            {
                "group": group,
                "source": PAPER_SOURCE,
                "pct": abs(float(v)),
                "signed": -abs(float(v)),  # the paper's SSE under-reads the SSP by this much
                "ci_low": None,
                "ci_high": None,
                "label": f"{-abs(float(v)):+.0f}",
                "valid": True,
            }
        )
    return rows


def sse_error_data(scns: Sequence[ScenarioData], paper: Mapping[str, Any] | None, source_label: str) -> pl.DataFrame:
    """The signed SSE-vs-SSP reading error per scenario with its CI (pct: its magnitude), plus the paper's values
    (matched to a scenario by name, ignoring
    case and punctuation; unmatched ones become their own category). A scenario whose SSE has too few
    LOIs (flag too_few_lois_sse) or no value gets pct null and the label "not measurable"."""
    rows = []
    by_norm = {_norm(s.name): s.name for s in scns}
    for s in scns:
        e = s.result.sse.reading_vs_ssp
        v, lo, hi = e.value, e.ci_low, e.ci_high
        if s.sse_measurable and is_finite(v):
            rows.append(
                {
                    "group": s.name,
                    "source": source_label,
                    "pct": abs(float(v)),
                    "signed": float(v),
                    "ci_low": float(lo) if is_finite(lo) else None,
                    "ci_high": float(hi) if is_finite(hi) else None,
                    "label": f"{float(v):+.0f}",
                    "valid": s.valid,
                }
            )
        elif not s.sse_measurable or s.result.ssp.power.has_value:
            flag = " (too_few_lois_sse)" if "too_few_lois_sse" in s.flags else ""
            rows.append(
                {
                    "group": s.name,
                    "source": source_label,
                    "pct": None,
                    "signed": None,
                    "ci_low": None,
                    "ci_high": None,
                    "label": NOT_MEASURABLE + flag,
                    "valid": s.valid,
                }
            )
    rows += _paper_rows(paper, by_norm)
    schema = {
        "group": pl.String,
        "source": pl.String,
        "pct": pl.Float64,
        "signed": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "label": pl.String,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def sse_error_chart(scns: Sequence[ScenarioData], paper: Mapping[str, Any] | None, source_label: str) -> Chart | None:
    """SSE-vs-SSP error per scenario, next to the paper's MI300X values when given; "not measurable" (no
    bar) where the SSE has too few LOIs."""
    df = sse_error_data(scns, paper, source_label)
    if df.filter(pl.col("source") == source_label).height == 0:
        return None
    sources = [source_label, PAPER_SOURCE]
    order = list(dict.fromkeys(df["group"].to_list()))
    paired = df.group_by("group").agg(pl.col("source").n_unique().alias("n"))["n"].max() or 0
    enc: dict[str, Any] = {
        "x": alt.X("group:N", sort=order, title="scenario", axis=alt.Axis(labelAngle=-30, labelLimit=220))
    }
    if paired > 1:
        enc["xOffset"] = alt.XOffset("source:N", sort=sources)
    measured = df.filter(pl.col("pct").is_not_null())
    missing = df.filter(pl.col("pct").is_null()).with_columns(pl.lit(0.0).alias("y0"))
    color = alt.Color("source:N", title="", scale=alt.Scale(domain=sources, range=["#d62728", "#7f7f7f"]))
    layers: list[alt.Chart] = []
    if measured.height:
        base = alt.Chart(measured).encode(**enc)
        layers.append(
            base.mark_bar().encode(
                y=alt.Y("signed:Q", title="(SSE reading − SSP) / SSP (%)"),
                color=color,
                opacity=alt.condition("datum.valid", alt.value(1.0), alt.value(0.35)),
            )
        )
        layers.append(
            base.transform_filter("isValid(datum.ci_low) && isValid(datum.ci_high)")
            .mark_rule(color="black")
            .encode(y="ci_low:Q", y2="ci_high:Q")
        )
        layers.append(base.mark_text(dy=-7, fontSize=10).encode(y=alt.Y("signed:Q", title=""), text="label:N"))
        layers.append(alt.Chart(pl.DataFrame({"z": [0.0]})).mark_rule(color="#555555").encode(y="z:Q"))
    if missing.height:
        layers.append(
            alt.Chart(missing)
            .mark_text(
                angle=270,
                align="left",
                baseline="middle",
                dx=4,
                fontSize=10,
                color="#b00000",
            )
            .encode(**enc, y=alt.Y("y0:Q", title="(SSE reading − SSP) / SSP (%)"), text="label:N")
        )
    width = max(300, 55 * len(order))
    sub = (
        "signed: how far the sensor's reading during the SSE is from the SSP, with its CI; the paper's MI300X values "
        "(an under-read) beside; faded: invalid"
    )
    if missing.height:
        sub += "; not measurable: too few SSE LOIs"
    chart = alt.layer(*layers).properties(
        width=min(width, 900),
        height=240,
        title=_title(
            "error of reading the SSE execution instead of the SSP",
            sub,
        ),
    )
    return configure(chart)


# --------------------------------------------------------------------------- 5b. SSP vs reference run
REF_MEASURES: tuple[str, ...] = ("method SSP (FinGraV)", "reference run (settled)", "SSE (naive)")
REF_COLORS: tuple[str, ...] = ("#1f77b4", "#9467bd", "#d62728")


def has_reference(scns: Sequence[ScenarioData]) -> bool:
    """Whether any scenario has a reference-run power."""
    return any(s.has_reference for s in scns)


def reference_data(scns: Sequence[ScenarioData]) -> pl.DataFrame:
    """Per scenario with a reference run: SSP, reference and (when measurable) SSE power with CIs (W);
    label = SSP vs reference (%) on the reference row."""
    rows = []
    for s in scns:
        if not s.has_reference:
            continue
        r = s.result
        pct = r.sustained.ssp_vs_reference.value
        entries = [
            (REF_MEASURES[0], r.ssp.power, ""),
            (REF_MEASURES[1], r.sustained.reference_power, f"SSP {pct:+.1f} %" if pct is not None else ""),
        ]
        if s.sse_measurable:
            entries.append((REF_MEASURES[2], r.sse.reading, ""))
        for measure, est, label in entries:
            v, lo, hi = est.value, est.ci_low, est.ci_high
            if not is_finite(v):
                continue
            rows.append(
                {
                    "scenario": s.name,
                    "measure": measure,
                    "power_w": float(v),
                    "lo_w": float(lo) if is_finite(lo) else None,
                    "hi_w": float(hi) if is_finite(hi) else None,
                    "label": label,
                    "valid": s.valid,
                }
            )
    schema = {
        "scenario": pl.String,
        "measure": pl.String,
        "power_w": pl.Float64,
        "lo_w": pl.Float64,
        "hi_w": pl.Float64,
        "label": pl.String,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def reference_chart(scns: Sequence[ScenarioData]) -> Chart | None:
    """The method SSP with CI, the reference run's settled power with its batch-means CI and the naive SSE
    power with CI, per scenario with a reference run."""
    df = reference_data(scns)
    if df.height == 0:
        return None
    order = list(dict.fromkeys(df["scenario"].to_list()))
    measures = [m for m in REF_MEASURES if m in set(df["measure"].to_list())]
    color = alt.Color(
        "measure:N", title="", sort=measures, scale=alt.Scale(domain=list(REF_MEASURES), range=list(REF_COLORS))
    )
    base = alt.Chart(df).encode(x=_scenario_x(order), xOffset=alt.XOffset("measure:N", sort=list(REF_MEASURES)))
    y = alt.Y("power_w:Q", title="power (W)", scale=alt.Scale(zero=False))
    err = (
        base.transform_filter("isValid(datum.lo_w) && isValid(datum.hi_w)")
        .mark_rule(size=2)
        .encode(
            y=alt.Y("lo_w:Q", title="power (W)"),
            y2="hi_w:Q",
            color=color,
        )
    )
    pts = base.mark_point(filled=True, size=70).encode(
        y=y,
        color=color,
        opacity=alt.condition("datum.valid", alt.value(1.0), alt.value(0.4)),
    )
    text = (
        base.transform_filter("datum.label != ''")
        .mark_text(dx=8, align="left", fontSize=10)
        .encode(
            y="power_w:Q",
            text="label:N",
        )
    )
    width = max(300, 90 * len(order))
    chart = alt.layer(err, pts, text).properties(
        width=min(width, 900),
        height=260,
        title=_title(
            "method SSP vs the reference run",
            "points: mean; bars: CI (SSP and SSE: bootstrap over runs; reference: batch means); "
            "label: SSP vs reference",
        ),
    )
    return configure(chart)


# --------------------------------------------------------------------------- 6. truth (simulator)
Pick = Callable[[ScenarioResult], Estimate]


@dataclass(frozen=True)
class TruthQuantity:
    """One row of the validation figure and table: a measured number of the result, its truth and the result's
    measured-vs-truth difference (%, with its CI: `fingrav.contracts.result.Truth`), each read from the typed
    groups."""

    label: str
    measured: Pick
    truth: Pick
    vs_truth: Pick


def _truth(result: ScenarioResult) -> Truth:
    return result.truth if result.truth is not None else Truth()


TRUTH_QUANTITIES: tuple[TruthQuantity, ...] = (
    TruthQuantity("power (W)", lambda r: r.headline.power, lambda r: _truth(r).power,
                  lambda r: _truth(r).power_vs_truth),
    TruthQuantity("method SSP (W)", lambda r: r.ssp.power, lambda r: _truth(r).ssp_power,
                  lambda r: _truth(r).ssp_vs_truth),
    TruthQuantity("SSE reading (W)", lambda r: r.sse.reading, lambda r: _truth(r).sse_reading,
                  lambda r: _truth(r).sse_reading_vs_truth),
    TruthQuantity("SSE kernel power (W)", lambda r: r.sse.kernel_power, lambda r: _truth(r).sse_kernel_power,
                  lambda r: _truth(r).sse_kernel_power_vs_truth),
    TruthQuantity("interleaved reading (W)", lambda r: r.interleaved.reading,
                  lambda r: _truth(r).interleaved_reading, lambda r: _truth(r).interleaved_reading_vs_truth),
    TruthQuantity("interleaved kernel power (W)", lambda r: r.interleaved.kernel_power,
                  lambda r: _truth(r).interleaved_kernel_power,
                  lambda r: _truth(r).interleaved_kernel_power_vs_truth),
    TruthQuantity("energy per execution (mJ)", lambda r: r.headline.energy_per_exec,
                  lambda r: _truth(r).energy_per_exec, lambda r: _truth(r).energy_per_exec_vs_truth),
    TruthQuantity("reference power vs power truth (W)", lambda r: r.sustained.reference_power,
                  lambda r: _truth(r).power, lambda r: _truth(r).reference_vs_truth),
)  # fmt: skip
TRUTH_TOLERANCE_PCT = 2.0


def has_truth(scns: Sequence[ScenarioData]) -> bool:
    """Whether any summary row carries simulator ground truth."""
    return any(_truth(s.result).power.has_value for s in scns)


def validation_data(scns: Sequence[ScenarioData]) -> pl.DataFrame:
    """Measured vs truth per scenario and quantity: value, CI, truth, error % (of truth) and its CI,
    whether the CI covers the truth and whether the error is within ±2 %. The SSE of a scenario whose
    SSE is not measurable (too few LOIs) is left out."""
    rows = []
    for s in scns:
        for q in TRUTH_QUANTITIES:
            if q.label.startswith("SSE ") and not s.sse_measurable:
                continue
            m, tv, err = q.measured(s.result), q.truth(s.result).value, q.vs_truth(s.result)
            lov, hiv = m.ci_low, m.ci_high
            if m.value is None or not tv or err.value is None:
                continue
            rows.append(
                {
                    "scenario": s.name,
                    "quantity": q.label,
                    "measured": m.value,
                    "ci_low": lov,
                    "ci_high": hiv,
                    "truth": tv,
                    "error_pct": err.value,
                    "err_lo": err.ci_low,
                    "err_hi": err.ci_high,
                    "covered": bool(lov <= tv <= hiv) if lov is not None and hiv is not None else None,
                    "within_tol": abs(err.value) <= TRUTH_TOLERANCE_PCT,
                    "valid": s.valid,
                }
            )
    schema = {
        "scenario": pl.String,
        "quantity": pl.String,
        "measured": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
        "truth": pl.Float64,
        "error_pct": pl.Float64,
        "err_lo": pl.Float64,
        "err_hi": pl.Float64,
        "covered": pl.Boolean,
        "within_tol": pl.Boolean,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


KERNEL_POWER_QUANTITIES = (
    "power (W)",
    "method SSP (W)",
    "energy per execution (mJ)",
    "reference power vs power truth (W)",
)
TRUTH_AXIS_PCT = 2.5  # the validation axis: ±2 % band with a little room; points beyond sit at its edge


def truth_chart(val: pl.DataFrame, order: Sequence[str]) -> Chart | None:
    """Measured vs simulator truth for the kernel-power numbers (SSP, energy, reference): error (% of truth)
    with CI per scenario and quantity, ±2 % band, on a ±2.5 % axis (values beyond are drawn at its edge, as
    crosses). Sensor readings (SSE, interleaved) have their own panel (`readings_chart`)."""
    val = val.filter(pl.col("quantity").is_in(list(KERNEL_POWER_QUANTITIES)))
    if val.height == 0:
        return None
    lim = TRUTH_AXIS_PCT
    val = val.with_columns(
        pl.col("error_pct").clip(-lim, lim), pl.col("err_lo").clip(-lim, lim), pl.col("err_hi").clip(-lim, lim)
    )
    quantities = [q.label for q in TRUTH_QUANTITIES if q.label in set(val["quantity"].to_list())]
    order = [o for o in order if o in set(val["scenario"].to_list())]
    tol = TRUTH_TOLERANCE_PCT
    band = (
        alt.Chart(pl.DataFrame({"lo": [-tol], "hi": [tol]}))
        .mark_rect(color="#2ca02c", opacity=0.12)
        .encode(
            y=alt.Y("lo:Q", title="measured − truth (% of truth)", scale=alt.Scale(domain=[-lim, lim], nice=False)),
            y2="hi:Q",
        )
    )
    zero = alt.Chart(pl.DataFrame({"z": [0.0]})).mark_rule(color="#555555").encode(y="z:Q")
    base = alt.Chart(val).encode(x=_scenario_x(order), xOffset=alt.XOffset("quantity:N", sort=quantities))
    color = alt.Color("quantity:N", sort=quantities, title="quantity")
    err = (
        base.transform_filter("isValid(datum.err_lo) && isValid(datum.err_hi)")
        .mark_rule(size=1.5)
        .encode(y="err_lo:Q", y2="err_hi:Q", color=color)
    )
    pts = (
        base.mark_point(filled=True, size=45)
        .encode(
            y="error_pct:Q",
            color=color,
            shape=alt.Shape(
                "within:N", title="within ±2 %", scale=alt.Scale(domain=["yes", "no"], range=["circle", "cross"])
            ),
        )
        .transform_calculate(within="datum.within_tol ? 'yes' : 'no'")
    )
    width = max(320, 22 * len(quantities) * len(order))
    chart = alt.layer(band, zero, err, pts).properties(
        width=min(width, 900),
        height=240,
        title=_title(
            "validation against the simulator's ground truth",
            "SSP, energy, reference: measured − truth with CI; green band: ±2 %; crosses: outside ±2 % (at the edge)",
        ),
    )
    return configure(chart)


READING_MEASURES = (
    "SSP (kernel power)",
    "SSE (sensor reading)",
    "SSE (kernel power)",
    "SSE true power",
    "interleaved (sensor reading)",
    "interleaved (kernel power)",
    "interleaved true power",
)
READING_ITEMS: tuple[tuple[str, Pick, bool], ...] = (
    # label, the number, whether it has a CI
    ("SSP (kernel power)", lambda r: r.ssp.power, True),
    ("SSE (sensor reading)", lambda r: r.sse.reading, True),
    ("SSE (kernel power)", lambda r: r.sse.kernel_power, True),
    ("SSE true power", lambda r: _truth(r).sse_kernel_power, False),
    ("interleaved (sensor reading)", lambda r: r.interleaved.reading, True),
    ("interleaved (kernel power)", lambda r: r.interleaved.kernel_power, True),
    ("interleaved true power", lambda r: _truth(r).interleaved_kernel_power, False),
)


def readings_data(scns: Sequence[ScenarioData]) -> pl.DataFrame:
    """Per scenario: the SSP (kernel power), the SSE and interleaved sensor readings and kernel powers (where
    the sensor resolves the execution) with CIs, and on the simulator those executions' true power (W)."""
    rows = []
    for s in scns:
        for label, pick, with_ci in READING_ITEMS:
            if label.startswith("SSE (") and not s.sse_measurable:
                continue
            e = pick(s.result)
            v, lo, hi = (e.value, e.ci_low, e.ci_high) if with_ci else (e.value, None, None)
            if not is_finite(v):
                continue
            rows.append(
                {
                    "scenario": s.name,
                    "measure": label,
                    "power_w": float(v),
                    "ci_low": float(lo) if is_finite(lo) else None,
                    "ci_high": float(hi) if is_finite(hi) else None,
                }
            )
    schema = {
        "scenario": pl.String,
        "measure": pl.String,
        "power_w": pl.Float64,
        "ci_low": pl.Float64,
        "ci_high": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def readings_chart(data: pl.DataFrame, order: Sequence[str]) -> Chart | None:
    """Sensor readings next to kernel power, per scenario (W, with CIs)."""
    if data.height == 0 or not data.filter(pl.col("measure") != "SSP (kernel power)").height:
        return None
    order = [o for o in order if o in set(data["scenario"].to_list())]
    measures = [m for m in READING_MEASURES if m in set(data["measure"].to_list())]
    colors = {
        "SSP (kernel power)": "#1f77b4",
        "SSE (sensor reading)": "#d62728",
        "SSE (kernel power)": "#9467bd",
        "SSE true power": "#7f7f7f",
        "interleaved (sensor reading)": "#ff7f0e",
        "interleaved (kernel power)": "#8c564b",
        "interleaved true power": "#bcbd22",
    }
    base = alt.Chart(data).encode(x=_scenario_x(order), xOffset=alt.XOffset("measure:N", sort=measures))
    color = alt.Color(
        "measure:N", sort=measures, title="", scale=alt.Scale(domain=measures, range=[colors[m] for m in measures])
    )
    err = (
        base.transform_filter("isValid(datum.ci_low) && isValid(datum.ci_high)")
        .mark_rule(size=1.5)
        .encode(y="ci_low:Q", y2="ci_high:Q", color=color)
    )
    pts = base.mark_point(filled=True, size=45).encode(
        y=alt.Y("power_w:Q", title="power (W)", scale=alt.Scale(zero=False)), color=color
    )
    chart = alt.layer(err, pts).properties(
        width=min(max(320, 18 * len(measures) * len(order)), 900),
        height=240,
        title=_title(
            "sensor readings next to kernel power",
            "a reading is what the sensor reported during the execution (naive profiling); kernel power is what the "
            "execution drew (through the sensor model; absent where the sensor cannot resolve it)",
        ),
    )
    return configure(chart)
