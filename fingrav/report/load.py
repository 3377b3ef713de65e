"""Reading what the earlier stages wrote, for the report (polars). Every path comes from
`fingrav.layout.SweepLayout`: `profiles/gpu<k>/<scenario>/{summary.json,lois.parquet}`,
`binned/gpu<k>/<scenario>.parquet`, `raw/gpu<k>/<scenario>/{executions,runs,samples}.parquet` + `plan.json`
and `calibration/gpu<k>.json`. Optional inputs (LOIs, raw data, binning, calibration) come back as None when
missing, so that the report can say what it could not show instead of failing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import polars as pl
from pydantic import ValidationError

from fingrav.contracts import roles as R
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import ScenarioResult
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import ms_to_ns
from fingrav.errors import DataError
from fingrav.layout import SweepLayout

logger = logging.getLogger(__name__)

LOI_COLUMNS: Final[tuple[str, ...]] = (
    "run",
    "golden",
    "role",
    "segment",
    "exec_index",
    "channel",
    "t_ns",
    "exec_start_ns",
    "toi_ns",
    "toi_frac",
    "power_mw",
)


@dataclass
class ScenarioData:
    """One scenario's summary.json on one GPU (`rank`) and where its other files are (`layout`).

    `name` is what the report shows (GPU k > 0 of a multi-GPU sweep: "<scenario> (GPU k)"); `scenario` is the
    scenario's file name (defaults to `name`); `result` its typed result (`fingrav.contracts.result`), which the
    report reads by its groups (`result.headline.power`, `result.ssp`, ...), never by column name."""

    name: str
    summary: ScenarioSummary
    layout: SweepLayout
    rank: int = 0
    scenario: str = ""

    def __post_init__(self) -> None:
        self.scenario = self.scenario or self.name

    @property
    def result(self) -> ScenarioResult:
        return self.summary.result

    @property
    def lois_path(self) -> Path:
        return self.layout.lois(self.scenario, self.rank)

    @property
    def raw_dir(self) -> Path:
        return self.layout.scenario_dir(self.scenario, self.rank)

    @property
    def binned_path(self) -> Path:
        return self.layout.binned(self.scenario, self.rank)

    @property
    def channels(self) -> list[str]:
        """Channels of the profile, "total" first."""
        return [R.TOTAL, *(c for c in self.summary.channels if c != R.TOTAL)]

    @property
    def valid(self) -> bool:
        return self.summary.valid

    @property
    def has_predecessor(self) -> bool:
        """Whether the scenario runs a predecessor before the measured kernel."""
        return self.summary.plan.predecessor_count > 0

    @property
    def flags(self) -> list[str]:
        return list(self.summary.flags)

    @property
    def sse_measurable(self) -> bool:
        """Whether the SSE numbers can be shown: enough SSE LOIs (no too_few_lois_sse flag)."""
        return "too_few_lois_sse" not in self.summary.flags

    @property
    def has_reference(self) -> bool:
        """Whether the scenario has a reference-run power."""
        return self.summary.result.sustained.reference_power.has_value


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise DataError(f"{path}: not valid JSON ({err})") from None


def _field(loc: Sequence[int | str]) -> str:
    """A pydantic error location as a dotted field name ("plan.runs", "channels.total.ssp.mean_mw")."""
    return ".".join(str(p) for p in loc) or "(top level)"


def read_summary(path: Path) -> ScenarioSummary:
    """summary.json as its typed model; a malformed or invalid file is a DataError naming the file and the
    offending field(s)."""
    from fingrav import rawio

    return rawio.read_model(path, ScenarioSummary)


def load_scenario(layout: SweepLayout, scenario: str, rank: int = 0, name: str | None = None) -> ScenarioData:
    """One scenario's summary.json on GPU `rank`. A missing, malformed or invalid one is a DataError."""
    path = layout.summary_json(scenario, rank)
    if not path.exists():
        raise DataError(f"{path}: missing; run the differentiate stage for scenario {scenario!r} first")
    summary = read_summary(path)
    return ScenarioData(name=name or scenario, summary=summary, layout=layout, rank=rank, scenario=scenario)


def load_scenarios(layout: SweepLayout, scenarios: Sequence[str], rank: int = 0) -> list[ScenarioData]:
    """Every scenario's summary.json on GPU `rank`, in the given order."""
    return [load_scenario(layout, name, rank) for name in scenarios]


def _calibration_record(data: Any) -> Any:
    """A calibration file's JSON with sensor records from before the ns contract (`*_ms` keys) in ns."""
    if not isinstance(data, dict) or not isinstance(data.get("sensor"), dict):
        return data
    sensor = {
        ch: SensorModel.from_ms_record(rec) if isinstance(rec, dict) and any(k.endswith("_ms") for k in rec) else rec
        for ch, rec in data["sensor"].items()
    }
    return {**data, "sensor": sensor}


def load_calibration(layout: SweepLayout, rank: int = 0) -> Calibration | None:
    """calibration/gpu<k>.json as its typed model (`fingrav.contracts.calibration.Calibration`), or None when the
    sweep has none or it is not a calibration (logged: the report then shows no calibration)."""
    path = layout.calibration_json(rank)
    if not path.exists():
        logger.info("%s: not found; the report shows no calibration", path)
        return None
    try:
        return Calibration.model_validate(_calibration_record(_read_json(path)))
    except (DataError, ValidationError) as err:
        logger.warning("%s: not a calibration (%s); the report shows no calibration", path, str(err).splitlines()[0])
        return None


def load_lois(
    path: Path,
    *,
    golden_only: bool,
    roles: Sequence[str] | None = None,
    channels: Sequence[str] | None = None,
) -> pl.DataFrame | None:
    """LOIs of a scenario (lois.parquet: ns, mW), filtered; role, segment and channel as String; None when the
    file is missing."""
    if not path.exists():
        logger.info("%s: not found", path)
        return None
    try:  # the footer's schema alone (~0.1 ms; a lazy scan's collect_schema: ~1-30 ms)
        names = list(pl.read_parquet_schema(path))
        lf = pl.scan_parquet(path)
    except Exception as err:  # a damaged or truncated file: named, with what to do
        from fingrav.layout import rerun_hint

        raise DataError(f"{path}: cannot be read as parquet ({err}): damaged or truncated{rerun_hint(path)}") from None
    missing = [c for c in ("run", "golden", "role", "channel", "toi_ns", "toi_frac", "power_mw") if c not in names]
    if missing:
        raise DataError(f"{path}: missing columns {missing}")
    if golden_only:
        lf = lf.filter(pl.col("golden"))
    if roles is not None:
        lf = lf.filter(pl.col("role").cast(pl.String).is_in(list(roles)))
    if channels is not None:
        lf = lf.filter(pl.col("channel").cast(pl.String).is_in(list(channels)))
    text = [pl.col(c).cast(pl.String) for c in ("role", "segment", "channel") if c in names]  # Enum -> String
    return lf.select([c for c in LOI_COLUMNS if c in names]).with_columns(text).collect()


def fair_quotas(sizes: Sequence[int], budget: int) -> list[int]:
    """Split `budget` over groups of these sizes: small groups keep everything, the rest share equally."""
    quotas = [0] * len(sizes)
    remaining = max(budget, 0)
    order = sorted(range(len(sizes)), key=lambda i: sizes[i])
    for k, i in enumerate(order):
        share = remaining // (len(sizes) - k)
        quotas[i] = min(sizes[i], share)
        remaining -= quotas[i]
    return quotas


def subsample(df: pl.DataFrame, max_points: int, by: Sequence[str], seed: int = 0) -> pl.DataFrame:
    """At most `max_points` rows, spread fairly over the groups `by` (deterministic for a given input)."""
    if df.height <= max_points:
        return df
    groups = df.partition_by(list(by), maintain_order=True)
    quotas = fair_quotas([g.height for g in groups], max_points)
    parts = [g if q >= g.height else g.sample(n=q, seed=seed) for g, q in zip(groups, quotas, strict=True)]
    logger.debug("subsampled %d -> %d rows", df.height, sum(quotas))
    return pl.concat(parts)


def read_parquet(path: Path) -> pl.DataFrame:
    """A parquet file as a frame; DataError naming the file (and the job that rewrites it) when it is damaged."""
    from fingrav.stages.bin import read_frame

    return read_frame(path)


def load_binned(path: Path) -> tuple[pl.DataFrame, BinningSummary | None] | None:
    """binned/<scenario>.parquet and its binning record (`fingrav.contracts.binning.BinningSummary`: margin, the
    bins' bounds and counts; None when the metadata is not one); None if the file is missing."""
    if not path.exists():
        return None
    from fingrav.rawio import read_metadata

    meta = {k: v for k, v in read_metadata(path).items() if k != "provenance"}
    try:
        binning = BinningSummary.model_validate(meta)
    except ValidationError as err:
        logger.warning("%s: binning metadata not read (%s)", path, str(err).splitlines()[0])
        binning = None
    return read_parquet(path), binning


def load_raw(raw_dir: Path) -> dict[str, pl.DataFrame] | None:
    """raw executions, runs and samples of a scenario; None when any is missing."""
    out = {}
    for kind in ("executions", "runs", "samples"):
        path = raw_dir / f"{kind}.parquet"
        if not path.exists():
            logger.info("%s: not found; no timeline figure", path)
            return None
        out[kind] = read_parquet(path)
    return out


def sensor_ns(params: Mapping[str, Any]) -> dict[str, Any]:
    """A channel's sensor record with every time in ns: `*_ns` keys as they are, `*_ms` keys (calibration files
    from before the ns contract) converted; other keys (noise_mw, flags, ...) unchanged."""
    out: dict[str, Any] = {}
    for k, v in params.items():
        if k.endswith("_ms") and isinstance(v, int | float) and not isinstance(v, bool):
            out.setdefault(k[:-3] + "_ns", ms_to_ns(v))
        elif k.endswith("_ms"):
            continue
        else:
            out[k] = v
    return out


def clock_map(scn: ScenarioData, calibration: Calibration | None) -> ClockMap | None:
    """The clock fit used for a scenario: summary.json "clock", else the calibration's; None without one."""
    rec = scn.summary.clock
    if isinstance(rec, dict) and "offset_ns" in rec and "gpu_ref_ns" in rec:
        return ClockMap.from_record(rec)
    return calibration.clock_map if calibration is not None else None
