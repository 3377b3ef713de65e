"""`fingrav.collect.runner` on the simulated GPU: the steps of `collect_scenario` (kernels, timing, probe, reference
run, shuffled measure runs), the raw tables it writes and what the plan records, the lockstep checks of several
GPUs (a fake `Lockstep`), and the recorder's truth selection. Short policies: each collection takes ~1 s."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

from fingrav import rawio
from fingrav.collect import runner
from fingrav.collect.runner import Kernels, Solo, collect_scenario, merge_probes
from fingrav.config import GemmKernel, GemvKernel, Predecessor, RunPolicy, Scenario, SimConfig
from fingrav.contracts.plan import Probe
from fingrav.device.sim import SimulatedGPU
from fingrav.errors import DeviceError
from fingrav.layout import SCENARIO_RAW_FILES
from fingrav.testing.plans import sim_calibration

FAST = {"runs": 5, "sse_runs": 3, "max_runs": 10, "probe_ms": 100.0, "reference_ms": 0.0}
GEMM = GemmKernel(m=2048, n=2048, k=2048)


def _device(seed: int = 4) -> SimulatedGPU:
    return SimulatedGPU(SimConfig(preset="mi300x"), seed=seed)


def _collect(tmp_path: Path, scenario: Scenario, seed: int = 1, **policy: Any):
    return collect_scenario(_device(), scenario, RunPolicy(**{**FAST, **policy}), sim_calibration(), seed, tmp_path)


# --------------------------------------------------------------------------- small types
def test_solo_is_a_lockstep_of_one() -> None:
    s = Solo()
    s.barrier()
    assert s.broadcast(3) == 3 and s.all_gather("x") == ["x"] and s.describe() == {"rank": 0, "world_size": 1}


def test_merge_probes_takes_the_most_conservative() -> None:
    base = {"busy_ns": 1, "executions": 1, "idle_level_mw": 1.0, "level_mw": 2.0, "peak_mw": 2.0, "tol_mw": 0.1}
    a = Probe(**base, t_stable_ns=5, t_recover_ns=9, settled=True, samples=10)
    b = Probe(**base, t_stable_ns=7, t_recover_ns=3, settled=False, samples=10)
    m = merge_probes([a, b])
    assert (m.t_stable_ns, m.t_recover_ns, m.settled) == (7, 9, False)
    assert merge_probes([a]) is a


def test_kernels_segments_put_the_predecessor_first() -> None:
    dev = _device()
    scen = Scenario(name="p", kernel=GEMM, predecessor=Predecessor(kernel=GemvKernel(m=4096, k=4096), count=7))
    k = Kernels.prepare(dev, scen)
    assert k.names == ["pred", "main"] and k.pred_count == 7
    assert k.segments(4) == [(k.pred, 7), (k.main, 4)]
    assert set(k.describe()) == {"main", "predecessor"}
    alone = Kernels.prepare(dev, Scenario(name="a", kernel=GEMM))
    assert alone.names == ["main"] and alone.segments(2) == [(alone.main, 2)] and set(alone.describe()) == {"main"}


# --------------------------------------------------------------------------- a whole collection
def test_collect_scenario_writes_every_raw_table_and_the_plan(tmp_path: Path) -> None:
    plan = _collect(tmp_path, Scenario(name="g", kernel=GEMM), reference_ms=50.0)
    for name in SCENARIO_RAW_FILES:
        assert (tmp_path / name).exists(), name
    assert rawio.verify_manifest(tmp_path)
    runs = pl.read_parquet(tmp_path / "runs.parquet")
    phases = runs["phase"].to_list()
    assert phases[:3] == ["timing", "probe", "reference"]
    assert sorted(phases[3:]) == sorted(["sse"] * plan.sse_runs + ["ssp"] * plan.runs)
    assert phases[3:] != sorted(phases[3:]), "SSE and SSP runs are shuffled"
    assert runs["run"].to_list() == list(range(len(phases)))
    ex = pl.read_parquet(tmp_path / "executions.parquet")
    per_run = dict(ex.group_by("run").len().iter_rows())
    for run, phase in zip(runs["run"], phases, strict=True):
        want = {"sse": plan.sse_executions_per_run, "ssp": plan.executions_per_run, "reference": 1}.get(phase)
        if want is not None:
            assert per_run[run] == want, (run, phase)
    # the reference run: one record spanning it, exec_index = executions - 1 (unstamped)
    ref = ex.filter(pl.col("run") == 2)
    assert ref.height == 1 and int(ref["exec_index"][0]) + 1 == plan.reference_executed >= plan.reference_executions
    assert plan.reference_unstamped is True and plan.provenance.stage == "collect"
    # delays are within one sensor period, idle as planned
    assert (runs.filter(pl.col("phase").is_in(["sse", "ssp"]))["delay_ns"] < plan.delay_max_ns).all()
    clock = pl.read_parquet(tmp_path / "clock.parquet")
    assert clock.filter(pl.col("source") == "burst").height == 2 * runner.CLOCK_BURST
    assert clock.filter(pl.col("source") == "run")["run"].to_list() == runs["run"].to_list()


def test_base_runs_are_the_sse_run_without_its_sse(tmp_path: Path) -> None:
    """run_policy.sse_base_runs: runs of phase "base" shuffled with the SSE and SSP runs, each with the SSE run's
    executions but the SSE (sse_index main executions), after the same idle."""
    plan = _collect(tmp_path, Scenario(name="g", kernel=GEMM), sse_base_runs=4)
    assert plan.base_runs == 4
    runs = pl.read_parquet(tmp_path / "runs.parquet")
    measure = runs.filter(pl.col("phase").is_in(["sse", "ssp", "base"]))
    assert sorted(measure["phase"].to_list()) == sorted(["base"] * 4 + ["sse"] * plan.sse_runs + ["ssp"] * plan.runs)
    ex = pl.read_parquet(tmp_path / "executions.parquet")
    base = ex.join(runs.filter(pl.col("phase") == "base").select("run"), on="run")
    per_run = base.group_by("run").agg(n=pl.len(), top=pl.col("exec_index").max())
    assert per_run.height == 4 and (per_run["n"] == plan.sse_index).all()
    assert (per_run["top"] == plan.sse_index - 1).all()
    assert (measure["idle_ns"] == plan.idle_ns).all() and (measure["delay_ns"] < plan.delay_max_ns).all()


def test_collect_scenario_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    scen = Scenario(name="g", kernel=GemvKernel(m=8192, k=8192))
    _collect(tmp_path / "a", scen)
    _collect(tmp_path / "b", scen)
    _collect(tmp_path / "c", scen, seed=2)
    a, b, c = (pl.read_parquet(tmp_path / x / "runs.parquet") for x in "abc")
    assert a.select("phase", "delay_ns").equals(b.select("phase", "delay_ns"))
    assert not a.select("phase", "delay_ns").equals(c.select("phase", "delay_ns"))


def test_truth_is_kept_for_the_profiled_executions_only(tmp_path: Path) -> None:
    scen = Scenario(name="p", kernel=GEMM, predecessor=Predecessor(kernel=GemvKernel(m=4096, k=4096), count=3))
    truth = tmp_path / "truth.parquet"
    plan = collect_scenario(_device(), scen, RunPolicy(**FAST), sim_calibration(), 1, tmp_path / "raw", truth)
    t = pl.read_parquet(truth).filter(pl.col("channel") == "total")
    assert set(t["segment"]) == {"main"}
    wanted = {0, plan.sse_index, *range(plan.ssp_index, plan.ssp_index + plan.tail)}  # exec 0: the interleaved one
    assert set(t["exec_index"]) == wanted
    assert (t["power_mw"] > 0).all()


# --------------------------------------------------------------------------- several GPUs: the lockstep checks
class _Ranks:
    """A fake Lockstep for rank 0 of two: the other rank answers `other` in all_gather."""

    rank, world_size = 0, 2

    def __init__(self, other: Any = None) -> None:
        self.other = other
        self.barriers = 0

    def barrier(self) -> None:
        self.barriers += 1

    def broadcast(self, obj: Any) -> Any:
        return obj

    def all_gather(self, obj: Any) -> list[Any]:
        other = self.other if self.other is not None and isinstance(obj, tuple) and len(obj) == 2 else obj
        return [obj, other]

    def describe(self) -> dict[str, Any]:
        return {"rank": 0, "world_size": 2, "backend": "fake"}


@pytest.mark.parametrize("batch_runs", [False, True])
def test_lockstep_records_rank_fields_and_waits_before_every_run(tmp_path: Path, batch_runs: bool) -> None:
    """A barrier before every run; on a device that generates its measure runs in batches (the simulator, whose
    ranks' clocks are virtual) before every batch instead."""
    sync = _Ranks()
    dev = _device()
    dev.batch_runs = batch_runs
    plan = collect_scenario(
        dev, Scenario(name="g", kernel=GEMM), RunPolicy(**FAST), sim_calibration(), 1, tmp_path, sync=sync
    )
    runs = pl.read_parquet(tmp_path / "runs.parquet")
    measure = runs.filter(pl.col("phase").is_in(["sse", "ssp"])).height
    assert measure > 1
    if batch_runs:
        assert sync.barriers == runs.height - measure + math.ceil(measure / runner.DRAIN_EVERY)
    else:
        assert sync.barriers == runs.height
    assert plan.rank == 0 and plan.world_size == 2 and plan.distributed.to_json() == sync.describe()
    assert plan.rank_local is not None and plan.rank_local.probe is not None and len(plan.probes_by_rank) == 2


def test_ranks_that_issued_unequal_work_fail(tmp_path: Path) -> None:
    sync = _Ranks(other=(1, 1))  # the other rank says it issued 1 run of 1 execution
    with pytest.raises(DeviceError, match=r"ranks issued unequal \(runs, executions\)"):
        collect_scenario(
            _device(), Scenario(name="g", kernel=GEMM), RunPolicy(**FAST), sim_calibration(), 1, tmp_path, sync=sync
        )


def test_probe_analysis_sees_only_the_probe_and_its_idle(tmp_path: Path) -> None:
    plan = _collect(tmp_path, Scenario(name="g", kernel=GEMM))
    p = plan.probe
    assert p is not None and p.executions >= RunPolicy(**FAST).warmups + 2
    assert p.level_mw > p.idle_level_mw > 0 and p.samples > 10
    assert np.isfinite(p.tol_mw) and p.t_recover_ns > 0


def test_the_probe_read_from_the_reference_run(tmp_path: Path) -> None:
    """run_policy.probe_source 'reference': no probe run; the reference run follows the timing run, its start is
    the probe (the same settling time as a probe run of its own, same seed), the measure runs follow it, and the
    scenario takes less GPU time (the span of its power samples)."""
    scen = Scenario(name="g", kernel=GEMM)
    kw = {"reference_ms": 300.0, "reference_max_ms": 300.0}
    sep = _collect(tmp_path / "sep", scen, **kw, probe_source="separate")
    ref = _collect(tmp_path / "ref", scen, **kw, probe_source="reference")
    default = _collect(tmp_path / "default", scen, **kw)  # a probe run of its own unless asked
    runs = pl.read_parquet(tmp_path / "ref" / "runs.parquet")
    phases = runs["phase"].to_list()
    assert phases[:2] == ["timing", "reference"] and "probe" not in phases
    assert runs["run"].to_list() == list(range(len(phases)))
    assert sorted(phases[2:]) == sorted(["sse"] * ref.sse_runs + ["ssp"] * ref.runs)
    ex = pl.read_parquet(tmp_path / "ref" / "executions.parquet")
    assert ex.filter(pl.col("run") == 1).height == 1  # the unstamped reference run: one record
    assert ref.probe is not None and sep.probe is not None and default.probe is not None
    assert ref.probe.source == "reference" and sep.probe.source == default.probe.source == "run"
    period = sim_calibration().total.period_ns
    assert abs(ref.probe.t_stable_ns - sep.probe.t_stable_ns) <= 2 * period
    assert ref.probe.settled and ref.probe.t_recover_ns > 0 and ref.probe.level_mw > ref.probe.idle_level_mw
    assert ref.probe.busy_ns == pytest.approx(100e6, rel=0.1)  # the probe window: probe_ms of executions
    assert ref.reference_executed == ref.reference_executions

    def span(d: str) -> int:
        t = pl.read_parquet(tmp_path / d / "samples.parquet")["t_ns"]
        return int(t.max() - t.min())

    assert span("ref") < span("sep") - 100e6  # at least the probe's 100 ms of load saved


def test_probe_source_reference_needs_a_reference_run_as_long_as_the_probe() -> None:
    with pytest.raises(ValueError, match=r"run_policy.probe_source 'reference' needs run_policy.reference_ms"):
        RunPolicy(probe_source="reference", reference_ms=50.0, probe_ms=100.0)
    assert RunPolicy(reference_ms=0.0).probe_source == "separate"  # the default needs no reference run


def test_a_probe_too_short_for_the_sensor_is_lengthened_not_an_error() -> None:
    """A sensor of ~95 ms (+-33 ms) gave the default 400 ms probe 3 samples on this seed: the scenario failed with a
    ConfigError naming run_policy.probe_ms after calibration (the fidelity matrix, seed 14: 4 of 200 scenarios). The
    probe now spans at least the sensor's settling and `PROBE_MIN_PERIODS` periods (`probe_load_ns`)."""
    import fingrav
    from fingrav.collect.estimate import PROBE_MIN_PERIODS

    slow = {"sensor_period_ms": 95.0, "sensor_period_jitter_ms": 33.0, "sensor_window_ms": 0.07, "sensor_lag_ms": 25.0}
    r = fingrav.profile(
        {"kind": "gemv", "m": 1024, "k": 4096},
        device={"backend": "sim", "sim": {"preset": "mi300x", "overrides": slow}},
        policy={"reference_ms": 0, "max_runs": 40, "min_lois": 10},
        calibration={"steps": 6, "step_on_ms": 800, "step_off_ms": 800, "clock_bursts": 2, "clock_reads_per_burst": 5},
        seed=4,
    )
    probe = r.summary.plan.probe
    assert probe is not None and probe.busy_ns >= PROBE_MIN_PERIODS * 95e6 > 400e6
    assert r.power_w is not None and r.valid
