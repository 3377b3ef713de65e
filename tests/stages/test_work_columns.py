"""The differentiate stage fills summary.json's work and throughput and summary.csv's THROUGHPUT columns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import test_stages as st  # tests/stages/test_stages.py: the synthetic scenario writer

from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import value_ci
from fingrav.stages import bin as bin_stage
from fingrav.stages import differentiate
from fingrav.testing.synthetic import SynthSpec


def test_differentiate_fills_the_columns_from_the_work(tmp_path: Path) -> None:
    """The synthetic 2K GEMM (tests/stages): throughput = 2 m n k / cycle time, efficiency = throughput / SSP power
    and energy per flop = energy per execution / flop, each CI around its value."""
    layout, _ = st.write_scenario(tmp_path, "cb-2k", SynthSpec(runs=30, sse_runs=10))
    bin_stage.run(layout, "cb-2k", 0, st.ANALYSIS)
    differentiate.run(layout, "cb-2k", 0, st.ANALYSIS, st.MAX_CLOCK_RESIDUAL_US, with_truth=True)
    s = json.loads(layout.summary_json("cb-2k", 0).read_text())
    row, flop = ScenarioSummary.model_validate(s).row, 2.0 * 2048**3
    assert s["work"] == {"flop": flop, "bytes": 2.0 * 3 * 2048**2, "source": "model"}
    cycle_s = s["cycle_time_mean_ns"] * 1e-9
    assert row["work_flop"] == flop and row["throughput_tflop_s"] == pytest.approx(flop / cycle_s / 1e12)
    assert row["bandwidth_gb_s"] == pytest.approx(row["work_bytes"] / cycle_s / 1e9)
    assert row["energy_efficiency_tflop_s_per_w"] == pytest.approx(row["throughput_tflop_s"] / row["power_w"])
    assert row["energy_per_flop_pj"] == pytest.approx(row["energy_per_exec_mj"] * 1e9 / flop)
    for col in ("throughput_tflop_s", "energy_efficiency_tflop_s_per_w", "energy_per_byte_pj"):
        v, lo, hi = value_ci(row, col)
        assert lo < v < hi, col  # an interval, never a point printed as one
    assert s["result"]["throughput"]["tflop_s"]["value"] == row["throughput_tflop_s"]
    assert s["result"]["throughput"]["tflop_s"]["unit"] == "TFLOP/s"
