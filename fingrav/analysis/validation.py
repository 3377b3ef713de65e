"""Validation against the simulator's ground truth (truth parquet, rawio.SCHEMAS["truth"]).

Truth of a group = mean over golden runs of the per-run mean true power of the executions of that
group (groups as in profiles.group_exprs: SSP truth = the SSP-tail executions). Errors are signed,
in % of truth: (measured - truth) / truth * 100.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import polars as pl

from fingrav.analysis._common import TOTAL, PlanView
from fingrav.analysis.profiles import GROUPS, group_exprs

logger = logging.getLogger(__name__)


def truth_by_group(truth: pl.DataFrame, binned: pl.DataFrame, plan: Mapping[str, Any]) -> pl.DataFrame:
    """channel, group, power_mw, energy_mj: mean over golden runs of per-run means."""
    view = PlanView.from_plan(plan)
    golden = binned.filter(pl.col("golden")).select(pl.col("run").cast(pl.Int32))
    t = truth.with_columns(pl.col("run").cast(pl.Int32)).join(golden, on="run", how="semi")
    frames = []
    for g, expr in group_exprs(view).items():
        frames.append(
            t.filter(expr)
            .group_by("channel", "run")
            .agg(pl.col("power_mw").mean(), pl.col("energy_mj").mean())
            .group_by("channel")
            .agg(pl.col("power_mw").mean(), pl.col("energy_mj").mean())
            .with_columns(group=pl.lit(g))
        )
    return pl.concat(frames).select("channel", "group", "power_mw", "energy_mj").sort("channel", "group")


def _err(measured: float | None, true: float | None) -> float | None:
    if measured is None or true is None or true == 0:
        return None
    return (measured - true) / true * 100.0


def validate(
    truth: pl.DataFrame,
    binned: pl.DataFrame,
    plan: Mapping[str, Any],
    ssp_power_mw: float | None,
    sse_power_mw: float | None,
    energy_per_exec_mj: float | None,
    interleaved_power_mw: float | None = None,
) -> dict[str, Any]:
    """Truth numbers and signed errors (% of truth).

    Returns {"groups": {channel: {group: truth_mw}}, truth_ssp_power_w, truth_sse_power_w,
    truth_interleaved_power_w, truth_energy_per_exec_mj, ssp_error_pct, sse_error_pct,
    interleaved_error_pct, energy_error_pct} (None where not available)."""
    tb = truth_by_group(truth, binned, plan)
    groups: dict[str, dict[str, float]] = {}
    for row in tb.iter_rows(named=True):
        if row["power_mw"] is not None:
            groups.setdefault(row["channel"], {})[row["group"]] = float(row["power_mw"])

    def total(g: str, col: str = "power_mw") -> float | None:
        hit = tb.filter((pl.col("channel") == TOTAL) & (pl.col("group") == g))
        v = hit[col].item() if hit.height else None
        return float(v) if v is not None else None

    t_ssp, t_sse = total("ssp"), total("sse")
    t_first = total("first") if PlanView.from_plan(plan).predecessor_count > 0 else None
    t_energy = total("ssp", "energy_mj")
    out = {
        "groups": {ch: {g: v for g, v in d.items() if g in GROUPS} for ch, d in groups.items()},
        "truth_ssp_power_w": t_ssp / 1e3 if t_ssp is not None else None,
        "truth_sse_power_w": t_sse / 1e3 if t_sse is not None else None,
        "truth_interleaved_power_w": t_first / 1e3 if t_first is not None else None,
        "truth_energy_per_exec_mj": t_energy,
        "ssp_error_pct": _err(ssp_power_mw, t_ssp),
        "sse_error_pct": _err(sse_power_mw, t_sse),
        "interleaved_error_pct": _err(interleaved_power_mw, t_first),
        "energy_error_pct": _err(energy_per_exec_mj, t_energy),
    }
    logger.info("validation: ssp error %s %%, sse error %s %%, energy error %s %%",
                out["ssp_error_pct"], out["sse_error_pct"], out["energy_error_pct"])
    return out
