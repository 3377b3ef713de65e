"""Every path of a sweep, defined once (rules, CLI, stages and report all use `SweepLayout`).

GPU-side module (stdlib only). One folder per sweep, `results/<sweep>/`; every per-GPU file sits under a
`gpu<k>` folder, k = 0 .. device.world_size - 1 (one GPU: `gpu0` only):

| what | path under results/<sweep>/ | written by |
|---|---|---|
| calibration | `calibration/gpu<k>.json` | calibrate |
| raw calibration | `raw/gpu<k>/calibration/{clock,steps,samples}.parquet` | calibrate |
| raw data | `raw/gpu<k>/<scenario>/{executions,runs,clock,samples}.parquet`, `plan.json` | collect |
| truth (simulator) | `truth/gpu<k>/<scenario>.parquet` | collect |
| golden runs | `binned/gpu<k>/<scenario>.parquet` | bin |
| profiles | `profiles/gpu<k>/<scenario>/{lois.parquet,summary.json}` | differentiate |
| all GPUs of a scenario | `profiles/combined/<scenario>.json` (world_size > 1) | combine |
| summary and report | `summary.csv`, `report/index.html` + `*.png` | report |
| logs | `logs/<stage>/...` | every rule |

Committed real-GPU measurements are *datasets*: folders that the replay backend reads and copies into a sweep's
`raw/`, and that no rule ever writes (e.g. `results/h200/gpu/`, beside the replay's outputs). A dataset written
before this layout (format 1: `raw/<scenario>/`, `raw/calibration/`, rank k in `rank<k>/` below them) is read as
it is (`dataset` picks the layout): committed measurements are never moved or rewritten.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

RESULTS_ROOT: Final = Path("results")
# what the rules write under results/<sweep>/: a dataset (replay_dir) must not lie in any of these
WRITTEN_DIRS: Final = ("raw", "calibration", "truth", "binned", "profiles", "report", "logs", "archive")
SCENARIO_RAW_FILES: Final = ("executions.parquet", "runs.parquet", "clock.parquet", "samples.parquet", "plan.json")
CALIBRATION_RAW_FILES: Final = ("clock.parquet", "steps.parquet", "samples.parquet")
PROFILE_FILES: Final = ("lois.parquet", "summary.json")
CALIBRATION_DIR: Final = "calibration"  # raw/gpu<k>/calibration/: a reserved scenario name
COMBINED_DIR: Final = "combined"


def gpu_dir(rank: int | str) -> str:
    """The folder of one GPU of a sweep: "gpu<k>"."""
    return f"gpu{rank}"


@dataclass(frozen=True)
class RawLayout:
    """The raw files under a folder laid out as `raw/gpu<k>/...` (a sweep's results folder or a dataset)."""

    root: Path

    def gpu(self, rank: int | str = 0) -> Path:
        return self.root / "raw" / gpu_dir(rank)

    def scenario_dir(self, scenario: str, rank: int | str = 0) -> Path:
        """raw/gpu<k>/<scenario>/."""
        return self.gpu(rank) / scenario

    def scenario_files(self, scenario: str, rank: int | str = 0) -> list[Path]:
        d = self.scenario_dir(scenario, rank)
        return [d / name for name in SCENARIO_RAW_FILES]

    def plan(self, scenario: str, rank: int | str = 0) -> Path:
        return self.scenario_dir(scenario, rank) / "plan.json"

    def calibration_dir(self, rank: int | str = 0) -> Path:
        """raw/gpu<k>/calibration/."""
        return self.gpu(rank) / CALIBRATION_DIR

    def calibration_files(self, rank: int | str = 0) -> list[Path]:
        d = self.calibration_dir(rank)
        return [d / name for name in CALIBRATION_RAW_FILES]


@dataclass(frozen=True)
class SweepLayout(RawLayout):
    """The files of one sweep under results/<sweep>/ (see the module docstring)."""

    @classmethod
    def of(cls, sweep: str, results_root: Path | str = RESULTS_ROOT) -> SweepLayout:
        return cls(Path(results_root) / sweep)

    # ---------------------------------------------------------------- calibrate / collect
    def calibration_json(self, rank: int | str = 0) -> Path:
        return self.root / "calibration" / f"{gpu_dir(rank)}.json"

    def truth(self, scenario: str, rank: int | str = 0) -> Path:
        return self.root / "truth" / gpu_dir(rank) / f"{scenario}.parquet"

    # ---------------------------------------------------------------- bin / differentiate / combine
    def binned(self, scenario: str, rank: int | str = 0) -> Path:
        return self.root / "binned" / gpu_dir(rank) / f"{scenario}.parquet"

    def profile_dir(self, scenario: str, rank: int | str = 0) -> Path:
        return self.root / "profiles" / gpu_dir(rank) / scenario

    def lois(self, scenario: str, rank: int | str = 0) -> Path:
        return self.profile_dir(scenario, rank) / "lois.parquet"

    def summary_json(self, scenario: str, rank: int | str = 0) -> Path:
        return self.profile_dir(scenario, rank) / "summary.json"

    def combined(self, scenario: str) -> Path:
        return self.root / "profiles" / COMBINED_DIR / f"{scenario}.json"

    # ---------------------------------------------------------------- report
    @property
    def summary_csv(self) -> Path:
        return self.root / "summary.csv"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_html(self) -> Path:
        return self.report_dir / "index.html"

    def log(self, stage: str, name: str | None = None, rank: int | str | None = None) -> Path:
        """logs/<stage>.log, logs/<stage>/<name>.log or logs/<stage>/gpu<k>/<name>.log."""
        if name is None:
            return self.root / "logs" / f"{stage}.log"
        if rank is None:
            return self.root / "logs" / stage / f"{name}.log"
        return self.root / "logs" / stage / gpu_dir(rank) / f"{name}.log"


@dataclass(frozen=True)
class LegacyRawLayout(RawLayout):
    """Format 1 (before `gpu<k>` folders): GPU 0 in raw/<scenario>/ and raw/calibration/, GPU k in rank<k>/."""

    def gpu(self, rank: int | str = 0) -> Path:
        return self.root / "raw"

    def scenario_dir(self, scenario: str, rank: int | str = 0) -> Path:
        d = self.root / "raw" / scenario
        return d if int(rank) == 0 else d / f"rank{rank}"

    def calibration_dir(self, rank: int | str = 0) -> Path:
        d = self.root / "raw" / CALIBRATION_DIR
        return d if int(rank) == 0 else d / f"rank{rank}"


def dataset(path: Path | str) -> RawLayout:
    """The raw layout of a committed dataset folder (e.g. results/h200/gpu), format 1 or 2 as found there."""
    path = Path(path)
    if not (path / "raw" / gpu_dir(0)).is_dir() and (path / "raw" / CALIBRATION_DIR).is_dir():
        return LegacyRawLayout(path)
    return RawLayout(path)
