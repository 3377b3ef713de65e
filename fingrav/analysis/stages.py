"""File-level entry points of the bin and differentiate stages (what the Snakemake rules call).

They read the raw files of one scenario, call the pure functions (binning.bin_runs,
summarize.differentiate) and write parquet files (with the JSON record under metadata key
b"fingrav", readable with rawio.read_metadata) and summary.json.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from fingrav import rawio
from fingrav.analysis._common import TOTAL, sensor_channels
from fingrav.analysis.binning import bin_runs
from fingrav.analysis.summarize import DEFAULT_MAX_CLOCK_RESIDUAL_US, differentiate
from fingrav.errors import DataError, FingravError

logger = logging.getLogger(__name__)


# lois.parquet columns with few distinct values: dictionary-encoded; the others (times, toi_frac) are
# nearly unique, and trying a dictionary on them costs ~40 % of the write time
LOIS_DICTIONARY_COLUMNS = ("run", "golden", "role", "segment", "exec_index", "channel", "power_mw")


def write_frame(
    path: str | Path, frame: pl.DataFrame, meta: Mapping[str, Any], dictionary_columns: Sequence[str] | None = None
) -> Path:
    """Write `frame` as zstd parquet with `meta` (JSON) under metadata key b"fingrav" (atomically,
    through a temporary file). dictionary_columns: columns to dictionary-encode (None: all)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    table = frame.to_arrow()
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), rawio.META_KEY: rawio.dumps(dict(meta))})
    tmp = path.with_name(path.name + ".tmp")
    use_dict: bool | list[str] = (
        True if dictionary_columns is None else [c for c in dictionary_columns if c in frame.columns]
    )
    pq.write_table(table, tmp, compression="zstd", use_dictionary=use_dict)
    tmp.replace(path)
    logger.debug("wrote %s (%d rows)", path, frame.height)
    return path


def _read(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise DataError(f"missing input file {path}")
    return pl.read_parquet(path)


def run_bin(
    raw_dir: str | Path,
    plan_path: str | Path,
    out_path: str | Path,
    margin: float | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Bin stage: read `raw_dir`/{executions,runs}.parquet and plan.json, write the binned parquet
    (binning.BINNED_SCHEMA: run, phase, bin_exec_time_ns, ssp_exec_time_ns, golden, reason; metadata
    margin, bins {"ssp": {...}, "sse": {...}}, the SSP runs' bin_low_ns, bin_high_ns, runs_total,
    runs_golden, reasons at the top level, provenance). margin None -> plan["margin"]. Returns the
    metadata."""
    raw = Path(raw_dir)
    plan = rawio.read_json(plan_path)
    binned, meta = bin_runs(_read(raw / "executions.parquet"), _read(raw / "runs.parquet"), plan, margin)
    meta = {**meta, "provenance": dict(provenance or {})}
    write_frame(out_path, binned, meta)
    return meta


def scenario_clock(clock_reads: pl.DataFrame, calibration: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """The clock fit for a scenario and where it came from.

    Fits the scenario's own GPU-timestamp reads (raw clock.parquet) with fingrav.clocksync.fit_clock
    ("scenario"); falls back to calibration.json's "clock" ("calibration") when clocksync is not
    available or the fit fails."""
    if clock_reads.height:
        try:
            from fingrav.clocksync import fit_clock
            from fingrav.device.common import ClockReads

            reads = ClockReads(
                clock_reads["host_before_ns"].to_numpy().astype("int64"),
                clock_reads["gpu_ns"].to_numpy().astype("int64"),
                clock_reads["host_after_ns"].to_numpy().astype("int64"),
            )
            fit = fit_clock(reads)
            return dict(fit.to_dict()), "scenario"
        except ImportError:
            logger.warning("fingrav.clocksync not available: using the calibration clock fit")
        except (FingravError, ValueError, np.linalg.LinAlgError) as err:
            logger.warning("scenario clock fit failed (%s): using the calibration clock fit", err)
    clk = calibration.get("clock")
    if not isinstance(clk, Mapping):
        raise DataError("no clock fit: the scenario's clock reads cannot be fitted and calibration.json has no 'clock'")
    return dict(clk), "calibration"


def scenario_sensor(calibration: Mapping[str, Any], plan: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per-channel sensor parameters (ns keys): calibration.json "sensor" (flat or per channel,
    `*_ms` keys converted), the total channel's missing keys filled from plan["sensor"]."""
    per = sensor_channels(calibration.get("sensor") or {}) if calibration.get("sensor") else {}
    planned = sensor_channels(plan.get("sensor") or {}).get(TOTAL, {})
    total = {**planned, **{k: v for k, v in per.get(TOTAL, {}).items() if v is not None}}
    return {TOTAL: total, **{ch: d for ch, d in per.items() if ch != TOTAL}}


def run_differentiate(
    raw_dir: str | Path,
    binned_path: str | Path,
    calibration_json: str | Path,
    truth_path: str | Path | None,
    analysis_cfg: Mapping[str, Any],
    out_dir: str | Path,
    provenance: Mapping[str, Any] | None = None,
    max_clock_residual_us: float | None = None,
    scenario: str | None = None,
) -> dict[str, Any]:
    """Differentiate stage: read the raw files of one scenario (`raw_dir`, named after the scenario unless
    `scenario` names it: rank k of a multi-GPU sweep reads raw/<scenario>/rank<k>/),
    the binned parquet, calibration.json and the truth parquet (simulator; None otherwise); write
    `out_dir`/lois.parquet and `out_dir`/summary.json. Returns the summary dict.

    analysis_cfg: AnalysisConfig dict, plus optionally max_clock_residual_us (µs).
    max_clock_residual_us: the clock_residual limit; None -> analysis_cfg["max_clock_residual_us"],
    else calibration.json "max_clock_residual_us", else 20 µs."""
    raw = Path(raw_dir)
    out = Path(out_dir)
    plan = rawio.read_json(raw / "plan.json")
    calibration = rawio.read_json(calibration_json)
    samples_path = raw / "samples.parquet"
    samples = _read(samples_path)
    samples_meta = rawio.read_metadata(samples_path)
    binned_path = Path(binned_path)
    binned = _read(binned_path)
    binning_meta = {k: v for k, v in rawio.read_metadata(binned_path).items() if k != "provenance"}
    clock, clock_source = scenario_clock(_read(raw / "clock.parquet"), calibration)
    if max_clock_residual_us is None:
        max_clock_residual_us = float(
            analysis_cfg.get("max_clock_residual_us")
            or calibration.get("max_clock_residual_us")
            or DEFAULT_MAX_CLOCK_RESIDUAL_US
        )
    truth = _read(Path(truth_path)) if truth_path is not None else None
    raw_prov = rawio.read_metadata(raw / "executions.parquet")
    raw_prov = raw_prov.get("provenance", raw_prov) if isinstance(raw_prov, Mapping) else {}
    prov = {**dict(provenance or {}), "clock_source": clock_source, "raw": raw_prov}
    device = raw_prov.get("device") if isinstance(raw_prov.get("device"), Mapping) else {}
    backend = device.get("backend")

    lois, summary = differentiate(
        _read(raw / "executions.parquet"),
        _read(raw / "runs.parquet"),
        samples,
        plan,
        binned,
        clock,
        scenario_sensor(calibration, plan),
        analysis_cfg,
        truth,
        scenario=scenario or raw.name,
        backend=str(backend) if backend is not None else None,
        gaps=samples_meta.get("gaps") or (),
        max_clock_residual_us=max_clock_residual_us,
        binning=binning_meta,
        provenance=prov,
    )
    write_frame(
        out / "lois.parquet",
        lois,
        {
            "scenario": summary["scenario"],
            "clock": summary["clock"],
            "clock_source": clock_source,
            "delay_correction_ns": summary["sensor"]["delay_correction_ns"],
            "provenance": dict(provenance or {}),
        },
        dictionary_columns=LOIS_DICTIONARY_COLUMNS,
    )
    rawio.write_json(out / "summary.json", summary)
    logger.info("wrote %s and summary.json (%d LOIs)", out / "lois.parquet", lois.height)
    return summary
