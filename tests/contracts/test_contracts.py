"""The contracts: one definition each, and everything that restates them agrees with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.flags import FLAG_ORDER, INVALIDATING
from fingrav.analysis.roles import role_expr
from fingrav.contracts import flags as F
from fingrav.contracts import summary as S
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan, guidance
from fingrav.contracts.sensor import PlanSensor, SensorModel
from fingrav.layout import SweepLayout, dataset

ROOT = Path(__file__).resolve().parents[2]


def plan(**kw: object) -> Plan:
    base: dict[str, object] = dict(
        exec_time_ns=100_000,
        cycle_ns=101_000,
        warmups=3,
        sse_index=3,
        ssp_index=6,
        tail=3,
        trailing=1,
        executions_per_run=10,
        runs=10,
        sse_runs=10,
        sse_executions_per_run=4,
        idle_ns=1,
        delay_max_ns=1,
        lois_wanted=30,
        sensor=PlanSensor(period_ns=1, delay_ns=0, window_ns=0, lag_ns=0, settle_ns=0),
    )
    base.update(kw)
    return Plan.model_validate(base)


def test_flag_table_in_architecture_doc_is_the_registry() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    assert F.markdown_table() in doc


def test_analysis_flags_are_the_registry() -> None:
    assert FLAG_ORDER == F.ORDER and INVALIDATING == F.INVALIDATING
    assert {"too_few_lois", "imprecise", "sample_gaps", "clock_residual", "unsettled"} == set(F.INVALIDATING)
    with pytest.raises(KeyError, match="unknown flag"):
        F.flag("no_such_flag")


def test_summary_helpers() -> None:
    assert S.channel_of_column("ssp_hbm_power_w") == "hbm" and S.channel_of_column("ssp_power_w") is None
    assert S.split_flags(S.join_flags(["a", "b"])) == ["a", "b"] and S.split_flags("") == []
    assert S.column_type("valid") == "bool" and S.column_type("ssp_lois") == "int" and S.column_type("notes") == "str"
    assert S.column_type("power_ci_low_w") == "float" and S.column_type("rank1_valid") == "bool"


@pytest.mark.parametrize("seed", range(20))
def test_role_rule_and_role_expression_agree(seed: int) -> None:
    rng = np.random.default_rng(seed)
    warmups = int(rng.integers(0, 5))
    ssp = int(rng.integers(0, 12))
    tail = int(rng.integers(1, 5))
    trailing = int(rng.integers(0, 3))
    pred = int(rng.integers(0, 3))
    p = plan(
        warmups=warmups,
        sse_index=warmups,
        sse_executions_per_run=warmups + 1,
        ssp_index=ssp,
        tail=tail,
        trailing=trailing,
        executions_per_run=ssp + tail + trailing,
        predecessor_count=pred,
    )
    rows = [
        (seg, i, phase)
        for phase in ("sse", "ssp")
        for seg, n in (("pred", pred), ("main", p.executions_of(phase)))
        for i in range(n)
    ]
    frame = pl.DataFrame(rows, schema=["segment", "exec_index", "phase"], orient="row")
    got = frame.select(role_expr(p).cast(pl.String).alias("role"))["role"].to_list()
    assert got == [p.role_of(seg, i, phase) for seg, i, phase in rows]


def test_plan_rejects_inconsistent_indices() -> None:
    with pytest.raises(ValueError, match="executions_per_run"):
        plan(executions_per_run=11)
    with pytest.raises(ValueError, match="ssp_index"):
        plan(ssp_index=10, tail=1, trailing=0, executions_per_run=10)


@pytest.mark.parametrize(("exec_ns", "margin"), [(30_000, 0.05), (100_000, 0.05), (500_000, 0.02), (2_000_000, 0.02)])
def test_unset_margin_is_the_guidance_tables(exec_ns: int, margin: float) -> None:
    assert plan(exec_time_ns=exec_ns).margin_for_binning(None) == margin == guidance(exec_ns)[2]
    assert plan(exec_time_ns=exec_ns).margin_for_binning(0.1) == 0.1


def test_sensor_model_from_ms_record() -> None:
    m = SensorModel.from_ms_record(
        {"channel": "total", "period_ms": 20.0, "delay_ms": 3.0, "lag_ms": None, "boxcar_only": {"window_ms": 2.5}}
    )
    assert m.period_ns == 20e6 and m.delay_ns == 3e6 and m.lag_ns is None and m.boxcar_only == {"window_ns": 2.5e6}
    assert PlanSensor.of(m.model_copy(update={"window_ns": 1.0, "settle_ns": 5e6})).lag_ns == 0


def test_clock_map_numpy_and_polars_agree() -> None:
    c = ClockMap(offset_ns=-100_705.8875, gpu_ref_ns=1_795_947_954_484_014_076, drift=-2.6e-6)
    g = np.array([1_795_947_954_484_014_076, 1_795_947_964_484_014_076, 1_795_947_944_000_000_000], np.int64)
    a = c.to_host_ns(g)
    b = pl.DataFrame({"g": g}).select(c.host_expr("g"))["g"].to_numpy()
    assert (a == b).all()
    assert ClockMap.from_record({"offset_ns": 1, "gpu_ref_ns": 2, "drift_ppm": 3.0}).drift == pytest.approx(3e-6)


def test_layout_paths() -> None:
    lay = SweepLayout.of("s")
    assert lay.calibration_json(1) == Path("results/s/calibration/gpu1.json")
    assert lay.scenario_dir("x", 0) == Path("results/s/raw/gpu0/x")
    assert lay.binned("{scenario}", "{rank}") == Path("results/s/binned/gpu{rank}/{scenario}.parquet")
    assert lay.combined("x") == Path("results/s/profiles/combined/x.json")
    assert dataset("results/h200/gpu").calibration_dir(0) == Path("results/h200/gpu/raw/calibration")  # format 1
    assert dataset("results/h200/gpu").scenario_dir("cb-2k", 1) == Path("results/h200/gpu/raw/cb-2k/rank1")
    assert dataset("/nonexistent").scenario_dir("x", 1) == Path("/nonexistent/raw/gpu1/x")
