"""The adaptive reference run (issue 10): launched as users launch the kernel, it goes on past run_policy.reference_ms
while its power cycles under the limiter and the whole-cycle mean is not yet precise, up to reference_max_ms; a
steady kernel stops at the shortest length. End to end on the simulated H200: the headline it gives is within its CI
of the true sustained power."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import fingrav
from fingrav.collect.runner import REFERENCE_PART_NS, collect_scenario
from fingrav.config import GemmKernel, GemvKernel, RunPolicy, Scenario, SimConfig
from fingrav.device.sim import SimulatedGPU
from fingrav.testing.plans import sim_calibration

MS = 1_000_000
FAST = {"runs": 6, "sse_runs": 4, "max_runs": 10, "probe_ms": 300}


def _collect(kernel, tmp_path: Path, **policy) -> tuple[dict, pl.DataFrame]:
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=4)
    scen = Scenario(name="k", kernel=kernel)
    plan = collect_scenario(dev, scen, RunPolicy(**FAST, **policy), sim_calibration("h200"), 1, tmp_path)
    ex = pl.read_parquet(tmp_path / "executions.parquet")
    runs = pl.read_parquet(tmp_path / "runs.parquet")
    ref_run = runs.filter(pl.col("phase") == "reference")["run"][0]
    return plan.model_dump(), ex.filter(pl.col("run") == ref_run)


def test_a_cycling_kernel_runs_on_until_its_whole_cycle_mean_is_precise(tmp_path: Path) -> None:
    plan, ref = _collect(GemmKernel(m=4096, n=4096, k=4096), tmp_path, reference_ms=1500, reference_max_ms=30_000)
    assert ref.height == 1  # one record spanning the run: no stamp between executions
    executed = int(ref["exec_index"][0]) + 1
    assert plan["reference_executed"] == executed > plan["reference_executions"] * 2  # well past the shortest
    stop = plan["reference_stop"]
    assert stop["reason"] == "ci_reached" and stop["ci_pct"] <= 0.7 and stop["cycles"] >= 3
    busy_s = (ref["gpu_end_ns"][0] - ref["gpu_start_ns"][0]) / 1e9
    assert 3.0 < busy_s < 30.0
    assert json.loads((tmp_path / "plan.json").read_text())["reference_stop"]["reason"] == "ci_reached"


def test_a_steady_kernel_stops_at_the_shortest_length(tmp_path: Path) -> None:
    plan, ref = _collect(GemvKernel(m=8192, k=8192), tmp_path, reference_ms=1500, reference_max_ms=30_000)
    assert plan["reference_stop"]["reason"] == "steady"
    busy_ns = ref["gpu_end_ns"][0] - ref["gpu_start_ns"][0]
    assert 1500 * MS <= busy_ns <= 1500 * MS + 2 * REFERENCE_PART_NS  # at most the part queued behind the decision


def test_a_fixed_length_reference_is_not_extended(tmp_path: Path) -> None:
    plan, ref = _collect(GemmKernel(m=4096, n=4096, k=4096), tmp_path, reference_ms=1500, reference_max_ms=0)
    assert plan["reference_stop"] is None and plan["reference_executed"] == plan["reference_executions"]
    assert int(ref["exec_index"][0]) + 1 == plan["reference_executions"]


@pytest.mark.slow
def test_the_adaptive_headline_covers_the_true_sustained_power(tmp_path: Path) -> None:
    r = fingrav.profile(
        GemmKernel(m=4096, n=4096, k=4096),
        device="sim:h200",
        policy={"max_runs": 60, "min_lois": 15, "reference_ms": 1500, "reference_max_ms": 30_000},
        calibration={"steps": 8, "clock_bursts": 4, "clock_reads_per_burst": 20},
        analysis={"bootstrap_reps": 200},
        seed=6,
        results=tmp_path / "sim",
    )
    row = r.row
    assert row["power_source"] == "sustained" and "power_limit_cycling" in r.flags.all
    truth = row["truth_power_w"]
    assert row["power_ci_low_w"] <= truth <= row["power_ci_high_w"]
    half = (row["power_ci_high_w"] - row["power_ci_low_w"]) / 2 / row["power_w"] * 100
    assert half <= 1.0 and row["valid"]
    assert row["ssp_power_w"] > 1.02 * row["power_w"]  # the burst after idle sits above the sustained mean
