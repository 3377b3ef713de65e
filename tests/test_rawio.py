"""Raw files are written atomically with a checksum manifest that every reading stage verifies."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fingrav import rawio
from fingrav.config import AnalysisConfig
from fingrav.errors import DataError
from fingrav.layout import SweepLayout, dataset
from fingrav.stages import bin as bin_stage

ROOT = Path(__file__).resolve().parent.parent


def _copy_scenario(tmp_path: Path, name: str = "mb-4k") -> SweepLayout:
    layout = SweepLayout(tmp_path / "results" / "s")
    shutil.copytree(dataset(ROOT / "results" / "h200" / "gpu").scenario_dir(name), layout.scenario_dir(name))
    return layout


def test_the_committed_dataset_matches_its_manifests() -> None:
    ds = dataset(ROOT / "results" / "h200" / "gpu")  # the committed format-1 dataset
    folders = sorted(ds.gpu(0).iterdir())
    assert len(folders) == 15 and all(rawio.verify_manifest(f) for f in folders)


@pytest.mark.parametrize("name", ["executions.parquet", "samples.parquet", "plan.json"])
def test_a_flipped_byte_stops_the_next_stage_naming_the_file(tmp_path: Path, name: str) -> None:
    layout = _copy_scenario(tmp_path)
    path = layout.scenario_dir("mb-4k") / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(DataError, match=rf"{name}: its content differs"):
        bin_stage.run(layout, "mb-4k", 0, AnalysisConfig())


def test_a_missing_listed_file_is_named(tmp_path: Path) -> None:
    layout = _copy_scenario(tmp_path)
    (layout.scenario_dir("mb-4k") / "runs.parquet").unlink()
    with pytest.raises(DataError, match="runs.parquet: listed in .* but missing"):
        bin_stage.run(layout, "mb-4k", 0, AnalysisConfig())


def test_writes_are_atomic_and_leave_no_temporary_file(tmp_path: Path) -> None:
    rawio.write_json(tmp_path / "a.json", {"x": 1})
    rawio.write_table(tmp_path / "t.parquet", "steps", {"step": [0], "gpu_start_ns": [1], "gpu_end_ns": [2]}, {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "t.parquet"]
    assert rawio.read_metadata(tmp_path / "t.parquet")["format_version"] >= 2
