"""Stage combine (several GPUs): per-GPU numbers and the combined power of every GPU of one scenario.

Reads every GPU's `profiles/gpu<k>/<scenario>/{summary.json,lois.parquet}`, writes
`profiles/combined/<scenario>.json` (`fingrav.analysis.combine`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import polars as pl

from fingrav import rawio
from fingrav.analysis.combine import combine_ranks
from fingrav.config import AnalysisConfig, config_hash
from fingrav.contracts.profile import ScenarioSummary
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.provenance import provenance
from fingrav.stages.bin import read_frame
from fingrav.stages.params import CombineParams, parse_params

logger = logging.getLogger(__name__)


def run(layout: SweepLayout, scenario: str, world_size: int, analysis: AnalysisConfig) -> Path:
    """Combine GPUs 0 .. world_size - 1 of `scenario`; returns the combined JSON path."""
    summaries: list[ScenarioSummary] = []
    lois: list[pl.DataFrame] = []
    for k in range(world_size):
        for path in (layout.summary_json(scenario, k), layout.lois(scenario, k)):
            if not path.exists():
                raise DataError(f"{path}: missing; run differentiate for GPU {k} of {scenario!r} first")
        summaries.append(rawio.read_model(layout.summary_json(scenario, k), ScenarioSummary))
        lois.append(read_frame(layout.lois(scenario, k)).select(["run", "golden", "role", "channel", "power_mw"]))
    out = combine_ranks(summaries, lois, analysis)
    out = out.model_copy(update={"provenance": provenance(stage="combine", config_hash=config_hash(analysis))})
    path = rawio.write_json(layout.combined(scenario), out.model_dump(mode="json"))
    c = out.combined
    shown = [f"{v:.4g}" if v is not None else "n/a" for v in (c.power.value, c.power.ci_low, c.power.ci_high)]
    logger.info("combine %s: %d GPUs, power %s W [%s, %s], valid=%s", scenario, world_size, *shown, c.valid)
    return path


def from_params(p: dict[str, Any]) -> None:
    """Rule combine (`fingrav.stages.params.CombineParams`)."""
    q = parse_params(CombineParams, p, "combine")
    run(q.layout, q.scenario, q.world_size, q.analysis)
