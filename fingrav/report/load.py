"""Reading what the earlier stages wrote, for the report (polars).

Everything here follows docs/ARCHITECTURE.md: `profiles/<scenario>/{summary.json,lois.parquet}`,
`binned/<scenario>.parquet`, `raw/<scenario>/{executions,runs,samples}.parquet` + `plan.json` and
`calibration.json`. Optional inputs (LOIs, raw data, binning, calibration) come back as None when
missing, so that the report can say what it could not show instead of failing.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from fingrav.errors import DataError

logger = logging.getLogger(__name__)

ROLE_ORDER: tuple[str, ...] = ("pred", "warmup", "first", "sse", "ssp")
LOI_COLUMNS: tuple[str, ...] = (
    "run", "golden", "role", "segment", "exec_index", "channel", "t_ns", "exec_start_ns", "toi_ns", "toi_frac",
    "power_mw",
)


@dataclass
class ScenarioData:
    """One scenario's summary.json and where its other files are."""

    name: str
    summary: dict[str, Any]
    sweep_dir: Path
    row: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Take the row from the summary and make sure it names the scenario."""
        if not self.row:
            self.row = dict(self.summary.get("row") or {})
        self.row.setdefault("scenario", self.name)

    @property
    def lois_path(self) -> Path:
        """profiles/<scenario>/lois.parquet."""
        return self.sweep_dir / "profiles" / self.name / "lois.parquet"

    @property
    def raw_dir(self) -> Path:
        """raw/<scenario>/."""
        return self.sweep_dir / "raw" / self.name

    @property
    def binned_path(self) -> Path:
        """binned/<scenario>.parquet."""
        return self.sweep_dir / "binned" / f"{self.name}.parquet"

    @property
    def channels(self) -> list[str]:
        """Channels of the profile, "total" first."""
        chans = list((self.summary.get("channels") or {}).keys())
        if "total" in chans:
            chans.remove("total")
        return ["total", *chans]

    @property
    def plan(self) -> dict[str, Any]:
        """plan.json as copied into summary.json, else raw/<scenario>/plan.json, else {}."""
        plan = self.summary.get("plan")
        if isinstance(plan, dict) and plan:
            return plan
        path = self.raw_dir / "plan.json"
        if path.exists():
            return dict(json.loads(path.read_text()))
        return {}

    @property
    def valid(self) -> bool:
        """The row's validity (True when not stated)."""
        return bool(self.row.get("valid", True))

    @property
    def has_predecessor(self) -> bool:
        """Whether the scenario runs a predecessor before the measured kernel."""
        pred = self.row.get("predecessor")
        if pred not in (None, "", "none", "None"):
            return True
        return int(self.plan.get("predecessor_count") or 0) > 0

    @property
    def flags(self) -> list[str]:
        """The row's flags as a list."""
        flags = self.row.get("flags", self.summary.get("flags"))
        if flags is None:
            return []
        if isinstance(flags, str):
            return [f for f in flags.split(";") if f]
        return [str(f) for f in flags]

    @property
    def sse_measurable(self) -> bool:
        """Whether the SSE numbers can be shown: enough SSE LOIs (no too_few_lois_sse flag)."""
        return "too_few_lois_sse" not in self.flags

    @property
    def has_reference(self) -> bool:
        """Whether the scenario has a reference-run power."""
        v = self.row.get("reference_power_w")
        return isinstance(v, int | float) and not isinstance(v, bool) and v == v

    def role_stats(self, channel: str, role: str) -> dict[str, Any] | None:
        """summary.json channels[channel][role] ({mean_mw, ci_low_mw, ci_high_mw, lois, fit_coeffs, ...})."""
        stats = (self.summary.get("channels") or {}).get(channel, {}).get(role)
        return stats if isinstance(stats, dict) else None


def load_scenarios(sweep_dir: Path, scenarios: Sequence[str]) -> list[ScenarioData]:
    """Every scenario's summary.json, in the given order. A missing one is a DataError."""
    out = []
    for name in scenarios:
        path = sweep_dir / "profiles" / name / "summary.json"
        if not path.exists():
            raise DataError(f"{path}: missing; run the differentiate stage for scenario {name!r} first")
        try:
            summary = json.loads(path.read_text())
        except json.JSONDecodeError as err:
            raise DataError(f"{path}: not valid JSON ({err})") from None
        if not isinstance(summary, dict) or not isinstance(summary.get("row"), dict):
            raise DataError(f"{path}: expected an object with a 'row' object")
        out.append(ScenarioData(name=name, summary=summary, sweep_dir=sweep_dir))
    return out


def load_calibration(sweep_dir: Path) -> dict[str, Any] | None:
    """calibration.json, or None when the sweep has none."""
    path = sweep_dir / "calibration.json"
    if not path.exists():
        logger.info("%s: not found; the report shows no calibration", path)
        return None
    try:
        cal = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        logger.warning("%s: not valid JSON (%s); the report shows no calibration", path, err)
        return None
    return cal if isinstance(cal, dict) else None


def load_lois(
    path: Path,
    *,
    golden_only: bool,
    roles: Sequence[str] | None = None,
    channels: Sequence[str] | None = None,
) -> pl.DataFrame | None:
    """LOIs of a scenario (lois.parquet), filtered; None when the file is missing."""
    if not path.exists():
        logger.info("%s: not found", path)
        return None
    lf = pl.scan_parquet(path)
    names = lf.collect_schema().names()
    missing = [c for c in ("run", "golden", "role", "channel", "toi_ns", "toi_frac", "power_mw") if c not in names]
    if missing:
        raise DataError(f"{path}: missing columns {missing}")
    if golden_only:
        lf = lf.filter(pl.col("golden"))
    if roles is not None:
        lf = lf.filter(pl.col("role").is_in(list(roles)))
    if channels is not None:
        lf = lf.filter(pl.col("channel").is_in(list(channels)))
    return lf.select([c for c in LOI_COLUMNS if c in names]).collect()


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


def load_binned(path: Path) -> tuple[pl.DataFrame, dict[str, Any]] | None:
    """binned/<scenario>.parquet and its metadata (margin, bin_low_ns, bin_high_ns, ...); None if missing."""
    if not path.exists():
        return None
    from fingrav.rawio import read_metadata

    return pl.read_parquet(path), read_metadata(path)


def load_raw(raw_dir: Path) -> dict[str, pl.DataFrame] | None:
    """raw executions, runs and samples of a scenario; None when any is missing."""
    out = {}
    for kind in ("executions", "runs", "samples"):
        path = raw_dir / f"{kind}.parquet"
        if not path.exists():
            logger.info("%s: not found; no timeline figure", path)
            return None
        out[kind] = pl.read_parquet(path)
    return out


SSP_PHASES: tuple[str, ...] = ("ssp", "measure")  # "measure": SSP runs of raw data from before SSE runs existed


def exec_roles(executions: pl.DataFrame, plan: dict[str, Any], phase: str = "ssp") -> pl.DataFrame:
    """Add a `role` column to raw executions of one kind of run ("ssp" | "sse"), as
    docs/ARCHITECTURE.md defines it from the plan. SSE runs: pred, sse (main sse_index), first (main 0
    after a predecessor), warmup; SSP runs also ssp (main ssp_index and later)."""
    warmups = int(plan.get("warmups", 3) or 0)
    sse_index = int(plan.get("sse_index", warmups))
    ssp_index = int(plan.get("ssp_index", sse_index + 1))
    has_pred = int(plan.get("predecessor_count") or 0) > 0 or (executions["segment"] == "pred").any()
    is_sse_run = phase == "sse"
    i = pl.col("exec_index")
    role = (
        pl.when(pl.col("segment") == "pred").then(pl.lit("pred"))
        .when((i >= ssp_index) & pl.lit(not is_sse_run)).then(pl.lit("ssp"))
        .when(i == sse_index).then(pl.lit("sse"))
        .when((i == 0) & pl.lit(bool(has_pred))).then(pl.lit("first"))
        .otherwise(pl.lit("warmup"))
    )
    return executions.with_columns(role.alias("role"))


def clock_fit(scn: ScenarioData, calibration: dict[str, Any] | None) -> dict[str, float] | None:
    """The clock fit used for a scenario: summary.json "clock", else calibration.json "clock".

    Returns {offset_ns, gpu_ref_ns, drift (fraction), drift_ppm, residual_ns} or None."""
    clock = scn.summary.get("clock")
    if not isinstance(clock, dict) or "offset_ns" not in clock:
        clock = (calibration or {}).get("clock")
    if not isinstance(clock, dict) or "offset_ns" not in clock:
        return None
    drift = clock.get("drift")
    if drift is None:
        drift = float(clock.get("drift_ppm") or 0.0) * 1e-6
    return {
        "offset_ns": float(clock["offset_ns"]),
        "gpu_ref_ns": float(clock.get("gpu_ref_ns") or 0.0),
        "drift": float(drift),
        "drift_ppm": float(clock.get("drift_ppm", float(drift) * 1e6)),
        "residual_ns": float(clock.get("residual_ns") or 0.0),
    }


def gpu_to_host_ms_expr(col: str, clock: dict[str, float] | None, t0_ns: int) -> pl.Expr:
    """GPU stamps in `col` mapped to host time, in ms after host time `t0_ns`.

    With `clock`: host = gpu + offset_ns + drift * (gpu - gpu_ref_ns). Without: the GPU stamp is taken
    as host time (no synchronization). Integer arithmetic first, so epoch-sized stamps keep ns precision."""
    if clock is None:
        return (pl.col(col).cast(pl.Int64) - t0_ns).cast(pl.Float64) / 1e6
    offset = int(round(clock["offset_ns"]))
    gpu_ref = int(round(clock["gpu_ref_ns"]))
    g = pl.col(col).cast(pl.Int64)
    base = (g - (t0_ns - offset)).cast(pl.Float64)
    return (base + clock["drift"] * (g - gpu_ref).cast(pl.Float64)) / 1e6
