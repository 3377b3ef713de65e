"""Every path of a sweep, defined once (rules, CLI, stages and report all use `SweepLayout`).

GPU-side module (stdlib only). One folder per sweep, `results/<sweep>/`; every per-GPU file sits under a
`gpu<k>` folder, k = 0 .. device.world_size - 1 (one GPU: `gpu0` only):

| what | path under results/<sweep>/ | written by |
|---|---|---|
| calibration | `calibration/gpu<k>.json` | calibrate |
| raw calibration | `raw/gpu<k>/calibration/{clock,steps,samples}.parquet` | calibrate |
| raw data | `raw/gpu<k>/<scenario>/{executions,runs,clock,samples}.parquet`, `plan.json`, `MANIFEST.json` | collect |
| a GPU's own calibration | `raw/gpu<k>/<scenario>/calibration.json` (collected on another GPU) | collect |
| calibration per GPU | `calibration/by-gpu/<uuid>-<hash>/` (that GPU's calibration + raw data) | collect |
| collection receipt | `raw/gpu<k>/<scenario>/COLLECTED.json` (the collect rule's output, written last) | collect |
| who measured here | `raw/OWNER.json` (backend, GPU index, replayed dataset) | calibrate, collect |
| earlier raw data | `archive/<scenario or calibration>-gpu<k>-<UTC time>/` (moved, not deleted) | collect, calibrate |
| truth (simulator) | `truth/gpu<k>/<scenario>.parquet` (kernel power), `….readings.parquet` (readings) | collect |
| golden runs | `binned/gpu<k>/<scenario>.parquet` | bin |
| profiles | `profiles/gpu<k>/<scenario>/{lois.parquet,summary.json}` | differentiate |
| all GPUs of a scenario | `profiles/combined/<scenario>.json` (world_size > 1) | combine |
| listed GPU i of a node | `cards/<i>/`: the files of a one-GPU sweep of device i (all the rows above) | every rule |
| card-to-card spread | `profiles/fleet/<scenario>.json` (device.fleet) | fleet |
| summary and report | `summary.csv`, `report/index.html` + `*.png` | report |
| exports | `export/results.json`, `export/aiconfigurator.csv` | `fingrav export` |
| logs | `logs/<stage>/...` | every rule |

Raw data is never a rule's output: Snakemake deletes a job's outputs before it runs and after it fails, so the collect
rule declares only the receipts and the calibrate rule only `calibration/gpu<k>.json`; a stage that measures again
first moves the earlier raw folder (with its plan.json, provenance and MANIFEST.json) to `archive/`.

A sweep that lists the GPUs of a node (`device.gpus`; `device.fleet`: every scenario on each of them) is not a
lockstep group: each listed GPU runs its scenarios on its own, so each has a folder `cards/<i>/` (i = its
device index on the node) laid out as a one-GPU sweep (`calibration/gpu0.json`, `raw/gpu0/<scenario>/`, ...,
`SweepLayout.card`); the sweep's own folder keeps what spans the GPUs (`profiles/fleet/`, `summary.csv`,
`report/`, `logs/report.log`). `gpu<k>` keeps meaning rank k of a lockstep group (device.world_size).

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
WRITTEN_DIRS: Final = (
    *("raw", "calibration", "truth", "binned", "profiles", "report", "logs", "archive", "cards"),
    "export",  # fingrav export
)
SCENARIO_RAW_FILES: Final = ("executions.parquet", "runs.parquet", "clock.parquet", "samples.parquet", "plan.json")
CALIBRATION_RAW_FILES: Final = ("clock.parquet", "steps.parquet", "samples.parquet")
PROFILE_FILES: Final = ("lois.parquet", "summary.json")
TELEMETRY_FILE: Final = "telemetry.parquet"  # raw/gpu<k>/<scenario>/: clocks and limiter counters, where offered
SCENARIO_CALIBRATION: Final = "calibration.json"  # raw/gpu<k>/<scenario>/: only when collect calibrated its own GPU
CALIBRATION_DIR: Final = "calibration"  # raw/gpu<k>/calibration/: a reserved scenario name
COLLECTED: Final = "COLLECTED.json"  # the collection receipt in raw/gpu<k>/<scenario>/
ARCHIVE_DIR: Final = "archive"
COMBINED_DIR: Final = "combined"
CARDS_DIR: Final = "cards"  # cards/<i>/: listed GPU i of a node (device.gpus), laid out as a one-GPU sweep
FLEET_DIR: Final = "fleet"  # profiles/fleet/<scenario>.json: the card-to-card spread (device.fleet)


def producer(path: Path | str) -> str | None:
    """The rule that writes `path` (a file under a sweep's folder), from where it lies; None when unknown."""
    parts = Path(path).parts
    if "profiles" in parts:
        return "combine" if COMBINED_DIR in parts else "fleet" if FLEET_DIR in parts else "differentiate"
    if "binned" in parts:
        return "bin"
    if "raw" in parts:
        return "calibrate" if CALIBRATION_DIR in parts else "collect"
    if "truth" in parts:
        return "collect"
    if "calibration" in parts:
        return "calibrate"
    return None


def rerun_hint(path: Path | str) -> str:
    """What to do about a damaged file of a sweep: "; rerun the job that writes it: snakemake --forcerun <rule> ..."
    (Snakemake takes a file it finds newer than its inputs for done, so a plain rerun fails again); "" if unknown."""
    rule = producer(path)
    if rule is None:
        return ""
    again = " (measures again; the earlier raw data goes to archive/)" if rule in ("collect", "calibrate") else ""
    return f"; rerun the job that writes it: snakemake --forcerun {rule} --configfile <your sweep config>{again}"


def card_root(root: Path | str, index: int | str) -> Path:
    """The folder of listed GPU `index` under a sweep's (or a dataset's) folder: <root>/cards/<index>."""
    return Path(root) / CARDS_DIR / str(index)


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

    def scenario_calibration(self, scenario: str, rank: int | str = 0) -> Path:
        """raw/gpu<k>/<scenario>/calibration.json: the calibration of the GPU that collected the scenario, when that
        was not the calibrated GPU (a scheduler gave the collect job another one); else there is none."""
        return self.scenario_dir(scenario, rank) / SCENARIO_CALIBRATION

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

    def collected(self, scenario: str, rank: int | str = 0) -> Path:
        """raw/gpu<k>/<scenario>/COLLECTED.json: the receipt collect writes after the raw files and their manifest
        (the collect rule's output, so that Snakemake never deletes the raw files themselves)."""
        return self.scenario_dir(scenario, rank) / COLLECTED

    @property
    def owner_json(self) -> Path:
        """raw/OWNER.json: which backend and GPU measured this folder's raw data (`fingrav.preflight`)."""
        return self.root / "raw" / "OWNER.json"

    @property
    def archive_dir(self) -> Path:
        """archive/: earlier raw data, moved aside before it is measured again (`fingrav.rawio.archive`)."""
        return self.root / ARCHIVE_DIR

    def archive_name(self, folder: Path, rank: int | str = 0) -> str:
        """The archive name of a raw folder of GPU `rank`: "<scenario or calibration>-gpu<k>"."""
        return f"{folder.name}-{gpu_dir(rank)}"

    def reading_truth(self, scenario: str, rank: int | str = 0) -> Path:
        """The expected sensor reading of every sample (simulator; `fingrav.contracts.tables` reading_truth)."""
        return self.root / "truth" / gpu_dir(rank) / f"{scenario}.readings.parquet"

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

    # ---------------------------------------------------------------- listed GPUs (device.gpus)
    def card(self, index: int | str) -> SweepLayout:
        """The one-GPU layout of listed GPU `index` (device index on the node): results/<sweep>/cards/<index>/."""
        return SweepLayout(card_root(self.root, index))

    def fleet(self, scenario: str) -> Path:
        """profiles/fleet/<scenario>.json: the scenario's card-to-card spread over the listed GPUs (device.fleet)."""
        return self.root / "profiles" / FLEET_DIR / f"{scenario}.json"

    def calibration_cache(self, key: str) -> Path:
        """calibration/by-gpu/<key>/: the calibration of a GPU a collect job found itself on when it was not the
        calibrated one (a scheduler's pick; key: its UUID and the calibration config hash), with its raw data."""
        return self.root / "calibration" / "by-gpu" / key

    # ---------------------------------------------------------------- report
    @property
    def summary_csv(self) -> Path:
        return self.root / "summary.csv"

    @property
    def metrics_parquet(self) -> Path:
        """Every number of the sweep in long form (`fingrav.contracts.result.METRICS_COLUMNS`)."""
        return self.root / "metrics.parquet"

    @property
    def metrics_csv(self) -> Path:
        return self.root / "metrics.csv"

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report_html(self) -> Path:
        return self.report_dir / "index.html"

    # ---------------------------------------------------------------- exports (fingrav export)
    @property
    def export_dir(self) -> Path:
        return self.root / "export"

    @property
    def results_json(self) -> Path:
        """Every scenario's summary.json in one file (`fingrav.contracts.export.ResultFile`)."""
        return self.export_dir / "results.json"

    @property
    def aiconfigurator_csv(self) -> Path:
        """One row per scenario, aiconfigurator-style (`fingrav.contracts.export.AICONFIGURATOR_COLUMNS`)."""
        return self.export_dir / "aiconfigurator.csv"

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
