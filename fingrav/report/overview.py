"""The overview figure that leads a report of many scenarios (a kernel power database): each scenario's headline
power and its energy per flop against its arithmetic intensity (flop per byte), valid rows apart from invalid ones.

Everything plotted comes from the typed results (`fingrav.contracts.result.ScenarioResult`): the headline power
(`headline.power`, W, with its CI) and the energy per flop (`throughput.energy_per_flop`, pJ/flop, with its CI) as
differentiate computed them, and the work model's `throughput.work_flop` / `throughput.work_bytes` (flop and bytes
per execution) for the intensity. Nothing is recomputed here but the ratio flop / byte, which has no CI (both are
counts of the work model, not measurements)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final

import altair as alt
import polars as pl

from fingrav.contracts.result import ScenarioResult, finite
from fingrav.kinds import KINDS
from fingrav.report.figures import Chart, _title, configure

logger = logging.getLogger(__name__)

OVERVIEW_CAPTION: Final = (
    "Each scenario's headline power (W) and energy per flop (pJ/flop, from the headline energy per execution) "
    "against its arithmetic intensity (flop per byte of the work model), with {ci} CIs; filled: valid rows, "
    "hollow grey: invalid ones (their numbers are not to be used). Rows whose work model gives no flop or no byte "
    "count (collectives, callables without `flops`/`bytes`) have no intensity and are not drawn: {missing}. "
    "Hover a point for its scenario."
)

COLUMNS: Final = (
    "scenario",
    "kernel",
    "kind",
    "valid",
    "intensity_flop_per_byte",
    "power_w",
    "power_lo_w",
    "power_hi_w",
    "energy_per_flop_pj",
    "energy_per_flop_lo_pj",
    "energy_per_flop_hi_pj",
)


def kind_label(kernel: str | None) -> str:
    """The registry's label of a kernel's kind ("GEMM", "attention", ...) from the kernel's label, which starts with
    the kind's name (`fingrav.config` kernels' `label()`); "unknown" when it names no registered kind."""
    entry = KINDS.get((kernel or "").split(" ", 1)[0])
    return entry.label if entry is not None else "unknown"


def _intensity(r: ScenarioResult) -> float | None:
    """flop per byte of one execution's work model; None without both counts."""
    flop, nbytes = finite(r.throughput.work_flop), finite(r.throughput.work_bytes)
    if flop is None or nbytes is None or flop <= 0 or nbytes <= 0:
        return None
    return flop / nbytes


def overview_frame(results: Sequence[ScenarioResult]) -> pl.DataFrame:
    """One row per scenario (`COLUMNS`), in the given order; intensity None where the work model has no flop and
    byte counts."""
    rows = []
    for r in results:
        p, e = r.headline.power, r.throughput.energy_per_flop
        rows.append(
            {
                "scenario": r.labels.scenario,
                "kernel": r.labels.kernel or "",
                "kind": kind_label(r.labels.kernel),
                "valid": bool(r.valid),
                "intensity_flop_per_byte": _intensity(r),
                "power_w": finite(p.value),
                "power_lo_w": finite(p.ci_low),
                "power_hi_w": finite(p.ci_high),
                "energy_per_flop_pj": finite(e.value),
                "energy_per_flop_lo_pj": finite(e.ci_low),
                "energy_per_flop_hi_pj": finite(e.ci_high),
            }
        )
    text = {"scenario": pl.Utf8, "kernel": pl.Utf8, "kind": pl.Utf8, "valid": pl.Boolean}
    schema = {c: text.get(c, pl.Float64) for c in COLUMNS}
    return pl.DataFrame(rows, schema=schema)


def unplotted(frame: pl.DataFrame) -> list[str]:
    """Scenarios the overview cannot place: no intensity, or no headline power."""
    miss = frame.filter(pl.col("intensity_flop_per_byte").is_null() | pl.col("power_w").is_null())
    return miss["scenario"].to_list()


def _panel(data: pl.DataFrame, y: str, lo: str, hi: str, title: str, log_y: bool) -> alt.LayerChart:
    """One scatter panel (log intensity on x) with CI rules; valid filled, invalid hollow grey."""
    scale = alt.Scale(type="log") if log_y else alt.Scale(zero=False)
    base = alt.Chart(data).encode(
        x=alt.X("intensity_flop_per_byte:Q", scale=alt.Scale(type="log"), title="arithmetic intensity (flop/B)")
    )
    tooltip = ["scenario:N", "kernel:N", "valid:N", f"{y}:Q", f"{lo}:Q", f"{hi}:Q", "intensity_flop_per_byte:Q"]
    points = base.mark_point(size=40, filled=True).encode(
        y=alt.Y(f"{y}:Q", scale=scale, title=title),
        color=alt.condition("datum.valid", alt.Color("kind:N", title="kernel"), alt.value("#999999")),
        fill=alt.condition("datum.valid", alt.Color("kind:N", legend=None), alt.value("transparent")),
        tooltip=tooltip,
    )
    rules = (
        base.transform_filter(f"isValid(datum.{lo}) && isValid(datum.{hi})")
        .mark_rule(color="black", size=1)
        .encode(y=f"{lo}:Q", y2=f"{hi}:Q")
    )
    return alt.layer(rules, points).properties(width=420, height=300)


def overview_chart(results: Sequence[ScenarioResult]) -> Chart | None:
    """Headline power and energy per flop against arithmetic intensity, one point per scenario; None when no
    scenario has both an intensity and a headline power."""
    frame = overview_frame(results)
    data = frame.filter(pl.col("intensity_flop_per_byte").is_not_null() & pl.col("power_w").is_not_null())
    if data.height == 0:
        return None
    left = _panel(data, "power_w", "power_lo_w", "power_hi_w", "headline power (W)", log_y=False)
    energy = data.filter(pl.col("energy_per_flop_pj").is_not_null() & (pl.col("energy_per_flop_pj") > 0))
    n_valid = int(data["valid"].sum())
    sub = f"{data.height} scenarios ({n_valid} valid); hollow grey: invalid"
    if energy.height == 0:
        return configure(left.properties(title=_title("headline power against arithmetic intensity", sub)))
    right = _panel(energy, "energy_per_flop_pj", "energy_per_flop_lo_pj", "energy_per_flop_hi_pj", "pJ per flop", True)
    chart = alt.hconcat(left, right).properties(
        title=_title("headline power and energy per flop against arithmetic intensity", sub)
    )
    return configure(chart)


def overview_caption(results: Sequence[ScenarioResult], ci: str) -> str:
    """The caption, naming the scenarios not drawn (or saying there are none)."""
    missing = unplotted(overview_frame(results))
    shown = ", ".join(missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
    return OVERVIEW_CAPTION.format(ci=ci, missing=f"{len(missing)} ({shown})" if missing else "none")
