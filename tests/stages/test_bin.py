"""Stage bin on a small simulated collection: the binned file and its metadata (margin and where it came from),
and its inputs checked first (a damaged raw file, a missing one, a plan that breaks its contract: one message
naming the file)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from fingrav import rawio
from fingrav.collect.runner import collect_scenario
from fingrav.config import AnalysisConfig, GemmKernel, RunPolicy, Scenario, SimConfig
from fingrav.device.sim import SimulatedGPU
from fingrav.errors import DataError
from fingrav.layout import SweepLayout
from fingrav.stages import bin as bin_stage
from fingrav.testing.plans import sim_calibration

NAME = "g"


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory) -> SweepLayout:
    layout = SweepLayout(tmp_path_factory.mktemp("bin") / "s")
    policy = RunPolicy(runs=8, sse_runs=4, max_runs=10, probe_ms=100.0, reference_ms=0.0)
    dev = SimulatedGPU(SimConfig(preset="mi300x"), seed=2)
    collect_scenario(dev, Scenario(name=NAME, kernel=GemmKernel(m=2048, n=2048, k=2048)), policy, sim_calibration(),
                     1, layout.scenario_dir(NAME))  # fmt: skip
    return layout


def test_bin_writes_the_golden_runs_with_their_margin(collected: SweepLayout) -> None:
    out = bin_stage.run(collected, NAME, 0, AnalysisConfig(margin=0.05))
    assert out == collected.binned(NAME)
    binned = pl.read_parquet(out)
    runs = pl.read_parquet(collected.scenario_dir(NAME) / "runs.parquet")
    measure = runs.filter(pl.col("phase").is_in(["sse", "ssp"]))["run"].to_list()
    assert sorted(binned["run"].unique().to_list()) == sorted(measure)
    meta = rawio.read_metadata(out)
    assert meta["margin"] == 0.05 and meta["margin_source"] == "analysis.margin"
    assert meta["provenance"]["stage"] == "bin"
    guided = rawio.read_metadata(bin_stage.run(collected, NAME, 0, AnalysisConfig()))
    assert guided["margin_source"] == "guidance table" and guided["margin"] > 0


def test_read_frame_and_plan_name_the_file(tmp_path: Path, collected: SweepLayout) -> None:
    with pytest.raises(DataError, match="missing input file"):
        bin_stage.read_frame(tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"not parquet")
    with pytest.raises(DataError, match="bad.parquet: cannot be read as parquet"):
        bin_stage.read_frame(bad)
    plan = json.loads((collected.scenario_dir(NAME) / "plan.json").read_text())
    del plan["exec_time_ns"]  # a required field
    broken = tmp_path / "plan.json"
    broken.write_text(json.dumps(plan))
    with pytest.raises(DataError, match="plan.json"):
        bin_stage.read_plan(broken)


def test_an_altered_raw_file_stops_bin(collected: SweepLayout, tmp_path: Path) -> None:
    import shutil

    copy = SweepLayout(tmp_path / "s")
    shutil.copytree(collected.root, copy.root)
    runs = copy.scenario_dir(NAME) / "runs.parquet"
    runs.write_bytes(runs.read_bytes() + b"\0")
    with pytest.raises(DataError, match="runs.parquet"):
        bin_stage.run(copy, NAME, 0, AnalysisConfig())
