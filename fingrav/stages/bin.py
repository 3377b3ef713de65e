"""Stage bin: golden runs of one scenario on one GPU (METHOD.md step 6).

Reads `raw/gpu<k>/<scenario>/{executions,runs}.parquet` + `plan.json`, writes `binned/gpu<k>/<scenario>.parquet`
(`fingrav.contracts.tables.BINNED`; metadata: margin, per-kind bins, provenance). The margin is an analysis
parameter (`analysis.margin`; unset: METHOD.md's guidance table for the measured kernel time).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import polars as pl

from fingrav import rawio
from fingrav.analysis.binning import bin_runs
from fingrav.config import AnalysisConfig, config_hash
from fingrav.contracts.plan import Plan
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.provenance import provenance
from fingrav.stages.params import BinParams, parse_params

logger = logging.getLogger(__name__)


def read_frame(path: Path) -> pl.DataFrame:
    """A parquet table as a polars frame; DataError naming the file when it is missing or unreadable."""
    from fingrav.layout import rerun_hint

    if not path.exists():
        raise DataError(f"missing input file {path}{rerun_hint(path)}")
    try:
        return pl.read_parquet(path)
    except Exception as err:  # polars raises several error types for a damaged file; name the file once
        raise DataError(f"{path}: cannot be read as parquet ({err}): damaged or truncated{rerun_hint(path)}") from None


def read_plan(path: Path) -> Plan:
    """plan.json; DataError naming the file and field when it does not match the contract."""
    return rawio.read_model(path, Plan)


def run(layout: SweepLayout, scenario: str, rank: int, analysis: AnalysisConfig) -> Path:
    """Bin one scenario's runs on GPU `rank`; returns the binned parquet path."""
    raw = layout.scenario_dir(scenario, rank)
    rawio.require_manifest(raw)  # a damaged, altered or unlisted raw file stops here, named
    plan = read_plan(raw / "plan.json")
    margin = plan.margin_for_binning(analysis.margin)
    binned, binning = bin_runs(read_frame(raw / "executions.parquet"), read_frame(raw / "runs.parquet"), plan, margin)
    source = "analysis.margin" if analysis.margin is not None else "guidance table"
    binning = binning.model_copy(update={"margin_source": source})
    prov = provenance(stage="bin", config_hash=config_hash({"margin": analysis.margin}), rank=rank)
    out = layout.binned(scenario, rank)
    meta = {**binning.model_dump(mode="json", exclude={"format_version"}), "provenance": prov}
    rawio.write_arrow(out, binned.to_arrow(), meta)
    return out


def from_params(p: dict[str, Any]) -> None:
    """Rule bin (`fingrav.stages.params.BinParams`)."""
    q = parse_params(BinParams, p, "bin")
    run(q.layout, q.scenario, q.rank, q.analysis)
