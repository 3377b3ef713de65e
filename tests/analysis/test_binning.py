"""Execution-time binning: golden window, planted outliers, incomplete runs, SSE and SSP runs binned
separately."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from pydantic import ValidationError

from fingrav.analysis.binning import BINNED_SCHEMA, bin_runs, golden_window
from fingrav.config import AnalysisConfig
from fingrav.contracts.plan import Plan
from fingrav.testing.plans import make_plan as _make_plan
from fingrav.testing.synthetic import SynthSpec, generate


def make_plan(**kw: object) -> Plan:
    """`fingrav.testing.plans.make_plan` with this module's defaults (a 2-execution tail, 40 runs)."""
    return _make_plan(**{"tail": 2, "runs": 40, **kw})


PLAN = make_plan(executions_per_run=4, sse_executions_per_run=2, predecessor_count=0)


def make_frames(
    ssp_times: dict[int, int],
    plan: Plan = PLAN,
    drop: tuple[tuple[int, int], ...] = (),
    extra_runs: tuple[tuple[int, str], ...] = (),
    phase: str = "ssp",
    sse_times: dict[int, int] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """SSP runs (phase `phase`) with 4 main executions of 100 us each,
    except exec ssp_index which lasts ssp_times[run]; SSE runs (phase "sse") with 2 main executions,
    exec sse_index lasting sse_times[run]. drop: (run, exec_index) executions left out; extra_runs:
    (run, phase) without executions."""
    rows = []
    layouts = [(run, t, plan.executions_per_run, plan.ssp_index) for run, t in ssp_times.items()]
    layouts += [(run, t, plan.sse_executions_per_run, plan.sse_index) for run, t in (sse_times or {}).items()]
    for run, t_bin, n, bin_index in layouts:
        t = 1_000_000_000 * (run + 1)
        for i in range(n):
            d = t_bin if i == bin_index else 100_000
            if (run, i) not in drop:
                rows.append((run, "main", i, t, t + d))
            t += d
    ex = pl.DataFrame(
        rows,
        schema={
            "run": pl.Int32,
            "segment": pl.String,
            "exec_index": pl.Int32,
            "gpu_start_ns": pl.Int64,
            "gpu_end_ns": pl.Int64,
        },
        orient="row",
    )
    run_rows = [(r, phase) for r in ssp_times] + [(r, "sse") for r in sse_times or {}] + list(extra_runs)
    runs = pl.DataFrame(run_rows, schema={"run": pl.Int32, "phase": pl.String}, orient="row").with_columns(
        host_start_ns=pl.lit(0, pl.Int64), delay_ns=pl.lit(0, pl.Int64), idle_ns=pl.lit(0, pl.Int64)
    )
    return ex, runs


def test_golden_window_most_populated():
    low, high, n = golden_window(np.array([150, 100, 101, 103, 105, 50, 106]), 0.05)
    assert (low, high, n) == (100, 105, 4)


def test_golden_window_ties_go_to_smallest_and_empty():
    assert golden_window(np.array([100, 101, 200, 201]), 0.05)[:2] == (100, 105)
    assert golden_window(np.array([], dtype=np.int64), 0.05) == (0, -1, 0)


def test_golden_window_matches_brute_force():
    rng = np.random.default_rng(1)
    for _ in range(30):
        t = rng.integers(90, 130, size=rng.integers(1, 40))
        m = float(rng.uniform(0.0, 0.2))
        _, _, n = golden_window(t, m)
        brute = max(int(((t >= x) & (t <= np.floor(x * (1 + m)))).sum()) for x in t)
        assert n == brute


def test_bin_runs_planted_outliers_exact_golden_set():
    rng = np.random.default_rng(0)
    times = {r: int(200_000 + rng.integers(-3000, 3000)) for r in range(40)}
    outliers = {5: 260_000, 11: 150_000, 23: 215_000, 31: 400_000}
    times.update(outliers)
    ex, runs = make_frames(times)
    binned, meta = bin_runs(ex, runs, PLAN, margin=0.05)
    assert binned.schema == pl.Schema(BINNED_SCHEMA)
    assert binned["run"].to_list() == sorted(times)
    assert binned["phase"].unique().to_list() == ["ssp"]
    assert binned["bin_exec_time_ns"].to_list() == binned["ssp_exec_time_ns"].to_list()
    assert set(binned.filter(~pl.col("golden"))["run"].to_list()) == set(outliers)
    assert binned.filter(~pl.col("golden"))["reason"].unique().to_list() == ["outside_bin"]
    assert binned.filter(pl.col("golden"))["reason"].null_count() == 36
    assert dict(zip(binned["run"], binned["ssp_exec_time_ns"], strict=True)) == times
    assert meta.runs_golden == 36 and meta.runs_total == 40
    assert meta.bin_low_ns == min(v for k, v in times.items() if k not in outliers)
    assert meta.bin_high_ns == int(meta.bin_low_ns * 1.05)
    assert meta.reasons == {"outside_bin": 4}


def test_bin_runs_incomplete_and_non_measure_runs():
    times = {r: 200_000 for r in range(6)}
    extra = ((6, "ssp"), (7, "timing"), (8, "measure"))  # "measure" (legacy phase name) is not read any more
    ex, runs = make_frames(times, drop=((2, 3), (4, 2)), extra_runs=extra)
    binned, meta = bin_runs(ex, runs, PLAN, margin=PLAN.margin_for_binning(None))  # guidance: 5 % at 100 us
    reasons = dict(zip(binned["run"], binned["reason"], strict=True))
    assert reasons == {0: None, 1: None, 2: "incomplete", 3: None, 4: "incomplete", 5: None, 6: "incomplete"}
    assert binned.filter(pl.col("run") == 4)["ssp_exec_time_ns"].item() is None  # its SSP exec is missing
    assert binned.filter(pl.col("run") == 2)["ssp_exec_time_ns"].item() == 200_000
    assert meta.margin == 0.05 and meta.reasons == {"incomplete": 3}


def test_bin_runs_with_predecessor_needs_pred_executions():
    plan = PLAN.model_copy(update={"predecessor_count": 2})
    ex, runs = make_frames({0: 200_000, 1: 200_000})
    pred = pl.DataFrame(
        {
            "run": [0, 0],
            "segment": ["pred", "pred"],
            "exec_index": [0, 1],
            "gpu_start_ns": [0, 10],
            "gpu_end_ns": [10, 20],
        }
    ).cast(dict(ex.schema))
    binned, _ = bin_runs(pl.concat([ex, pred]), runs, plan, 0.02)
    assert binned["reason"].to_list() == [None, "incomplete"]


def test_binning_margin_choice_and_range():
    """The bin stage's margin: analysis.margin when set, else the guidance table's for the measured time;
    AnalysisConfig rejects margins outside (0, 0.5]."""
    assert PLAN.margin_for_binning(0.03) == 0.03
    assert make_plan(exec_time_ns=40_000).margin_for_binning(None) == 0.05
    assert make_plan(exec_time_ns=2_000_000).margin_for_binning(None) == 0.02
    assert AnalysisConfig(margin=0.5).margin == 0.5 and AnalysisConfig().margin is None
    for bad in (0.0, -0.01, 0.7):
        with pytest.raises(ValidationError):
            AnalysisConfig(margin=bad)


def test_sse_and_ssp_runs_binned_separately():
    """SSE runs (SSE execution 150 us) and SSP runs (SSP execution 200 us): each kind has its own
    most-populated window; together they would drop one kind. Completeness per kind."""
    rng = np.random.default_rng(2)
    ssp = {r: int(200_000 + rng.integers(-3000, 3000)) for r in range(30)}
    sse = {r: int(150_000 + rng.integers(-2000, 2000)) for r in range(30, 75)}
    ssp[7], sse[40], sse[41] = 300_000, 100_000, 180_000  # planted outliers
    ex, runs = make_frames(ssp, sse_times=sse, drop=((50, 0),), extra_runs=((80, "reference"),))
    binned, meta = bin_runs(ex, runs, PLAN, 0.05)
    assert binned.schema == pl.Schema(BINNED_SCHEMA)
    reason = dict(zip(binned["run"], binned["reason"], strict=True))
    assert 80 not in reason  # the reference run is not binned
    assert {r for r, x in reason.items() if x} == {7, 40, 41, 50}
    assert reason[50] == "incomplete" and reason[40] == reason[41] == reason[7] == "outside_bin"
    b_sse = binned.filter(pl.col("phase") == "sse")
    assert b_sse.height == 45 and b_sse["ssp_exec_time_ns"].null_count() == 45
    assert dict(zip(b_sse["run"], b_sse["bin_exec_time_ns"], strict=True)) == sse
    assert meta.bins["sse"].runs_golden == 42 and meta.bins["sse"].runs_total == 45
    assert meta.bins["sse"].bin_low_ns == min(v for k, v in sse.items() if k not in (40, 41, 50))
    assert meta.bins["ssp"].runs_golden == 29 and meta.bins["ssp"].reasons == {"outside_bin": 1}
    # the SSP kind's numbers stay at the top level (as before SSE runs existed)
    top = (meta.runs_total, meta.runs_golden, meta.bin_low_ns)
    assert top == (30, 29, meta.bins["ssp"].bin_low_ns)
    # one window over both kinds would have dropped every SSP run
    assert golden_window(np.array([*ssp.values(), *sse.values()]), 0.05)[1] < min(ssp.values())


def test_sse_run_completeness_uses_its_own_length():
    """An SSE run with the SSP runs' length (4 main executions) is incomplete; SSP runs need 4."""
    ex, runs = make_frames({0: 200_000}, sse_times={1: 150_000, 2: 150_000})
    extra = pl.DataFrame(
        {"run": [2, 2], "segment": ["main", "main"], "exec_index": [2, 3], "gpu_start_ns": [0, 1], "gpu_end_ns": [1, 2]}
    ).cast(dict(ex.schema))
    binned, meta = bin_runs(pl.concat([ex, extra]), runs, PLAN, 0.05)
    assert binned["reason"].to_list() == [None, None, "incomplete"]
    assert meta.bins["sse"].reasons == {"incomplete": 1}


def test_synthetic_planted_outliers_of_both_kinds():
    d = generate(SynthSpec(runs=40, sse_runs=50, outlier_runs=(3, 17), sse_outlier_runs=(0, 9, 33)))
    binned, meta = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    dropped = binned.filter(~pl.col("golden"))
    assert dropped.filter(pl.col("phase") == "ssp")["run"].to_list() == [3, 17]
    assert dropped.filter(pl.col("phase") == "sse")["run"].to_list() == [40 + 0, 40 + 9, 40 + 33]
    assert meta.bins["sse"].runs_golden == 47 and meta.runs_golden == 38
    # SSE runs are binned on their SSE execution: its duration, null ssp_exec_time_ns
    sse = binned.filter(pl.col("phase") == "sse")
    assert sse["ssp_exec_time_ns"].is_null().all() and (sse["bin_exec_time_ns"] > 0).all()
