"""The report's multi-GPU part (device.world_size > 1): per-GPU and combined power, the collectives'
comparison of the paper's Fig. 10, per-GPU profiles, and the summary.csv columns from combined.json.

Inputs (`fingrav.layout.SweepLayout`): profiles/combined/<scenario>.json (fingrav.analysis.combine) and
profiles/gpu<k>/<scenario>/{summary.json,lois.parquet}. Every builder returns None when it does not apply
(a one-GPU sweep, no collective). Power in W.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import altair as alt
import polars as pl

from fingrav import rawio
from fingrav.contracts import roles as R
from fingrav.contracts.multigpu import CombinedResult
from fingrav.contracts.result import is_finite
from fingrav.contracts.units import MW_PER_W, w
from fingrav.errors import DataError
from fingrav.kinds import kind_of
from fingrav.layout import SweepLayout
from fingrav.report.figures import _scenario_x, _title, configure
from fingrav.report.load import ScenarioData, load_scenario

logger = logging.getLogger(__name__)

# collectives below this size are latency-bound (the paper: 64 KB, 128 KB), from it bandwidth-bound
# (512 MB, 1 GB); the boundary is where a ring collective's transfer time overtakes its ~10 µs latency on
# NVLink / xGMI-class links (a few MB)
LATENCY_BOUND_MAX_BYTES = 8 << 20
MEMORY_CHANNELS: tuple[str, ...] = ("memory", "hbm", "mem", "vram")
CLASS_ORDER: tuple[str, ...] = ("latency-bound collective", "bandwidth-bound collective", "GEMM")
CLASS_COLORS: tuple[str, ...] = ("#7fb3d5", "#1f5fa8", "#d62728")

GPUS_CAPTION = (
    "Left: the power of every GPU (rank) per scenario, black bars: {ci} CI. Right: the combined power of "
    "all GPUs (the sum of their powers); its CI comes from a joint cluster bootstrap over the runs, which "
    "all GPUs ran in lockstep. The summary table above shows GPU 0; summary.csv has the per-GPU "
    "(<code>rank&lt;k&gt;_*</code>) and combined (<code>combined_*</code>) columns. Look for: GPUs of one "
    "scenario drawing similar power (a collective loads every GPU alike), and faded (invalid) bars."
)
PROFILES_CAPTION = (
    "Each scenario's SSP profile (polynomial fit of the total channel over the execution, TOI as a fraction of "
    "it) on every GPU, and their sum: the combined profile of all GPUs (dashed). The scatter and CIs of each "
    "GPU are in its own profile figure above. Look for: GPUs with the same shape and level (a collective is "
    "symmetric), and a flat profile when the kernel is shorter than the sensor's window."
)
FIG10_CAPTION = (
    "Paper Fig. 10: power per GPU (combined power / GPUs, {ci} CI) of latency-bound collectives (light blue, "
    "< {lat} MiB) and bandwidth-bound ones (dark blue) next to the 8K GEMM (red), total and memory-side "
    "channel ({mem}). Look for: bandwidth-bound collectives drawing more memory-side power than latency-bound "
    "ones, and every collective drawing far less total power than the compute-bound GEMM."
)


def load_combined(layout: SweepLayout, scenarios: Sequence[str]) -> dict[str, CombinedResult]:
    """profiles/combined/<scenario>.json of the scenarios that have one (none in one-GPU sweeps), validated."""
    out: dict[str, CombinedResult] = {}
    for name in scenarios:
        path = layout.combined(name)
        if path.exists():
            try:
                out[name] = rawio.read_model(path, CombinedResult)
            except DataError as err:
                logger.warning("%s; no multi-GPU numbers for %s", err, name)
    return out


def rank_scenario(layout: SweepLayout, name: str, rank: int) -> ScenarioData | None:
    """GPU k's summary of a scenario as a ScenarioData named "<scenario> (GPU k)" (None when missing)."""
    try:
        return load_scenario(layout, name, rank, name=f"{name} (GPU {rank})")
    except DataError as err:
        logger.warning("%s; no GPU %d numbers for %s", err, rank, name)
        return None


# --------------------------------------------------------------------------- per GPU and combined
def gpus_data(scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult]) -> pl.DataFrame:
    """Per scenario: one row per GPU ("GPU k") and one "all GPUs" row; power and CI in W."""
    rows = []
    for s in scns:
        c = combined.get(s.name)
        if c is None:
            continue
        sources = [
            *((f"GPU {r.rank}", r.power, r.valid) for r in c.ranks),
            ("all GPUs", c.combined.power, c.combined.valid),
        ]
        for what, est, valid in sources:
            if is_finite(est.value):
                rows.append(
                    {
                        "scenario": s.name,
                        "what": what,
                        "power_w": float(est.value),  # type: ignore[arg-type]
                        "lo_w": est.ci_low,
                        "hi_w": est.ci_high,
                        "valid": valid,
                    }  # fmt: skip
                )
    schema = {
        "scenario": pl.String,
        "what": pl.String,
        "power_w": pl.Float64,
        "lo_w": pl.Float64,
        "hi_w": pl.Float64,
        "valid": pl.Boolean,
    }
    return pl.DataFrame(rows, schema=schema)


def gpus_chart(scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult]) -> alt.TopLevelMixin | None:
    """Per-GPU power (grouped bars) and the combined power of all GPUs, with CIs."""
    df = gpus_data(scns, combined)
    if df.height == 0:
        return None
    order = [s.name for s in scns if s.name in set(df["scenario"].to_list())]
    per = df.filter(pl.col("what") != "all GPUs")
    gpus = sorted(set(per["what"].to_list()), key=lambda w: int(w.split()[-1]))
    opacity = alt.condition("datum.valid", alt.value(1.0), alt.value(0.35))

    def panel(d: pl.DataFrame, offset: bool, title: str, color: Any) -> alt.LayerChart:
        enc: dict[str, Any] = {"x": _scenario_x(order)}
        if offset:
            enc["xOffset"] = alt.XOffset("what:N", sort=gpus)
        base = alt.Chart(d).encode(**enc)
        bars = base.mark_bar().encode(y=alt.Y("power_w:Q", title="power (W)"), color=color, opacity=opacity)
        err = (
            base.transform_filter("isValid(datum.lo_w) && isValid(datum.hi_w)")
            .mark_rule(color="black")
            .encode(y="lo_w:Q", y2="hi_w:Q")
        )
        return alt.layer(bars, err).properties(
            width=max(220, min(520, 34 * len(order) * (len(gpus) if offset else 1))), height=240, title=title
        )

    left = panel(per, True, "per GPU", alt.Color("what:N", sort=gpus, title="GPU"))
    right = panel(df.filter(pl.col("what") == "all GPUs"), False, "all GPUs combined (sum)", alt.value("#444444"))
    chart = alt.hconcat(
        left, right, title=_title("power per GPU and combined", "black: CI; faded: invalid")
    ).resolve_scale(y="independent")
    return configure(chart)


def combined_profiles_data(
    scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult], layout: SweepLayout, points: int = 41
) -> pl.DataFrame:
    """Per multi-GPU scenario, the SSP fit of the "total" channel of every GPU and their sum (the combined
    profile) over the execution (toi_frac 0..1), in W."""
    import numpy as np

    frac = np.linspace(0.0, 1.0, points)
    rows: list[dict[str, Any]] = []
    for s in scns:
        c = combined.get(s.name)
        if c is None:
            continue
        fits: list[tuple[str, Any]] = []
        for k in range(c.world_size):
            scn = s if k == 0 else rank_scenario(layout, s.name, k)
            st = scn.summary.role(R.TOTAL, R.SSP) if scn is not None else None
            fits.append((f"GPU {k}", st.fit_coeffs if st is not None else None))
        total = c.combined.channels.get(R.TOTAL)
        fits.append(("all GPUs (sum)", total.fit_coeffs_mw if total is not None else None))
        for label, coeffs in fits:
            if coeffs and all(is_finite(x) for x in coeffs):
                ys = np.polyval(np.asarray(coeffs, dtype=float), frac) / MW_PER_W
                rows += [
                    {"scenario": s.name, "what": label, "toi_frac": float(f), "power_w": float(y)}
                    for f, y in zip(frac, ys, strict=True)
                ]
    return pl.DataFrame(
        rows, schema={"scenario": pl.String, "what": pl.String, "toi_frac": pl.Float64, "power_w": pl.Float64}
    )


def combined_profiles_chart(
    scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult], layout: SweepLayout
) -> alt.TopLevelMixin | None:
    """Small multiples: each scenario's per-GPU SSP profile fits and the combined (summed) profile."""
    df = combined_profiles_data(scns, combined, layout)
    if df.height == 0:
        return None
    order = list(dict.fromkeys(df["scenario"].to_list()))
    whats = list(dict.fromkeys(df["what"].to_list()))
    base = (
        alt.Chart(df)
        .mark_line(size=2)
        .encode(
            x=alt.X("toi_frac:Q", title="TOI (fraction of the execution)", scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("power_w:Q", title="power (W)", scale=alt.Scale(zero=False)),
            color=alt.Color("what:N", sort=whats, title=""),
            strokeDash=alt.condition(alt.datum.what == "all GPUs (sum)", alt.value([6, 3]), alt.value([1, 0])),
        )
        .properties(width=200, height=130)
    )
    chart = base.facet(facet=alt.Facet("scenario:N", sort=order, title=None), columns=4).resolve_scale(y="independent")
    return configure(
        chart.properties(
            title=_title(
                "SSP profiles per GPU and combined", "degree-4 fits of the total channel; dashed: sum over GPUs"
            )
        )
    )


# --------------------------------------------------------------------------- paper Fig. 10
def scenario_kernel(scn: ScenarioData) -> dict[str, Any]:
    """The scenario's kernel model as a dict (from the collect stage's provenance in plan.json)."""
    k = (scn.summary.plan.provenance.scenario or {}).get("kernel")
    return dict(k) if isinstance(k, Mapping) else {}


def kernel_class(kernel: Mapping[str, Any]) -> str | None:
    """ "latency-bound collective" | "bandwidth-bound collective" | "GEMM" | None."""
    kind = kernel.get("kind")
    if kind is None:  # no kernel recorded
        return None
    if kind_of(kernel).collective:
        size = int(kernel.get("size_bytes") or 0)
        return "latency-bound collective" if size < LATENCY_BOUND_MAX_BYTES else "bandwidth-bound collective"
    if kind == "gemm":
        return "GEMM"
    return None


def _gemm_reference(scns: Sequence[ScenarioData]) -> ScenarioData | None:
    """The isolated GEMM next to the collectives: M=N=K=8192 when the sweep has it, else the largest."""
    gemms = [(s, k) for s in scns if not s.has_predecessor and (k := scenario_kernel(s)).get("kind") == "gemm"]
    if not gemms:
        return None
    for s, k in gemms:
        if k.get("m") == k.get("n") == k.get("k") == 8192:
            return s
    return max(gemms, key=lambda sk: int(sk[1].get("m", 0)) * int(sk[1].get("n", 0)) * int(sk[1].get("k", 0)))[0]


def memory_channel(channels: Sequence[str]) -> str | None:
    """The memory-side channel among `channels` ("memory" on NVIDIA, "hbm" on the MI300X), else None."""
    for ch in MEMORY_CHANNELS:
        if ch in channels:
            return ch
    return None


def fig10_data(scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult]) -> pl.DataFrame:
    """Per isolated collective (and the 8K GEMM): power per GPU (W, combined / GPUs; one GPU's own power in a
    one-GPU sweep) with CI, for the total and the memory-side channel."""
    picked: list[tuple[ScenarioData, str]] = []
    for s in scns:
        cls = kernel_class(scenario_kernel(s))
        if cls and cls != "GEMM" and not s.has_predecessor:
            picked.append((s, cls))
    if not picked:
        return pl.DataFrame(
            schema={
                "scenario": pl.String,
                "class": pl.String,
                "channel": pl.String,
                "power_w": pl.Float64,
                "lo_w": pl.Float64,
                "hi_w": pl.Float64,
            }
        )
    gemm = _gemm_reference(scns)
    if gemm is not None:
        picked.append((gemm, "GEMM"))
    rows = []
    for s, cls in picked:
        c = combined.get(s.name)
        if c is not None:
            n = c.world_size
            chans = c.combined.channels
            mem = memory_channel(list(chans))
            for ch, label in (("total", "total"), (mem, f"memory-side ({mem})")):
                est = chans[ch].mean if ch and ch in chans else None
                if est is not None and is_finite(est.value):
                    rows.append(
                        {
                            "scenario": s.name,
                            "class": cls,
                            "channel": label,
                            "power_w": est.value / n,  # type: ignore[operator]
                            "lo_w": est.ci_low / n if is_finite(est.ci_low) else None,  # type: ignore[operator]
                            "hi_w": est.ci_high / n if is_finite(est.ci_high) else None,  # type: ignore[operator]
                        }
                    )
        else:
            mem = memory_channel(s.channels)
            for ch, label in (("total", "total"), (mem, f"memory-side ({mem})")):
                st = s.summary.role(ch, R.SSP) if ch else None
                est = st.power if st is not None else None
                if est is not None and est.value is not None:
                    rows.append(
                        {
                            "scenario": s.name,
                            "class": cls,
                            "channel": label,
                            "power_w": w(est.value),
                            "lo_w": w(est.ci_low),
                            "hi_w": w(est.ci_high),
                        }
                    )
    schema = {
        "scenario": pl.String,
        "class": pl.String,
        "channel": pl.String,
        "power_w": pl.Float64,
        "lo_w": pl.Float64,
        "hi_w": pl.Float64,
    }
    return pl.DataFrame(rows, schema=schema)


def fig10_chart(scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult]) -> alt.TopLevelMixin | None:
    """Paper Fig. 10: total and memory-side power per GPU of latency- vs bandwidth-bound collectives next to the
    8K GEMM; one panel per channel. None without collectives."""
    df = fig10_data(scns, combined)
    if df.height == 0:
        return None
    cls_rank = {c: i for i, c in enumerate(CLASS_ORDER)}
    first = df.unique("scenario", keep="first", maintain_order=True)
    order = sorted(
        first["scenario"].to_list(), key=lambda n: cls_rank[first.filter(pl.col("scenario") == n)["class"][0]]
    )
    color = alt.Color(
        "class:N", sort=list(CLASS_ORDER), title="", scale=alt.Scale(domain=list(CLASS_ORDER), range=list(CLASS_COLORS))
    )
    panels = []
    for ch in list(dict.fromkeys(df["channel"].to_list())):
        d = df.filter(pl.col("channel") == ch)
        base = alt.Chart(d).encode(x=_scenario_x(order))
        bars = base.mark_bar().encode(y=alt.Y("power_w:Q", title="power per GPU (W)"), color=color)
        err = (
            base.transform_filter("isValid(datum.lo_w) && isValid(datum.hi_w)")
            .mark_rule(color="black")
            .encode(y="lo_w:Q", y2="hi_w:Q")
        )
        panels.append(
            alt.layer(bars, err).properties(width=max(200, 42 * len(order)), height=240, title=f"channel: {ch}")
        )
    chart = alt.hconcat(
        *panels,
        title=_title(
            "collectives vs GEMM: total and memory-side power (paper Fig. 10)", "method SSP per GPU; black: CI"
        ),
    ).resolve_scale(y="independent")
    return configure(chart)


def fig10_caption(scns: Sequence[ScenarioData], combined: Mapping[str, CombinedResult], ci: str) -> str:
    """The Fig. 10 caption naming the memory-side channel."""
    chans: list[str] = []
    for c in combined.values():
        chans += list(c.combined.channels)
    for s in scns:
        chans += s.channels
    mem = memory_channel(chans) or "none in this sweep"
    return FIG10_CAPTION.format(ci=ci, lat=LATENCY_BOUND_MAX_BYTES >> 20, mem=mem)
