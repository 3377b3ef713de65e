"""The parameters of each stage's job, as its rule writes them (rules/common.smk `stage_params`, a JSON file per
job), one model per stage: `from_params` validates the file's content here before anything runs, so a bad or
stale params file stops with one message naming the field (`parse_params`), never a KeyError deep in a stage.

The config sections are the once-validated sweep config's (`fingrav.config`), dumped to JSON for Snakemake and
validated back into the same models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fingrav.config import AnalysisConfig, CalibrationConfig, DeviceConfig, RunPolicy, Scenario
from fingrav.errors import DataError
from fingrav.layout import SweepLayout

P = TypeVar("P", bound="StageParams")


class StageParams(BaseModel):
    """What every stage job gets: the sweep's (or its unit's) results folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    root: Path

    @property
    def layout(self) -> SweepLayout:
        return SweepLayout(self.root)


class CalibrateParams(StageParams):
    """Rule calibrate."""

    device: DeviceConfig
    calibration: CalibrationConfig
    seed: int


class CollectParams(StageParams):
    """Rule collect: the scenario without its run policy (`policy`: the sweep's merged with the scenario's) and the
    calibration config for a GPU that is not the calibrated one."""

    device: DeviceConfig
    scenario: Scenario
    policy: RunPolicy
    seed: int
    calibration: CalibrationConfig | None = None


class BinParams(StageParams):
    """Rule bin."""

    scenario: str
    rank: int = Field(ge=0)
    analysis: AnalysisConfig


class DifferentiateParams(BinParams):
    """Rule differentiate: the clock-fit validity limit (µs) and whether the backend wrote ground truth."""

    max_clock_residual_us: float = Field(gt=0)
    with_truth: bool


class CombineParams(StageParams):
    """Rule combine."""

    scenario: str
    world_size: int = Field(ge=2)
    analysis: AnalysisConfig


class FleetParams(StageParams):
    """Rule fleet."""

    scenario: str
    gpus: list[int] = Field(min_length=1)
    analysis: AnalysisConfig


class ReportMeta(BaseModel):
    """The sweep's description the report shows (rules/common.smk `sweep_meta`): name, backend, config hash, the
    paper's SSE-vs-SSP errors to compare with (% by scenario; None or {} for none), the scenario of the timeline
    figures. `config` is the whole sweep config as validated and dumped (shown and read by the report as it is:
    allowed free-form here, its own model validated it before any job started)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    sweep: str | None = None
    backend: str | None = None
    config_hash: str | None = None
    config: dict[str, Any] = {}
    paper_sse_vs_ssp_pct: dict[str, float] | None = None
    timeline_scenario: str | None = None


class ReportParams(StageParams):
    """Rule report: the scenarios, the sweep's description, GPUs per scenario and, for a sweep over listed GPUs,
    the GPUs each scenario ran on."""

    scenarios: list[str]
    meta: ReportMeta
    world_size: int = Field(1, ge=1)
    cards: dict[str, list[int]] | None = None


def parse_params(model: type[P], params: Any, stage: str) -> P:
    """A stage's parameters as its model; DataError naming the stage and every bad field (up to five)."""
    try:
        return model.model_validate(params)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top level)'}: {e['msg']}" for e in err.errors()[:5])
        more = f" (and {err.error_count() - 5} more)" if err.error_count() > 5 else ""
        raise DataError(f"{stage}: bad stage parameters: {problems}{more}") from None
