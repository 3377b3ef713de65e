"""Stage fleet (device.gpus with device.fleet): the card-to-card spread of one scenario over the listed GPUs.

Reads every listed GPU's `cards/<i>/profiles/gpu0/<scenario>/summary.json`, writes `profiles/fleet/<scenario>.json`
(`fingrav.analysis.fleet`; `fingrav.layout`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.analysis.fleet import fleet_spread
from fingrav.config import AnalysisConfig, config_hash
from fingrav.contracts.profile import ScenarioSummary
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.provenance import provenance
from fingrav.stages.params import FleetParams, parse_params

logger = logging.getLogger(__name__)


def run(layout: SweepLayout, scenario: str, gpus: Sequence[int], analysis: AnalysisConfig) -> Path:
    """The spread of `scenario` over the listed GPUs `gpus` (in the sweep's order); returns the fleet JSON path."""
    summaries: dict[int, ScenarioSummary] = {}
    for g in gpus:
        path = layout.card(g).summary_json(scenario)
        if not path.exists():
            raise DataError(f"{path}: missing; run differentiate for GPU {g} of {scenario!r} first")
        summaries[int(g)] = rawio.read_model(path, ScenarioSummary)
    out = fleet_spread(summaries, analysis, scenario)
    out = out.model_copy(update={"provenance": provenance(stage="fleet", config_hash=config_hash(analysis))})
    return rawio.write_json(layout.fleet(scenario), out.model_dump(mode="json"))


def from_params(p: dict[str, Any]) -> None:
    """Rule fleet (`fingrav.stages.params.FleetParams`)."""
    q = parse_params(FleetParams, p, "fleet")
    run(q.layout, q.scenario, q.gpus, q.analysis)
