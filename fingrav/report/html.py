"""The self-contained index.html: inline CSS, figures as base64 PNG data URIs, no scripts, no external
resources, so that it opens offline and can be mailed as one file."""

from __future__ import annotations

import base64
import datetime as _dt
import html
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl

from fingrav.contracts import flags as FL
from fingrav.contracts.calibration import CALIBRATION_FLAGS, Calibration, calibration_flag_meaning
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.paper import SSE_VS_SSP_PCT, paper_sse_vs_ssp_pct
from fingrav.contracts.result import NONE, Counts, Estimate, LimitCycle, ScenarioResult, is_finite
from fingrav.contracts.summary import split_flags
from fingrav.contracts.units import MW_PER_W, ms, us
from fingrav.report.lazy import LAZY_CSS, filter_box, scripts
from fingrav.report.load import ScenarioData, sensor_ns

logger = logging.getLogger(__name__)

NOT_MEASURABLE_HTML = '<span class="nm" title="too few SSE LOIs (too_few_lois_sse)">not measurable</span>'


CSS = """
*{box-sizing:border-box}
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 color:#1d1d1f;margin:0;background:#fafafa;line-height:1.45;font-size:15px}
main{max-width:1240px;margin:0 auto;padding:24px 28px 60px;background:#fff;min-height:100vh}
h1{font-size:26px;margin:0 0 4px}
h2{font-size:20px;margin:36px 0 10px;padding-bottom:4px;border-bottom:2px solid #e6e6e6}
h3{font-size:16px;margin:22px 0 8px}
.sub{color:#666;margin:0 0 18px}
nav{font-size:14px;margin:8px 0 18px;color:#555}
nav a{color:#1f5fa8;text-decoration:none;margin-right:14px;white-space:nowrap;display:inline-block}
table{border-collapse:collapse;font-size:13px;margin:6px 0 12px}
th,td{padding:5px 8px;border-bottom:1px solid #e8e8e8;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600;white-space:nowrap}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.ci{color:#777;font-size:11.5px;display:block}
.cii{color:#777;font-size:11.5px;margin-left:5px;white-space:nowrap}
.kern{color:#777;font-size:11px;font-weight:normal}
.paper{color:#8a8a8a;font-size:11.5px;display:block;white-space:nowrap}
td.name,table.all td:nth-child(2){white-space:nowrap}
table.headline td,table.core td{vertical-align:baseline}
table.core th,table.reference th,table.sensor th{white-space:normal;vertical-align:bottom;max-width:150px}
table.kv th{background:none;color:#555;font-weight:500;text-align:right}
.wide{overflow-x:auto;max-width:100%}
tr.invalid td{background:#fdecea}
tr.invalid td:first-child{border-left:4px solid #c62828}
.ok{color:#2e7d32;font-weight:600}
.bad{color:#c62828;font-weight:700}
.flag{display:inline-block;border-radius:10px;padding:0 7px;margin:1px 2px;font-size:11.5px;white-space:nowrap;
 background:#fff4e0;color:#8a5300;border:1px solid #f0d3a0}
.flag.inv{background:#fdecea;color:#b71c1c;border-color:#f2b8b5}
.nm{color:#8a5300;font-style:italic;white-space:nowrap}
figure{margin:18px 0 28px;padding:12px;border:1px solid #e6e6e6;border-radius:6px;background:#fff}
figure img{max-width:100%;height:auto;display:block}
figcaption{font-size:13.5px;color:#333;margin-top:8px}
figcaption b{color:#111}
.note{background:#f4f8fd;border-left:4px solid #1f5fa8;padding:10px 14px;font-size:14px}
.warn{background:#fff8e6;border-left:4px solid #e0a800;padding:8px 14px;font-size:14px}
code{background:#f1f1f1;padding:0 4px;border-radius:3px;font-size:12.5px}
footer{color:#777;font-size:12.5px;margin-top:40px}
details>summary{cursor:pointer;font-weight:600;margin:8px 0;color:#1f5fa8}
"""


@dataclass
class FigureOut:
    """A rendered (or failed) figure: its PNG and what the HTML says about it."""

    key: str
    section: str
    title: str
    caption: str
    png: bytes | None = None
    filename: str | None = None
    error: str | None = None
    spec: str | None = None  # drawn by the browser when opened: the packed Vega-Lite spec (`fingrav.report.lazy`)

    @property
    def drawn(self) -> bool:
        """Whether the page has the figure (a PNG, or a spec the browser draws)."""
        return self.png is not None or self.spec is not None


def ci3(e: Estimate) -> tuple[float | None, float | None, float | None]:
    """(value, CI low, CI high) of one of the result's Estimates (`fingrav.contracts.result`), for a cell: the
    report reads the typed groups (`ScenarioData.result`), never a column by name."""
    return e.value, e.ci_low, e.ci_high


def esc(x: Any) -> str:
    """HTML-escaped text (None -> "")."""
    return html.escape("" if x is None else str(x))


def fmt(v: Any, digits: int | None = None) -> str:
    """A number for a table: fixed decimals when `digits` is given, else ~4 significant digits."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if not is_finite(v):
        return esc(v)
    if isinstance(v, int) and digits is None:
        return f"{v:,}"
    v = float(v)
    if digits is not None:
        return f"{v:,.{digits}f}"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.1f}"
    if a >= 10:
        return f"{v:.2f}"
    if a >= 0.01 or a == 0:
        return f"{v:.3f}"
    return f"{v:.3g}"


def _default_decimals(v: float) -> int | None:
    """The decimals `fmt` shows for v without `digits` (None: significant digits, for |v| < 0.01)."""
    a = abs(v)
    if a >= 1000:
        return 0
    if a >= 100:
        return 1
    if a >= 10:
        return 2
    return 3 if a >= 0.01 or a == 0 else None


def ci_digits(v: Any, lo: Any, hi: Any, digits: int | None = None) -> int | None:
    """The decimals to show a value and its CI with: `digits` (or fmt's default), plus up to 3 more where the CI's
    two ends would otherwise print alike (a CI of [29.89, 29.89] reads as no uncertainty at all)."""
    if not (is_finite(v) and is_finite(lo) and is_finite(hi)) or lo == hi or fmt(lo, digits) != fmt(hi, digits):
        return digits
    base = digits if digits is not None else _default_decimals(float(v))
    if base is None:
        return digits
    for d in range(base + 1, base + 4):
        if f"{float(lo):.{d}f}" != f"{float(hi):.{d}f}":
            return d
    return digits


def fmt_ci(v: Any, lo: Any, hi: Any, digits: int | None = None, inline: bool = False) -> str:
    """A value with its CI below it (inline: on the same line, smaller and grey: one line per table row), as HTML."""
    if v is None:
        return "–"
    digits = ci_digits(v, lo, hi, digits)
    out = fmt(v, digits)
    if is_finite(lo) and is_finite(hi):
        out += f'<span class="{"cii" if inline else "ci"}">[{fmt(lo, digits)}, {fmt(hi, digits)}]</span>'
    return out


def fmt_signed_ci(v: Any, lo: Any, hi: Any) -> str:
    """A signed percentage (one decimal, with its sign) with its CI below it, as HTML."""
    if not is_finite(v):
        return "–"
    out = f"{float(v):+.1f}"
    if is_finite(lo) and is_finite(hi):
        out += f'<span class="ci">[{float(lo):+.1f}, {float(hi):+.1f}]</span>'
    return out


def data_uri(png: bytes) -> str:
    """A PNG as a base64 data URI."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def ssp_validity(scn: ScenarioData) -> str:
    """A mark beside the method SSP when it is not valid on its own (`ssp_valid`), naming the flags why."""
    ssp = scn.result.ssp
    if ssp.valid or not ssp.power.has_value:
        return ""
    why = ", ".join(ssp.invalid_by) or "not valid"
    return f'<span class="nm" title="ssp_valid false: {esc(why)}"> not valid ({esc(why)})</span>'


def flags_cell(scn: ScenarioData) -> str:
    """A scenario's flags shown apart: the invalidating ones (red chips, they make the row invalid), then its notes
    (informational; `ScenarioResult.flags`)."""
    f = scn.result.flags
    out = flag_chips(f.invalidating)
    if f.notes:
        out += f'{"<br>" if out else ""}<span class="sub">notes:</span> {flag_chips(f.notes)}'
    return out


def flag_chips(flags: Iterable[str]) -> str:
    """Flags as coloured chips; invalidating flags in red, with their meaning on hover (`fingrav.contracts.flags`;
    a calibration flag, "<channel>:<flag>": `fingrav.contracts.calibration.CALIBRATION_FLAGS`)."""
    chips = []
    for name in flags:
        f = FL.BY_NAME.get(name)
        cls = "flag inv" if f is not None and f.invalidates else "flag"
        if f is not None:
            title = f"{f.meaning} (fires when {f.threshold})"
        elif name.rsplit(":", 1)[-1] in CALIBRATION_FLAGS:
            title = calibration_flag_meaning(name)
        else:
            title = "see docs/ARCHITECTURE.md"
        chips.append(f'<span class="{cls}" title="{esc(title)}">{esc(name)}</span>')
    return "".join(chips)


def _kv_table(pairs: Sequence[tuple[str, str]]) -> str:
    """A two-column key/value table (values are already HTML)."""
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in pairs)
    return f'<table class="kv">{rows}</table>'


LONG_CELL = 160  # characters: a longer provenance value is a folded list of its fields, not one wide cell


def _fields(obj: Any) -> str:
    """A provenance value as HTML: short ones as `key=value` text, a long mapping as a folded list of its fields."""
    text = _compact(obj)
    if len(text) <= LONG_CELL or not isinstance(obj, Mapping):
        return esc(text)
    items = "".join(
        f"<li><code>{esc(k)}</code>: {esc(_compact(v) if isinstance(v, Mapping | list) else v)}</li>"
        for k, v in obj.items()
    )
    return f"<details><summary>{len(obj)} fields</summary><ul>{items}</ul></details>"


SENSOR_LABELS = {"mw": "mW", "ms": "ms", "ns": "ns", "pct": "%", "w": "W"}


def sensor_label(key: str) -> str:
    """A calibration table's column label from its key: "settle_ms" -> "settle (ms)", "noise_mw" -> "noise (mW)"."""
    stem, _, unit = key.rpartition("_")
    if stem and unit in SENSOR_LABELS:
        return f"{stem.replace('_', ' ')} ({SENSOR_LABELS[unit]})"
    return key.replace("_", " ")


def _compact(obj: Any) -> str:
    """A dict/list as `key=value` text (escaped)."""
    if isinstance(obj, Mapping):
        return ", ".join(f"{k}={_compact(v) if isinstance(v, Mapping | list) else v}" for k, v in obj.items())
    if isinstance(obj, list):
        return ", ".join(str(x) for x in obj)
    return str(obj)


# --------------------------------------------------------------------------- sections
def find_device(
    sweep_meta: Mapping[str, Any], calibration: Calibration | None, scns: Sequence[ScenarioData] = ()
) -> Any:
    """The device description: the report's provenance, else calibration's, else a scenario's raw data's."""
    cal_device = calibration.provenance.device if calibration is not None else None
    candidates: list[Any] = [
        (sweep_meta.get("provenance") or {}).get("device"),
        cal_device.to_json() if cal_device is not None else None,
    ]
    for s in scns:
        prov = s.summary.provenance
        for dev in (prov.raw.device if prov.raw is not None else None, prov.device):
            candidates.append(dev.to_json() if dev is not None else None)
    return next((c for c in candidates if c), None)


def meta_section(
    sweep_meta: Mapping[str, Any], calibration: Calibration | None, scns: Sequence[ScenarioData] = ()
) -> str:
    """Sweep meta and provenance: git commit, versions, device, config hash."""
    prov = dict(sweep_meta.get("provenance") or {})
    device = find_device(sweep_meta, calibration, scns)
    pairs = [
        ("sweep", esc(sweep_meta.get("sweep"))),
        ("backend", esc(sweep_meta.get("backend"))),
        ("config hash", f"<code>{esc(sweep_meta.get('config_hash') or prov.get('config_hash'))}</code>"),
        ("git commit", f"<code>{esc(prov.get('git_commit', 'unknown'))}</code>"),
        ("fingrav", esc(prov.get("fingrav_version"))),
        ("python", esc(prov.get("python"))),
        ("host", esc(prov.get("host"))),
        ("created (UTC)", esc(prov.get("created_utc"))),
    ]
    if device:
        pairs.append(("device", _fields(device)))
    pkgs = prov.get("packages")
    if isinstance(pkgs, Mapping) and pkgs:
        pairs.append(("packages", esc(", ".join(f"{k} {v}" for k, v in pkgs.items()))))
    known = {"fingrav_version", "git_commit", "python", "packages", "host", "created_utc", "device", "config_hash"}
    for k, v in prov.items():
        if k not in known:
            pairs.append((k, _fields(v)))
    return '<h2 id="meta">Sweep and provenance</h2>' + _kv_table([(k, v) for k, v in pairs if v])


def _sensor_tables(calibration: Calibration) -> list[str]:
    """The calibration's sensor parameters per channel (ns, shown in ms): the main columns, then every other fitted
    field folded."""
    out: list[str] = []
    if not calibration.sensor:
        return out
    # the calibration's times are ns; shown in ms (the step response is a figure's, not the table's)
    sensor = {
        ch: _sensor_display(m.model_dump(mode="json", exclude_none=True, exclude={"response"}))
        for ch, m in calibration.sensor.items()
    }
    main_cols = ["period_ms", "delay_ms", "window_ms", "lag_ms", "settle_ms", "content_lead_ms", "noise_mw"]
    extra_cols: list[str] = []
    for params in sensor.values():
        if isinstance(params, Mapping):
            for k, v in params.items():
                if (
                    k not in (*main_cols, "channel")
                    and k not in extra_cols
                    and (is_finite(v) or isinstance(v, str | bool))
                ):
                    extra_cols.append(k)
    channels = [
        (ch, ps) for ch, ps in sorted(sensor.items(), key=lambda kv: kv[0] != "total") if isinstance(ps, Mapping)
    ]

    def table(cols: list[str]) -> str:
        head = "".join(f'<th title="{esc(c)}">{esc(sensor_label(c))}</th>' for c in ["channel", *cols])
        body = "".join(
            f"<tr><td>{esc(ch)}</td>" + "".join(f'<td class="num">{fmt(ps.get(c))}</td>' for c in cols) + "</tr>"
            for ch, ps in channels
        )
        return f'<div class="wide"><table class="sensor"><tr>{head}</tr>{body}</table></div>'

    out.append(
        "<h3>Power sensor (per channel)</h3>"
        + table(main_cols)
        + '<p class="sub">period: time between samples; delay: dead time before a change shows; window: '
        "boxcar averaging window; lag: first-order time constant; settle: time until a new level is "
        "within tolerance; content lead: how much later than this model a sample's content can lie (the SSP runs' "
        "trailing executions cover it).</p>"
    )
    if extra_cols:  # the fit's other fields (standard errors, levels, counts): folded, never one wide table
        out.append(
            f"<details><summary>Every fitted field ({len(extra_cols)} more)</summary>{table(extra_cols)}</details>"
        )
    return out


def calibration_section(calibration: Calibration | None) -> str:
    """Clock fit (ns, shown in µs) and sensor parameters (ns, shown in ms) of calibration/gpu0.json."""
    out = ['<h2 id="calibration">Calibration</h2>']
    if calibration is None:
        out.append(
            '<p class="warn">No calibration (calibration/gpu0.json) in this sweep: clock and sensor parameters are '
            "not shown.</p>"
        )
        return "".join(out)
    clock = calibration.clock.model_dump(mode="json", exclude_none=True)
    if clock:
        pairs = []
        if is_finite(clock.get("offset_ns")):
            pairs.append(("offset (host − GPU)", f"{fmt(us(clock['offset_ns']))} µs"))
        drift = ClockMap.from_record(clock).drift_ppm if "gpu_ref_ns" in clock and "offset_ns" in clock else None
        if is_finite(drift):
            pairs.append(("drift", f"{float(drift):+.3f} ppm"))
        if is_finite(clock.get("residual_ns")):
            pairs.append(("residual (rms of kept pairs)", f"{fmt(us(clock['residual_ns']))} µs"))
        if clock.get("gpu_ref_ns") is not None:
            pairs.append(("GPU reference time", f"{esc(clock['gpu_ref_ns'])} ns"))
        for k, v in clock.items():
            if k not in ("offset_ns", "drift", "drift_ppm", "residual_ns", "gpu_ref_ns") and not isinstance(
                v, Mapping | list
            ):
                pairs.append((k, esc(fmt(v) if is_finite(v) else v)))
        out.append("<h3>Clock sync (host = GPU + offset + drift · (GPU − GPU ref))</h3>" + _kv_table(pairs))
    out += _sensor_tables(calibration)
    flags = split_flags(calibration.flags)
    if flags:
        out.append(f"<p>Calibration flags: {flag_chips(flags)}</p>")
    return "".join(out)


def _sensor_display(params: Mapping[str, Any]) -> dict[str, Any]:
    """A channel's sensor record for the calibration table: times as `*_ms` (from ns), the rest unchanged."""
    out: dict[str, Any] = {}
    for k, v in sensor_ns(params).items():
        if k.endswith("_ns") and is_finite(v):
            out[k[:-3] + "_ms"] = ms(v)
        elif not k.endswith("_ns"):
            out[k] = v
    return out


def kernel_power_cell(scn: ScenarioData, target: str) -> str:
    """The kernel power of the SSE ("sse") or interleaved execution ("first") with its CI, or "not measurable"
    with the reason as a tooltip (`fingrav.analysis.kernel_power`)."""
    k = scn.summary.kernel_power.get(target)
    if k is None or not k.measurable:
        why = k.reason if k is not None and k.reason else "not estimated"
        return f'<span class="nm" title="{esc(why)}">not measurable</span>'
    p = k.power.scaled(1.0 / MW_PER_W, "W")
    return fmt_ci(p.value, p.ci_low, p.ci_high, 1)


def _signed(v: Any) -> str:
    return f"{float(v):+.1f}" if is_finite(v) else "n/a"


def _pct_ci(e: Estimate) -> str:
    """A signed percentage of the result with its CI as text."""
    v, lo, hi = ci3(e)
    ci = f" [{_signed(lo)}, {_signed(hi)}]" if is_finite(lo) and is_finite(hi) else ""
    return f"{_signed(v)} %{ci}"


def takeaway(scn: ScenarioData) -> str:
    """One line on what a scenario's numbers say (from the analysis' columns and flags; nothing recomputed)."""
    r = scn.result
    if not scn.valid:
        invalid = [FL.BY_NAME[f] for f in scn.flags if FL.BY_NAME.get(f) is not None and FL.BY_NAME[f].invalidates]
        if not invalid:
            return "not valid: " + ", ".join(scn.flags)
        also = f"; also {', '.join(f.name for f in invalid[1:])}" if len(invalid) > 1 else ""
        return f"not valid: {invalid[0].name} ({invalid[0].threshold}){also}"
    bits = []
    vs = "the SSP"
    sus, lc = r.sustained, r.sustained.limit_cycle
    stamps = sus.ssp_cycle_vs_sustained_cycle.value
    if lc is not None and lc.cycles:
        bits.append(
            f"the power limiter cycles every {fmt(lc.period.value, 0)} ms: sustained "
            f"{fmt(r.headline.power.value, 0)} W; bursts after idle draw {_pct_ci(sus.ssp_vs_power)}"
        )
    elif r.headline.power_source == "sustained" and stamps is not None and abs(stamps) >= 0.05:  # "+0.0 %": nothing
        bits.append(f"stamps lengthen its cycle by {_pct_ci(sus.ssp_cycle_vs_sustained_cycle)}")
    if r.sse.kernel_power.has_value:
        bits.append(f"the SSE draws {_pct_ci(r.sse.kernel_power_vs_ssp)} vs {vs} (kernel power)")
    elif r.sse.reading_vs_ssp.has_value:
        bits.append(f"the sensor reads {_pct_ci(r.sse.reading_vs_ssp)} vs {vs} during the SSE")
    if r.interleaved.reading_vs_ssp.has_value:
        bits.append(f"right after its predecessor it reads {_pct_ci(r.interleaved.reading_vs_ssp)}")
    return "; ".join(bits) or "steady: the SSP is the number to use"


def kernel_line(result: ScenarioResult) -> str:
    """The kernel a scenario measured (its label: kind, shape, dtype; with its predecessor's for an interleaved
    one) as a small second line under its name; "" when the result has none."""
    text = result.labels.kernel
    if not text:
        return ""
    pred = result.labels.predecessor
    after = f" after {pred}" if pred else ""
    return f'<br><span class="kern">{esc(text)}{esc(after)}</span>'


def headline_section(scns: Sequence[ScenarioData], ci_pct: str = "95 %") -> str:
    """Per scenario, first: SSP ± CI, energy per execution ± CI, valid, and a one-line takeaway; one line per
    scenario (CIs beside the values), so that the core table follows in the first screenful. The SSP's source
    (burst / sustained) is shown when the sweep has any sustained one."""
    show_source = any(s.result.headline.power_source != "burst" for s in scns)
    rows = []
    for s in scns:
        r = s.result
        mark = '<span class="ok" title="valid">✓</span>' if s.valid else '<span class="bad" title="invalid">✗</span>'
        ssp = fmt_ci(*ci3(r.headline.power), 1, inline=True)
        if show_source:
            ssp += f'<span class="cii">{esc(r.headline.power_source)}</span>'
        energy = fmt_ci(*ci3(r.headline.energy_per_exec), inline=True)
        cls = "" if s.valid else ' class="invalid"'
        rows.append(
            f'<tr{cls}><td>{mark}</td><td class="name"><b>{esc(s.name)}</b>{kernel_line(r)}</td>'
            f'<td class="num">{ssp}</td><td class="num">{energy}</td><td>{esc(takeaway(s))}</td></tr>'
        )
    return (
        '<h2 id="headline">Headline</h2>'
        f'<p class="sub">What each kernel draws, [{ci_pct} CI] beside each number, and the one thing to know about '
        "it.</p>"
        '<div class="wide"><table class="headline" data-sortable><tr><th></th><th>scenario</th><th>power (W)</th>'
        f"<th>energy / execution (mJ)</th><th>takeaway</th></tr>{''.join(rows)}</table></div>"
    )


def _cycles(result: ScenarioResult) -> int:
    """Whole power-limit cycles of the reference run (0: none)."""
    lc = result.sustained.limit_cycle
    return lc.cycles if lc is not None else 0


def _vs_label(scns: Sequence[ScenarioData]) -> str:
    """What the readings' *_vs_ssp_pct compare with: the method SSP of the same stamped runs (ssp_power_w)."""
    return "SSP"


def core_table(scns: Sequence[ScenarioData], paper: Mapping[str, Any] | None = SSE_VS_SSP_PCT) -> str:
    """The summary's core columns, always shown (the rest is folded): validity, scenario, execution time, power,
    energy per execution, the SSE reading's signed error vs the SSP with its CI and the paper's value beside it,
    the interleaved reading's (when a scenario has a predecessor), golden runs and flags. Every number is the
    analysis' (summary.csv); nothing is recomputed."""
    interleaved = any(s.has_predecessor for s in scns)
    vs = _vs_label(scns)
    heads = ["", "scenario", "exec time (µs)", "power (W)", "energy / exec (mJ)", f"SSE reading vs {vs} (%)"]
    heads += [f"interleaved reading vs {vs} (%)"] if interleaved else []
    heads += ["golden / runs", "flags"]
    body = []
    for s in scns:
        r = s.result
        marker = (
            '<span class="ok" title="valid">✓</span>'
            if s.valid
            else '<span class="bad" title="invalid">✗ invalid</span>'
        )
        sse = fmt_signed_ci(*ci3(r.sse.reading_vs_ssp)) if s.sse_measurable else NOT_MEASURABLE_HTML
        ref = paper_sse_vs_ssp_pct(s.name, paper)
        if ref is not None:
            sse += f'<span class="paper" title="the paper\'s MI300X value">paper: {ref:+.0f}</span>'
        cells = [
            fmt_ci(*ci3(r.headline.exec_time)),
            fmt_ci(*ci3(r.headline.power), 1),
            fmt_ci(*ci3(r.headline.energy_per_exec)),
            sse,
        ]
        if interleaved:
            cells.append(fmt_signed_ci(*ci3(r.interleaved.reading_vs_ssp)) if s.has_predecessor else "–")
        cells.append(f"{fmt(r.counts.ssp_runs_golden, 0)} / {fmt(r.counts.ssp_runs_total, 0)}")
        tds = "".join(f'<td class="num">{c}</td>' for c in cells)
        cls = "valid" if s.valid else "invalid"
        body.append(
            f'<tr class="{cls}"><td>{marker}</td><td class="name"><b>{esc(s.name)}</b></td>{tds}'
            f"<td>{flags_cell(s)}</td></tr>"
        )
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    return (
        filter_box("core-table", len(body))
        + '<div class="wide"><table class="core" id="core-table" data-sortable>'
        + f"<tr>{head}</tr>{''.join(body)}</table></div>"
    )


@dataclass(frozen=True)
class _Columns:
    """Which optional column groups the full summary table has (any scenario with them)."""

    channels: list[str]
    with_ref: bool
    sustained: bool
    cycling: bool


def _columns(scns: Sequence[ScenarioData]) -> _Columns:
    channels: list[str] = []
    for s in scns:
        for ch in sorted(s.result.ssp.channels):
            if ch not in channels:
                channels.append(ch)
    return _Columns(
        channels,
        any(s.has_reference for s in scns),
        any(s.result.headline.power_source != "burst" for s in scns),
        any(_cycles(s.result) for s in scns),
    )


def _summary_heads(scns: Sequence[ScenarioData], cols: _Columns) -> list[str]:
    """The full summary table's column heads."""
    channels, with_ref, sustained, cycling = cols.channels, cols.with_ref, cols.sustained, cols.cycling
    heads = [
        "",
        "scenario",
        "kernel",
        "predecessor",
        "exec time (µs)",
        "power (W)",
        "SSE reading (W, sensor)",
        f"SSE reading vs {_vs_label(scns)} (%)",
        "SSE kernel power (W)",
    ]
    if sustained:
        heads += ["power source", "SSP (W, stamped runs after idle)", "SSP vs power (%)"]
        heads += ["SSP cycle vs sustained cycle (%)", "SSP vs unstamped burst (%)", "reference run (s, stop)"]
    if cycling:
        heads += ["limit cycle (period ms, duty %, high / low W)"]
    if with_ref:
        heads += ["reference power (W, settled)", "SSP vs reference (%)"]
    heads += [
        "energy / exec (mJ)",
        "interleaved reading (W, sensor)",
        f"interleaved reading vs {_vs_label(scns)} (%)",
        "interleaved kernel power (W)",
    ]
    heads += [f"SSP {ch} (W)" for ch in channels]
    heads += ["golden / runs", "LOIs SSP / SSE", "flags"]
    return heads


def _sustained_cells(s: ScenarioData) -> list[str]:
    """A scenario's sustained-headline cells: power source, the method SSP, SSP vs power, what the stamps add to
    the cycle and do to the power, the reference run's length and why it stopped."""
    r, sus = s.result, s.result.sustained
    return [
        esc(r.headline.power_source),
        fmt_ci(*ci3(r.ssp.power), 1) + ssp_validity(s),
        fmt_ci(*ci3(sus.ssp_vs_power), 1),
        fmt_ci(*ci3(sus.ssp_cycle_vs_sustained_cycle), 1),
        fmt_ci(*ci3(sus.ssp_vs_unstamped_burst), 1),
        f"{fmt(sus.run_s, 1)} ({esc(sus.stop or '–')})",
    ]


def _limit_cycle_cell(lc: LimitCycle | None) -> str:
    """Period, duty, high / low levels and whole cycles of the reference run's limit cycle ("–": none)."""
    if lc is None or not lc.cycles:
        return "–"
    return (
        f"{fmt(lc.period.value, 0)} ms, {fmt(lc.duty.value, 0)} %, {fmt(lc.high.value, 0)} / {fmt(lc.low.value, 0)} W "
        f"({fmt(lc.cycles, 0)} cycles)"
    )


def _runs_cell(c: Counts) -> str:
    """Golden / total SSP runs, and the SSE runs where there are any."""
    runs = f"{fmt(c.ssp_runs_golden, 0)} / {fmt(c.ssp_runs_total, 0)}"
    if c.sse_runs_total:
        runs = f'SSP {runs}<span class="ci">SSE {fmt(c.sse_runs_golden, 0)} / {fmt(c.sse_runs_total, 0)}</span>'
    return runs


def _summary_row(s: ScenarioData, cols: _Columns) -> str:
    """One scenario's row of the full summary table."""
    channels, with_ref, sustained, cycling = cols.channels, cols.with_ref, cols.sustained, cols.cycling
    r = s.result
    sus, lc = r.sustained, r.sustained.limit_cycle
    valid = s.valid
    marker = (
        '<span class="ok" title="valid">✓</span>' if valid else '<span class="bad" title="invalid">✗ invalid</span>'
    )
    if s.sse_measurable:
        sse_cells = [
            fmt_ci(*ci3(r.sse.reading), 1),
            fmt(r.sse.reading_vs_ssp.value, 1),
        ]
    else:
        sse_cells = [NOT_MEASURABLE_HTML, NOT_MEASURABLE_HTML]
    sse_cells.append(kernel_power_cell(s, "sse"))
    cells = [
        marker,
        f"<b>{esc(s.name)}</b>",
        esc(r.labels.kernel),
        esc(r.labels.predecessor or "–"),
        fmt_ci(*ci3(r.headline.exec_time)),
        fmt_ci(*ci3(r.headline.power), 1),
        *sse_cells,
    ]
    cells += _sustained_cells(s) if sustained else []
    cells += [_limit_cycle_cell(lc)] if cycling else []
    if with_ref:
        cells += [
            fmt_ci(*ci3(sus.reference_power), 1),
            fmt(sus.ssp_vs_reference.value, 1),
        ]
    cells += [
        fmt_ci(*ci3(r.headline.energy_per_exec)),
        fmt_ci(*ci3(r.interleaved.reading), 1),
        fmt(r.interleaved.reading_vs_ssp.value, 1),
        kernel_power_cell(s, "first") if s.has_predecessor else "–",
    ]
    for ch in channels:
        cells.append(fmt_ci(*ci3(r.ssp.channels.get(ch, NONE)), 1))
    cells += [_runs_cell(r.counts), f"{fmt(r.counts.ssp_lois, 0)} / {fmt(r.counts.sse_lois, 0)}", flags_cell(s)]
    tds = "".join(
        f'<td class="num">{c}</td>' if 4 <= i < len(cells) - 1 else f"<td>{c}</td>" for i, c in enumerate(cells)
    )
    return f'<tr class="{"valid" if valid else "invalid"}">{tds}</tr>'


def summary_section(
    scns: Sequence[ScenarioData], ci_pct: str = "95 %", paper: Mapping[str, Any] | None = SSE_VS_SSP_PCT
) -> str:
    """The summary: the core table (`core_table`), then every column, folded: every number with its CI, validity
    marker and flags. SSE numbers of a scenario with too few SSE LOIs read "not measurable"; reference-run columns
    appear when any scenario has one."""
    cols = _columns(scns)
    heads = _summary_heads(scns, cols)
    body = [_summary_row(s, cols) for s in scns]
    with_ref = cols.with_ref
    head = "".join(f"<th>{esc(h)}</th>" for h in heads)
    n_invalid = sum(not s.valid for s in scns)
    note = (
        f'<p class="warn">{n_invalid} of {len(scns)} scenarios are <b>invalid</b> (red rows): see their flags '
        "before using their numbers.</p>"
        if n_invalid
        else ""
    )
    ref_note = (
        " Reference power: the settled power of a long back-to-back reference run, with a batch-means CI."
        if with_ref
        else ""
    )
    return (
        '<h2 id="summary">Summary</h2>'
        f'<p class="sub">Every number is a mean over the golden runs with its {ci_pct} confidence interval below it '
        f"(cluster bootstrap over runs). The same table is in <code>summary.csv</code>.{ref_note}</p>"
        f"{note}{core_table(scns, paper)}"
        f"<details><summary>All columns ({len(heads)}): SSE and interleaved readings and kernel powers, "
        f"sustained vs burst, limit cycle, per-component power, runs, LOIs</summary>"
        + filter_box("all-table", len(body))
        + '<div class="wide"><table class="all" id="all-table" data-sortable>'
        + f"<tr>{head}</tr>{''.join(body)}</table></div>"
        "</details>"
    )


def reference_section(scns: Sequence[ScenarioData], ci_pct: str = "95 %") -> str:
    """The reference runs: settled power, SSP vs reference and the energy-counter cross-check (empty when
    no scenario has a reference run)."""
    rows = [s for s in scns if s.has_reference or s.result.sustained.reference_counter_power.has_value]
    if not rows:
        return ""
    head = "".join(
        f"<th>{esc(h)}</th>"
        for h in (
            "scenario",
            "reference power, settled (W) [CI]",
            "method SSP (W) [CI]",
            "SSP vs reference (%) [CI]",
            "counter power, whole run (W) [bounds]",
            "counter vs samples (%) [CI]",
            "settled samples",
            "settling time (ms)",
        )
    )
    body = []
    for s in rows:
        sus = s.result.sustained
        ref = s.summary.reference
        t_stable = ref.t_stable_ns if ref is not None else None
        cls = "" if s.valid else ' class="invalid"'
        cells = [
            fmt_ci(*ci3(sus.reference_power), 1),
            fmt_ci(*ci3(s.result.ssp.power), 1),
            fmt_ci(*ci3(sus.ssp_vs_reference), 2),
            fmt_ci(*ci3(sus.reference_counter_power), 1),
            fmt_ci(*ci3(sus.reference_counter_vs_samples), 2),
            fmt(ref.settled_samples if ref is not None else None),
            fmt(ms(t_stable) if is_finite(t_stable) else None),
        ]
        tds = "".join(f'<td class="num">{c}</td>' for c in cells)
        body.append(f"<tr{cls}><td>{esc(s.name)}</td>{tds}</tr>")
    return (
        '<h2 id="reference">Reference run</h2>'
        '<p class="sub">The kernel alone, back to back for seconds. <b>Settled power</b>: mean of the power samples '
        "after the stability probe's settling time, with a "
        f"{ci_pct} CI from the means of 10 contiguous batches (the samples are autocorrelated). <b>Counter "
        "power</b>: the device's energy counter over the <i>whole</i> run divided by its duration; it includes the "
        "initial transient, so it can differ from the settled power; its bounds: the counter's resolution, how often "
        "it updates and when it is read. <b>Counter vs samples</b>: the counter's energy against the integral of "
        "the power samples over the same span, its CI from both.</p>"
        f'<div class="wide"><table class="reference"><tr>{head}</tr>{"".join(body)}</table></div>'
    )


def validation_section(val: pl.DataFrame | None) -> str:
    """The simulator validation table (empty when there is no truth)."""
    if val is None or val.height == 0:
        return ""
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "scenario",
            "quantity",
            "measured [CI]",
            "truth",
            "error (% of truth) [CI]",
            "CI covers truth",
            "within ±2 %",
        )
    )
    body = []
    for r in val.iter_rows(named=True):
        cov = r["covered"]
        cov_s = "–" if cov is None else ('<span class="ok">yes</span>' if cov else '<span class="bad">no</span>')
        tol_s = '<span class="ok">yes</span>' if r["within_tol"] else '<span class="bad">no</span>'
        cls = "" if r["valid"] else ' class="invalid"'
        body.append(
            f"<tr{cls}><td>{esc(r['scenario'])}</td><td>{esc(r['quantity'])}</td>"
            f'<td class="num">{fmt_ci(r["measured"], r["ci_low"], r["ci_high"])}</td>'
            f'<td class="num">{fmt(r["truth"])}</td>'
            f'<td class="num">{fmt_ci(r["error_pct"], r["err_lo"], r["err_hi"], 2)}</td>'
            f"<td>{cov_s}</td><td>{tol_s}</td></tr>"
        )
    n_ok = int(val["within_tol"].sum())
    n_cov = int(val["covered"].fill_null(False).sum())
    return (
        '<h2 id="validation">Validation against the simulator\'s truth</h2>'
        f'<p class="sub">{n_ok} of {val.height} quantities within ±2 % of the truth; the CI covers the truth for '
        f"{n_cov}. Truth = mean over golden runs of the executions' true cycle-mean power; the reference run's "
        "settled power is compared with the SSP truth.</p>"
        f'<div class="wide"><table class="validation"><tr>{head}</tr>{"".join(body)}</table></div>'
    )


HOW_TO_READ = """
<h2 id="how">How to read this</h2>
<div class="note">
<p>A <b>run</b> is a random delay followed by back-to-back executions of the kernel; the power logger records
the whole run. A power sample that falls inside the execution being profiled is a <b>LOI</b>; where inside
that execution it fell is its <b>TOI</b>. Only <b>golden runs</b> (whose steady-state execution time falls in
the most populated execution-time bin) are used.</p>
<p><b>SSE</b> (steady-state execution) is the first execution after the warm-ups: the profile one naively
associates with the kernel. <b>SSP</b> (steady-state power) executions come once the logged power has stopped
changing: their profile is the kernel's true average power. The logger averages over a window, so for kernels
shorter than that window the SSE reading still contains idle and warm-up time and <b>underestimates</b> the
power (the paper saw up to 80 %): use the SSP numbers. <b>Interleaved</b> power is the kernel's first
execution right after many executions of another kernel (its predecessor): a short kernel's reading is pulled
towards what ran before it.</p>
<p>SSE numbers come from <b>SSE runs</b> (warm-ups + 1 executions) and from the same execution of the longer
<b>SSP runs</b> (the sensor is causal: it has the same history there); SSP numbers from the SSP runs only. Each
kind of run is binned on its own. A scenario whose SSE has too few LOIs shows <i>not measurable</i>. The
optional <b>reference run</b> (the kernel alone, back to back for seconds) gives an independent steady-state
power and an energy-counter cross-check.</p>
<p>With a reference run the headline <b>SSP</b> is the kernel's <b>sustained</b> power: the reference run is
launched as users launch kernels (no stamp between executions) and averaged over whole power-limit cycles; the
FinGraV SSP of the short runs after idle is the <b>burst</b> column. SSE and interleaved numbers come twice: the
<b>sensor reading</b> (what the sensor reported during the execution: naive profiling, the paper's numbers) and
the <b>kernel power</b> (what the execution drew, through the sensor model; <i>not measurable</i> where the sensor
cannot resolve the execution). Per-component powers come from their own sensors and need not add up to the
total (other parts of the board, other sensors' timing).</p>
<p>All powers are in W (the sensor's mW / {mw_per_w:g}); energy per execution = power × its cycle time
(the headline's: sustained or the method SSP's). Flags (hover over one in the table for its meaning):</p>
<ul>{flags}</ul>
</div>
"""


def how_to_read() -> str:
    """The "how to read this" note, with every flag of `fingrav.contracts.flags.REGISTRY` explained."""
    items = "".join(
        f'<li><span class="{"flag inv" if f.invalidates else "flag"}">{esc(f.name)}</span> {esc(f.meaning)} '
        f'<span class="sub">(fires when {esc(f.threshold)})</span>'
        f"{' <b>(makes the row invalid)</b>' if f.invalidates else ''}</li>"
        for f in FL.REGISTRY
    )
    return HOW_TO_READ.replace("{flags}", items).replace("{mw_per_w:g}", f"{MW_PER_W:g}")


def figure_html(fig: FigureOut) -> str:
    """One figure with its caption, or a note saying why it is missing."""
    anchor = f'id="fig-{esc(fig.key)}"'
    if fig.spec is not None:  # folded; drawn by the browser when first opened (fingrav.report.lazy.LAZY_JS)
        return (
            f'<details class="lazy" {anchor}{" open" if fig.section == "overview" else ""}>'
            f'<summary>{esc(fig.title)}</summary><div class="vega"></div>'
            f'<script type="application/octet-stream" class="spec">{fig.spec}</script>'
            f"<figcaption>{fig.caption}</figcaption></details>"
        )
    if fig.png is None:
        return (
            f'<figure {anchor}><p class="warn">Figure <b>{esc(fig.title)}</b> could not be drawn: '
            f"{esc(fig.error)}</p></figure>"
        )
    return (
        f'<figure {anchor}><img alt="{esc(fig.title)}" src="{data_uri(fig.png)}">'
        f"<figcaption><b>{esc(fig.title)}.</b> {fig.caption} "
        f'<span class="sub">(<code>{esc(fig.filename)}</code>)</span></figcaption></figure>'
    )


SECTIONS: tuple[tuple[str, str, str], ...] = (
    (
        "overview",
        "Overview: power and energy against arithmetic intensity",
        "One point per scenario, from the summary's numbers; the tables above sort by a click on a column head.",
    ),
    ("profiles", "Power profiles per scenario", "The TOI-power profile of each scenario's golden runs."),
    ("timeline", "Why synchronize and bin: one run over time", "The method's steps made visible on one scenario."),
    ("across", "Across scenarios", ""),
    (
        "gpus",
        "Several GPUs: per GPU, combined, collectives",
        "Each scenario ran on every GPU at once, one process per GPU in lockstep; GPU 0's numbers are the summary "
        "table's, the other GPUs' and the combined ones are here and in summary.csv.",
    ),
    (
        "fleet",
        "Several cards: card-to-card spread",
        "A fleet survey: the same scenarios on every listed GPU, each GPU measured and analyzed on its own.",
    ),
    ("truth", "Measured vs truth", ""),
)


def _figure_sections(figures: Sequence[FigureOut], nav: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The overview section, and the other figures by section (`SECTIONS`, in order; the profiles folded, or every
    figure folded and drawn when opened when they are specs), each section added to `nav`."""
    lead: list[str] = []
    fig_parts: list[str] = []
    for key, title, intro in SECTIONS:
        figs = [f for f in figures if f.section == key]
        if not figs:
            continue
        nav.append((f"sec-{key}", title))
        head = [f'<h2 id="sec-{key}">{esc(title)}</h2>'] + ([f'<p class="sub">{esc(intro)}</p>'] if intro else [])
        if key == "overview":
            lead += head + [figure_html(f) for f in figs]
            continue
        fig_parts += head
        if any(f.spec is not None for f in figs):  # many scenarios: each folded, drawn when opened
            fig_parts.append(
                f'<p class="sub">{len(figs)} figures, each drawn by your browser when you open it.</p>'
                + "".join(figure_html(f) for f in figs)
            )
        elif key == "profiles":  # one grid per scenario: folded, the headline says what matters
            fig_parts.append(
                f"<details><summary>{len(figs)} profile figures (open)</summary>"
                + "".join(figure_html(f) for f in figs)
                + "</details>"
            )
        else:
            fig_parts += [figure_html(f) for f in figs]
    return lead, fig_parts


def _subtitle(sweep_meta: Mapping[str, Any], scns: Sequence[ScenarioData]) -> str:
    """Backend, scenarios (valid), config hash and when the page was made."""
    created = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    n_valid = sum(s.valid for s in scns)
    return (
        f"backend <b>{esc(sweep_meta.get('backend'))}</b> · {len(scns)} scenarios ({n_valid} valid) · "
        f"config <code>{esc(sweep_meta.get('config_hash'))}</code> · generated {created}"
    )


def _footer(figures: Sequence[FigureOut], render_s: float | None) -> str:
    """The method's reference, how long the page took and how its figures are kept."""
    timing = f" in {render_s:.1f} s" if render_s is not None else ""
    n_lazy = sum(f.spec is not None for f in figures)
    return (
        f"<footer>FinGraV method: Singhania, Aga, Ibrahim, arXiv 2412.12426 (ISPASS 2025). "
        f"Report rendered by fingrav{timing}; {len([f for f in figures if f.png])} figures, also saved as PNG "
        "next to this file" + (f", {n_lazy} drawn by the browser when opened" if n_lazy else "") + ".</footer>"
    )


def render_html(
    *,
    sweep_meta: Mapping[str, Any],
    scns: Sequence[ScenarioData],
    calibration: Calibration | None,
    figures: Sequence[FigureOut],
    validation: pl.DataFrame | None,
    render_s: float | None = None,
    ci_pct: str = "95 %",
    many: bool = False,
) -> str:
    """The whole page. `ci_pct`: the CI level as shown ("95 %"); `many`: a sweep of more scenarios than a page of
    figures serves (`fingrav.report.lazy.LAZY_ABOVE`): the overview leads."""
    sweep = sweep_meta.get("sweep") or "sweep"
    nav = [
        ("headline", "Headline"),
        ("summary", "Summary"),
        ("how", "How to read this"),
        ("meta", "Provenance"),
        ("calibration", "Calibration"),
    ]
    lead, fig_parts = _figure_sections(figures, nav)  # lead: the overview
    n_lazy = sum(f.spec is not None for f in figures)
    val_html = validation_section(validation)
    ref_html = reference_section(scns, ci_pct)
    if ref_html:
        nav.append(("reference", "Reference run"))
    if val_html:
        nav.append(("validation", "Validation"))
    nav_html = "<nav>" + "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in nav) + "</nav>"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>fingrav report: {esc(sweep)}</title>",
        f"<style>{CSS}{LAZY_CSS}</style></head><body><main>",
        f"<h1>fingrav power report: {esc(sweep)}</h1>",
        f'<p class="sub">{_subtitle(sweep_meta, scns)}</p>',
        nav_html,
        *(lead if many else []),  # a database: the overview first; its tables have hundreds of rows
        headline_section(scns, ci_pct),
        summary_section(scns, ci_pct, sweep_meta.get("paper_sse_vs_ssp_pct", SSE_VS_SSP_PCT)),
        *([] if many else lead),  # a few scenarios: the headline and core table fit the first screen, then this
        how_to_read(),
        meta_section(sweep_meta, calibration, scns),
        calibration_section(calibration),
        *fig_parts,
        ref_html,
        val_html,
        _footer(figures, render_s),
        "</main>",
        scripts(lazy=n_lazy > 0),
        "</body></html>",
    ]
    return "\n".join(parts)
