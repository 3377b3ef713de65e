"""Stage report: summary.csv (`fingrav.contracts.summary`), the figures and index.html of a sweep.

Shows what the analysis computed (profiles/gpu<k>/<scenario>/summary.json, lois.parquet, combined JSON);
recomputes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fingrav.layout import SweepLayout
from fingrav.provenance import provenance
from fingrav.stages.params import ReportParams, parse_params

logger = logging.getLogger(__name__)


def run(
    layout: SweepLayout,
    scenarios: Sequence[str],
    meta: Mapping[str, Any],
    world_size: int = 1,
    cards: Mapping[str, Sequence[int]] | None = None,
) -> list[Path]:
    """Write summary.csv and report/index.html (+ figures); returns their paths. `cards`: a sweep over listed GPUs
    (scenario -> the GPUs it ran on, `fingrav.config.SweepConfig.gpus_of`)."""
    from fingrav.report import build_report

    meta = {**meta, "provenance": provenance(stage="report", config_hash=meta.get("config_hash")).to_json()}
    return build_report(layout, list(scenarios), meta, world_size, cards=cards)


def from_params(p: dict[str, Any]) -> None:
    """Rule report (`fingrav.stages.params.ReportParams`)."""
    q = parse_params(ReportParams, p, "report")
    run(q.layout, q.scenarios, q.meta.model_dump(exclude_unset=True), q.world_size, q.cards)
