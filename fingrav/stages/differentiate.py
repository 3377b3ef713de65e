"""Stage differentiate: LOIs, profiles, SSE vs SSP, energy and flags of one scenario on one GPU
(METHOD.md steps 7-9).

Reads the raw files, the binned runs and the GPU's calibration; writes `profiles/gpu<k>/<scenario>/lois.parquet`
(`fingrav.contracts.tables.LOIS`) and `summary.json` (its "row" is the scenario's summary.csv row,
`fingrav.contracts.summary`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from fingrav import rawio
from fingrav.analysis.differentiate import differentiate
from fingrav.analysis.telemetry import telemetry_summary
from fingrav.config import AnalysisConfig, config_hash
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.tables import LOIS_DICTIONARY_COLUMNS, SamplesRecord
from fingrav.errors import FingravError
from fingrav.layout import TELEMETRY_FILE, SweepLayout
from fingrav.provenance import provenance
from fingrav.stages.bin import read_frame, read_plan
from fingrav.stages.params import DifferentiateParams, parse_params

logger = logging.getLogger(__name__)


def scenario_clock(clock_reads: Any, calibration: Calibration) -> tuple[ClockMap, str]:
    """The clock map of a scenario and where it came from: a fit of the scenario's own GPU-timestamp reads
    (raw clock.parquet, "scenario"), else the calibration's ("calibration")."""
    from fingrav.clocksync import fit_clock
    from fingrav.device.base import ClockReads

    if clock_reads.height:
        # the bursts (back-to-back reads at the start and the end, ~20 us round trips) place the GPU clock best;
        # the one read before each run comes after an idle and takes ~100-150 us with an asymmetric delay, which
        # biases its midpoint by tens of us: when bursts span the scenario, they alone are fitted
        if "source" in clock_reads.columns:
            bursts = clock_reads.filter(pl.col("source") == "burst")
            span = (bursts["gpu_ns"].max() - bursts["gpu_ns"].min()) if bursts.height else 0
            whole = clock_reads["gpu_ns"].max() - clock_reads["gpu_ns"].min()
            if bursts.height >= 8 and whole and span >= 0.9 * whole:
                clock_reads = bursts
        try:
            reads = ClockReads(
                clock_reads["host_before_ns"].to_numpy().astype("int64"),
                clock_reads["gpu_ns"].to_numpy().astype("int64"),
                clock_reads["host_after_ns"].to_numpy().astype("int64"),
            )
            return ClockMap.from_record(fit_clock(reads).to_dict()), "scenario"
        except (FingravError, ValueError, np.linalg.LinAlgError) as err:
            logger.warning("scenario clock fit failed (%s): using the calibration clock fit", err)
    return calibration.clock_map, "calibration"


def scenario_sensors(calibration: Calibration, plan: Plan) -> dict[str, SensorModel]:
    """Every channel's calibrated sensor; the total channel's unknown timing filled from the plan's."""
    total = calibration.total
    fill = {k: float(v) for k, v in plan.sensor.model_dump().items() if getattr(total, k) is None}
    return {TOTAL: total.model_copy(update=fill), **{ch: s for ch, s in calibration.sensor.items() if ch != TOTAL}}


def run(
    layout: SweepLayout,
    scenario: str,
    rank: int,
    analysis: AnalysisConfig,
    max_clock_residual_us: float,
    with_truth: bool,
) -> list[Path]:
    """Differentiate one scenario on GPU `rank`; returns [lois.parquet, summary.json]."""
    raw = layout.scenario_dir(scenario, rank)
    rawio.require_manifest(raw)  # a damaged, altered or unlisted raw file stops here, named
    plan = read_plan(raw / "plan.json")
    calibration = scenario_calibration(layout, scenario, rank)
    samples_path = raw / "samples.parquet"
    binned_path = layout.binned(scenario, rank)
    binning = BinningSummary.model_validate(
        {k: v for k, v in rawio.read_metadata(binned_path).items() if k != "provenance"}
    )
    clock, clock_source = scenario_clock(read_frame(raw / "clock.parquet"), calibration)
    truth = read_frame(layout.truth(scenario, rank)) if with_truth else None
    readings_path = layout.reading_truth(scenario, rank)
    reading_truth = read_frame(readings_path) if with_truth and readings_path.exists() else None
    raw_prov = rawio.read_provenance(raw / "executions.parquet")
    prov = provenance(
        stage="differentiate", config_hash=config_hash(analysis), rank=rank, clock_source=clock_source, raw=raw_prov
    )
    backend = raw_prov.device.backend if raw_prov.device is not None else None
    lois, summary = differentiate(
        read_frame(raw / "executions.parquet"),
        read_frame(raw / "runs.parquet"),
        read_frame(samples_path),
        plan,
        read_frame(binned_path),
        clock,
        scenario_sensors(calibration, plan),
        analysis,
        truth,
        reading_truth=reading_truth,
        max_clock_residual_us=max_clock_residual_us,
        scenario=scenario,
        backend=str(backend) if backend is not None else None,
        gaps=SamplesRecord.model_validate(rawio.read_metadata(samples_path)).gaps,
        binning=binning,
        provenance=prov,
    )
    if (raw / TELEMETRY_FILE).exists():
        summary = summary.model_copy(update={"telemetry": telemetry_summary(read_frame(raw / TELEMETRY_FILE))})
    return write_outputs(layout, scenario, rank, lois, summary, clock_source, prov)


def scenario_calibration(layout: SweepLayout, scenario: str, rank: int) -> Calibration:
    """The calibration of the GPU that measured the scenario: its own (a sweep over listed GPUs), else GPU
    `rank`'s."""
    own = layout.scenario_calibration(scenario, rank)
    return rawio.read_model(own if own.exists() else layout.calibration_json(rank), Calibration)


def write_outputs(
    layout: SweepLayout,
    scenario: str,
    rank: int,
    lois: pl.DataFrame,
    summary: ScenarioSummary,
    clock_source: str,
    prov: Provenance,
) -> list[Path]:
    """Write lois.parquet (with the clock, the delay correction and the provenance as metadata) and summary.json;
    returns their paths."""
    lois_path, summary_path = layout.lois(scenario, rank), layout.summary_json(scenario, rank)
    meta = {
        "scenario": scenario,
        "rank": rank,
        "clock": summary.clock,
        "clock_source": clock_source,
        "delay_correction_ns": summary.sensor.delay_correction_ns,
        "provenance": prov,
    }
    rawio.write_arrow(lois_path, lois.to_arrow(), meta, dictionary_columns=LOIS_DICTIONARY_COLUMNS)
    rawio.write_json(summary_path, summary)
    logger.info("wrote %s and summary.json (%d LOIs)", lois_path, lois.height)
    return [lois_path, summary_path]


def from_params(p: dict[str, Any]) -> None:
    """Rule differentiate (`fingrav.stages.params.DifferentiateParams`)."""
    q = parse_params(DifferentiateParams, p, "differentiate")
    run(q.layout, q.scenario, q.rank, q.analysis, q.max_clock_residual_us, q.with_truth)
