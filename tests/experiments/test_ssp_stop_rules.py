"""experiments/ssp_stop_rules.py without a GPU: its replica of the collector's SSP LOI sums reproduces the adaptive
stop the collector took (plan.json ssp_stop) on simulated collections, and the alternative rules never run more SSP
runs than were collected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav.collect.runner import collect_scenario
from fingrav.config import GemmKernel, GemvKernel, RunPolicy, Scenario, SimConfig
from fingrav.contracts.plan import Plan
from fingrav.device.sim import SimulatedGPU
from fingrav.testing.experiments import load_experiment
from fingrav.testing.plans import sim_calibration


@pytest.fixture(scope="module")
def ssr():
    return load_experiment("ssp_stop_rules")


@pytest.mark.parametrize(
    ("kernel", "seed"),
    [(GemvKernel(m=4096, k=4096), 4), (GemmKernel(m=2048, n=2048, k=2048), 7), (GemvKernel(m=8192, k=8192), 11)],
)
def test_the_replica_stops_where_the_collector_stopped(ssr, tmp_path: Path, kernel, seed: int) -> None:
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=seed)
    policy = RunPolicy(max_runs=40, sse="never", probe_ms=300, reference_ms=0, min_lois=20)
    collect_scenario(dev, Scenario(name="k", kernel=kernel), policy, sim_calibration("h200"), 1, tmp_path)
    plan = Plan.model_validate(json.loads((tmp_path / "plan.json").read_text()))
    assert plan.ssp_stop is not None
    sums = ssr.run_sums(tmp_path, plan)
    assert sums is not None and sums.run_ids.size == plan.ssp_stop.runs
    assert ssr.stop_at(sums, plan, "current", 0.8)[0] == plan.ssp_stop.runs
    d = ssr.ssp_stop_decision(sums.sum_mw, sums.lois, plan.ssp_min_lois, plan.ssp_ci_pct, plan.runs)
    assert d.lois == plan.ssp_stop.lois and d.ci_pct == pytest.approx(plan.ssp_stop.ci_pct, rel=1e-9)
    for rule in ("unsettled", "total"):
        k, why = ssr.stop_at(sums, plan, rule, 0.8)
        assert ssr.MIN_RUNS <= k <= sums.run_ids.size and why
    # the same stop at the plan's own target is the collector's; a looser one never runs more
    assert ssr.stop_at(sums, plan, "stat", plan.ssp_ci_pct)[0] == plan.ssp_stop.runs
    assert ssr.stop_at(sums, plan, "stat", 2 * plan.ssp_ci_pct)[0] <= plan.ssp_stop.runs
