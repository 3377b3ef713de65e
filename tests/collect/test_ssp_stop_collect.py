"""The adaptive SSP stop in the collector (issue 20): the SSP runs stop once `ssp_stop_decision` says so, what
stopped them is in plan.json, and a fixed count (ssp_ci_pct null) runs every SSP run of the budget."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl

from fingrav.analysis.ssp_stop import MIN_RUNS, ssp_stop_decision
from fingrav.collect.runner import collect_scenario
from fingrav.config import GemvKernel, RunPolicy, Scenario, SimConfig
from fingrav.device.sim import SimulatedGPU
from fingrav.testing.plans import sim_calibration

FAST = {"max_runs": 40, "sse": "never", "probe_ms": 300, "reference_ms": 0, "min_lois": 20}


def _collect(tmp_path: Path, **policy) -> tuple[dict, pl.DataFrame]:
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=4)
    scen = Scenario(name="k", kernel=GemvKernel(m=4096, k=4096))
    collect_scenario(dev, scen, RunPolicy(**{**FAST, **policy}), sim_calibration("h200"), 1, tmp_path)
    return json.loads((tmp_path / "plan.json").read_text()), pl.read_parquet(tmp_path / "runs.parquet")


def test_the_ssp_runs_stop_at_their_targets_and_say_why(tmp_path: Path) -> None:
    plan, runs = _collect(tmp_path)
    stop = plan["ssp_stop"]
    ssp_runs = runs.filter(pl.col("phase") == "ssp").height
    assert stop["reason"] == "ci_reached" and not stop["extend"]
    assert stop["runs"] == ssp_runs and MIN_RUNS <= ssp_runs < plan["runs"] == 40
    assert stop["lois"] >= 20 and stop["ci_pct"] <= plan["ssp_ci_pct"] == 0.5
    # the plan priced the runs it expected, and the run ids stay contiguous after the drop
    assert plan["ssp_runs_expected"] is not None and plan["cost"]["ssp_max_s"] > plan["cost"]["ssp_s"]
    ids = np.sort(runs["run"].to_numpy())
    assert (np.diff(ids) == 1).all()


def test_an_unreachable_target_runs_the_budget(tmp_path: Path) -> None:
    plan, runs = _collect(tmp_path, ssp_ci_pct=1e-6)
    assert plan["ssp_stop"]["reason"] == "max_runs" and runs.filter(pl.col("phase") == "ssp").height == 40


def test_a_fixed_count_runs_every_ssp_run(tmp_path: Path) -> None:
    plan, runs = _collect(tmp_path, ssp_ci_pct=None, runs=12)
    assert "ssp_stop" not in plan and "ssp_ci_pct" not in plan
    assert runs.filter(pl.col("phase") == "ssp").height == 12


def test_the_decision_recorded_is_the_rules_answer() -> None:
    d = ssp_stop_decision(np.full(MIN_RUNS, 2.8e6), np.full(MIN_RUNS, 4), 20, 0.5, 40)
    assert d.to_dict() == {
        "extend": False, "reason": "ci_reached", "runs": MIN_RUNS, "lois": 4 * MIN_RUNS, "mean_mw": 7e5, "ci_pct": 0.0,
    }  # fmt: skip
