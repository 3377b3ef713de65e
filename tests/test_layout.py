"""`fingrav.layout`: every path of a sweep under results/<sweep>/, listed GPUs' card folders, and committed datasets
read in the layout they were written in (format 1 before gpu<k> folders, format 2 after)."""

from __future__ import annotations

from pathlib import Path

from fingrav.layout import (
    CALIBRATION_RAW_FILES,
    SCENARIO_RAW_FILES,
    LegacyRawLayout,
    RawLayout,
    SweepLayout,
    card_root,
    dataset,
    gpu_dir,
)

ROOT = Path("results/s")


def test_sweep_paths() -> None:
    L = SweepLayout.of("s")
    assert L.root == ROOT
    assert L.calibration_json(1) == ROOT / "calibration/gpu1.json"
    assert L.scenario_dir("cb", 2) == ROOT / "raw/gpu2/cb"
    assert L.scenario_files("cb") == [ROOT / "raw/gpu0/cb" / n for n in SCENARIO_RAW_FILES]
    assert L.calibration_files(0) == [ROOT / "raw/gpu0/calibration" / n for n in CALIBRATION_RAW_FILES]
    assert L.plan("cb") == ROOT / "raw/gpu0/cb/plan.json"
    assert L.collected("cb") == ROOT / "raw/gpu0/cb/COLLECTED.json"
    assert L.scenario_calibration("cb", 1) == ROOT / "raw/gpu1/cb/calibration.json"
    assert L.truth("cb") == ROOT / "truth/gpu0/cb.parquet"
    assert L.reading_truth("cb") == ROOT / "truth/gpu0/cb.readings.parquet"
    assert L.binned("cb", 1) == ROOT / "binned/gpu1/cb.parquet"
    assert (L.lois("cb"), L.summary_json("cb")) == (
        ROOT / "profiles/gpu0/cb/lois.parquet",
        ROOT / "profiles/gpu0/cb/summary.json",
    )
    assert L.combined("cb") == ROOT / "profiles/combined/cb.json" and L.fleet("cb") == ROOT / "profiles/fleet/cb.json"
    assert L.owner_json == ROOT / "raw/OWNER.json" and L.archive_dir == ROOT / "archive"
    assert L.archive_name(ROOT / "raw/gpu1/cb", 1) == "cb-gpu1"
    assert L.calibration_cache("GPU-1-abc") == ROOT / "calibration/by-gpu/GPU-1-abc"
    assert (L.summary_csv, L.report_html) == (ROOT / "summary.csv", ROOT / "report/index.html")
    assert (L.results_json, L.aiconfigurator_csv) == (ROOT / "export/results.json", ROOT / "export/aiconfigurator.csv")


def test_logs() -> None:
    L = SweepLayout.of("s")
    assert L.log("report") == ROOT / "logs/report.log"
    assert L.log("collect", "cb") == ROOT / "logs/collect/cb.log"
    assert L.log("bin", "cb", 1) == ROOT / "logs/bin/gpu1/cb.log"


def test_a_listed_gpu_is_laid_out_as_a_one_gpu_sweep() -> None:
    card = SweepLayout.of("s").card(3)
    assert card.root == card_root(ROOT, 3) == ROOT / "cards/3"
    assert card.scenario_dir("cb") == ROOT / "cards/3/raw/gpu0/cb" and gpu_dir(0) == "gpu0"


def test_datasets_are_read_in_their_own_layout(tmp_path: Path) -> None:
    new = tmp_path / "new"
    (new / "raw/gpu0/calibration").mkdir(parents=True)
    assert type(dataset(new)) is RawLayout and dataset(new).scenario_dir("cb", 1) == new / "raw/gpu1/cb"
    old = tmp_path / "old"
    (old / "raw/calibration").mkdir(parents=True)
    legacy = dataset(old)
    assert isinstance(legacy, LegacyRawLayout)
    assert legacy.scenario_dir("cb") == old / "raw/cb" and legacy.scenario_dir("cb", 1) == old / "raw/cb/rank1"
    assert legacy.calibration_dir(0) == old / "raw/calibration"
    assert legacy.calibration_dir(2) == old / "raw/calibration/rank2"
    assert type(dataset(tmp_path / "missing")) is RawLayout  # nothing there yet: today's layout
