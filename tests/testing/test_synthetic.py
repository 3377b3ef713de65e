"""`fingrav.testing.synthetic`: the synthetic raw data the analysis tests rely on has the shapes and known answers
its docstring promises (runs, executions per run, true power by role, the energy counter, truth rows)."""

from __future__ import annotations

import polars as pl
import pytest

from fingrav.testing.synthetic import SynthSpec, generate


def test_runs_executions_and_truth_by_role() -> None:
    spec = SynthSpec(runs=4, sse_runs=2, trailing=1)
    d = generate(spec)
    runs, ex, truth, plan = d["runs"], d["executions"], d["truth"], d["plan"]
    assert runs["phase"].to_list() == ["ssp"] * 4 + ["sse"] * 2
    per_run = dict(ex.group_by("run").len().iter_rows())
    assert all(per_run[r] == spec.ssp_index + spec.tail + spec.trailing for r in range(4))
    assert all(per_run[r] == spec.warmups + 1 for r in (4, 5))
    assert plan.runs == 4 and plan.sse_runs == 2 and plan.ssp_index == spec.ssp_index and plan.tail == spec.tail
    t = truth.filter(pl.col("channel") == "total")
    lv = spec.levels_mw
    ssp = t.filter(pl.col("run") < 4)
    assert set(ssp["exec_index"]) == {spec.warmups, *range(spec.ssp_index, spec.ssp_index + spec.tail)}
    assert ssp.filter(pl.col("exec_index") >= spec.ssp_index)["power_mw"].unique().to_list() == [lv["ssp"]]
    assert t.filter(pl.col("run") >= 4)["power_mw"].unique().to_list() == [lv["sse"]]
    assert (ex["gpu_end_ns"] > ex["gpu_start_ns"]).all()


def test_energy_counter_reads_the_true_energy() -> None:
    d = generate(SynthSpec(runs=3, sse_runs=0, counter_scale=1.0))
    r = d["runs"]
    assert (r["energy_end_mj"] > r["energy_start_mj"]).all()
    assert (r["energy_start_mj"].diff().drop_nulls() > 0).all()
    off = generate(SynthSpec(runs=3, sse_runs=0, energy_counter=False))["runs"]
    assert off["energy_start_mj"].is_null().all()


def test_seeded_and_checked() -> None:
    a, b = generate(SynthSpec(runs=3, seed=5)), generate(SynthSpec(runs=3, seed=5))
    assert a["samples"].equals(b["samples"]) and a["runs"].equals(b["runs"])
    assert not a["runs"].equals(generate(SynthSpec(runs=3, seed=6))["runs"])
    with pytest.raises(ValueError, match="truth_rows must be"):
        generate(SynthSpec(truth_rows="some"))
    everything = generate(SynthSpec(runs=2, sse_runs=1, truth_rows="all"))
    n_exec = everything["executions"].height
    assert everything["truth"].filter(pl.col("channel") == "total").height == n_exec
