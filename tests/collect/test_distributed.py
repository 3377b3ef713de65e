"""Several GPUs for real processes: torch.distributed over gloo with simulated GPUs, world_size 2.

End to end through Snakemake for one all-reduce scenario: per-rank raw files, equal run and execution counts on
every rank, SSP within a few % of the truth on every rank and combined, caching (a second run has nothing to
do). And the plan broadcast: a rank whose own timing would give another plan still follows rank 0's. Needs
torch (the CPU build: pip install -e '.[test,torch]'; skipped without it, except in CI, which must run it); the
simulated collectives are each GPU's side from the model, not real data transfers (fingrav.collect.distributed)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest
import yaml
from conftest import snakemake, tiny_config
from optional import import_or_skip

from fingrav.contracts.multigpu import CombinedResult
from fingrav.contracts.result import value_ci
from fingrav.rawio import read_model
from fingrav.replay_check import replayed_columns

import_or_skip("torch.distributed", "pip install -e '.[test,torch]'")

# whole multi-process collections (and Snakemake): seconds to a minute
pytestmark = pytest.mark.slow

SCENARIO = "ar-1m"


def x2_config() -> dict:
    data = tiny_config(sweep="tiny-x2", max_runs=300)
    data["device"]["world_size"] = 2
    data["scenarios"] = [{"name": SCENARIO, "kernel": {"kind": "allreduce", "size_bytes": 1 << 20}}]
    return data


@pytest.fixture(scope="module")
def x2_run(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("x2")
    cfg = work / "x2.yaml"
    cfg.write_text(yaml.safe_dump(x2_config()))
    snakemake(work, "--configfile", str(cfg), "--cores", "2")
    return work


def test_every_rank_has_its_files_and_the_same_runs(x2_run: Path) -> None:
    res = x2_run / "results" / "tiny-x2"
    for k in (0, 1):
        assert (res / "calibration" / f"gpu{k}.json").is_file()
        for f in ("clock.parquet", "steps.parquet", "samples.parquet"):
            assert (res / "raw" / f"gpu{k}" / "calibration" / f).is_file()
        assert (res / "truth" / f"gpu{k}" / f"{SCENARIO}.parquet").is_file()
        assert (res / "binned" / f"gpu{k}" / f"{SCENARIO}.parquet").is_file()
        for f in ("lois.parquet", "summary.json"):
            assert (res / "profiles" / f"gpu{k}" / SCENARIO / f).is_file()
    raw0, raw1 = res / "raw" / "gpu0" / SCENARIO, res / "raw" / "gpu1" / SCENARIO
    for d in (raw0, raw1):
        for f in ("executions.parquet", "runs.parquet", "clock.parquet", "samples.parquet", "plan.json"):
            assert (d / f).is_file(), d / f
    plans = [json.loads((d / "plan.json").read_text()) for d in (raw0, raw1)]
    keys = ("runs", "sse_runs", "executions_per_run", "sse_executions_per_run", "ssp_index", "tail", "idle_ns")
    assert [p["rank"] for p in plans] == [0, 1] and all(p["world_size"] == 2 for p in plans)
    assert all(plans[0][k] == plans[1][k] for k in keys)
    assert plans[1]["provenance"]["distributed"]["backend"] == "gloo"
    assert plans[1]["provenance"]["distributed"]["env"]["NCCL_NVLS_ENABLE"] == "0"
    runs = [pl.read_parquet(d / "runs.parquet") for d in (raw0, raw1)]
    cols = ["run", "phase", "delay_ns", "idle_ns"]
    assert runs[0].select(cols).equals(runs[1].select(cols))  # same schedule from the shared seed
    # the simulated GPUs are different devices: their own clocks and samples
    assert runs[0]["host_start_ns"][0] != runs[1]["host_start_ns"][0]
    key = ["run", "segment"]
    execs = [pl.read_parquet(d / "executions.parquet").group_by(key).len().sort(key) for d in (raw0, raw1)]
    assert execs[0].equals(execs[1])  # equal execution counts on every rank, run by run


def test_ssp_matches_truth_on_every_rank_and_combined(x2_run: Path) -> None:
    res = x2_run / "results" / "tiny-x2"
    row = replayed_columns(res)[SCENARIO]  # every number (metrics.csv: the multi-GPU columns too) and the text
    assert row["kernel"] == "allreduce 1MiB bf16" and row["world_size"] == 2
    for col in ("power_vs_truth_pct", "rank1_power_vs_truth_pct", "combined_power_vs_truth_pct"):
        assert abs(float(row[col])) <= 3.0, (col, row[col])
    combined = read_model(res / "profiles" / "combined" / f"{SCENARIO}.json", CombinedResult)
    assert row["valid"] == "true" and combined.row["rank1_valid"] and combined.row["combined_valid"]
    assert (
        combined.combined.valid and combined.ranks[1].valid and combined.combined.power.value == row["combined_power_w"]
    )
    total, lo, hi = value_ci(row, "combined_power_w")
    assert total == pytest.approx(row["power_w"] + row["rank1_power_w"])
    assert lo < total < hi
    assert [r.rank for r in combined.ranks] == [0, 1]
    html = (res / "report" / "index.html").read_text()
    assert "Several GPUs" in html and "Fig. 10" in html
    html = (res / "report" / "index.html").read_text(encoding="utf-8")  # profiles: drawn by the browser
    assert f'id="fig-profile_{SCENARIO}"' in html and f'id="fig-profile_{SCENARIO}_gpu1"' in html
    assert (res / "report" / "collectives_fig10.png").is_file() and (res / "report" / "gpus_profiles.png").is_file()


def test_outputs_are_declared_so_nothing_reruns(x2_run: Path) -> None:
    proc = snakemake(x2_run, "--configfile", str(x2_run / "x2.yaml"), "--cores", "1", "-n")
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_plan_broadcast_overrides_a_slower_rank(x2_run: Path, tmp_path: Path) -> None:
    """Rank 1's simulated GPU has much longer launch gaps, so its own timing would plan other execution counts;
    it still follows rank 0's broadcast plan and issues exactly the same executions."""
    from fingrav import rawio
    from fingrav.collect.distributed import collect_distributed
    from fingrav.collect.plan import make_plan
    from fingrav.config import parse_config
    from fingrav.contracts.plan import Plan
    from fingrav.layout import SweepLayout

    cfg = parse_config(x2_config())
    src, layout = SweepLayout(x2_run / "results" / "tiny-x2"), SweepLayout(tmp_path / "results" / "tiny-x2")
    for k in (0, 1):
        layout.calibration_json(k).parent.mkdir(parents=True, exist_ok=True)
        layout.calibration_json(k).write_text(src.calibration_json(k).read_text())
    policy = cfg.policy_for(SCENARIO).model_copy(update={"runs": 20, "sse_runs": 20})
    plan0 = collect_distributed(
        cfg.device, cfg.scenario(SCENARIO), policy, cfg.seed, layout, rank_sim_overrides={1: {"launch_gap_us": 60.0}}
    )
    assert plan0.to_json() == json.loads(layout.plan(SCENARIO, 0).read_text())  # rank 0's plan.json
    plan1 = rawio.read_model(layout.plan(SCENARIO, 1), Plan)
    local0, local1 = plan0.rank_local, plan1.rank_local
    assert local0 is not None and local1 is not None and local1.probe is not None
    assert local1.cycle_ns > local0.cycle_ns + 40_000
    own = make_plan(local1.exec_time_ns, local1.cycle_ns, plan0.sensor, local1.probe, policy)
    assert own.executions_per_run != plan0.executions_per_run  # rank 1 alone would have planned otherwise
    assert plan1.executions_per_run == plan0.executions_per_run and plan1.runs == plan0.runs
    key = ["run", "segment"]
    e0, e1 = (
        pl.read_parquet(layout.scenario_dir(SCENARIO, k) / "executions.parquet").group_by(key).len().sort(key)
        for k in (0, 1)
    )
    assert e0.equals(e1)
    assert layout.truth(SCENARIO, 1).is_file()


# --------------------------------------------------------------------------- one rank dies
# Imported at start-up by every spawned rank (PYTHONPATH): rank R is killed (SIGKILL, like the OOM killer or a
# crash) at its N-th run or N-th raw file, as FINGRAV_TEST_RANK_DIES="R:runs|writing:N" says.
RANK_DIES = """
import os
import signal

_spec = os.environ.get("FINGRAV_TEST_RANK_DIES")
if _spec:
    _rank, _where, _n = _spec.split(":")
    _rank, _n, _calls = int(_rank), int(_n), [0]
    from fingrav import rawio
    from fingrav.collect import runner

    def _count(n=1):
        _calls[0] += n
        if _calls[0] >= _n:
            os.kill(os.getpid(), signal.SIGKILL)

    if _where == "runs":  # a run made alone (timing, probe, reference) or in a batch of measure runs
        _run, _measure = runner._Recorder.run, runner._Recorder.measure

        def _dying_run(self, *a, **k):
            if self.sync.rank == _rank:
                _count()
            return _run(self, *a, **k)

        def _dying_measure(self, run_ids, *a, **k):
            if self.sync.rank == _rank:
                _count(len(run_ids))
            return _measure(self, run_ids, *a, **k)

        runner._Recorder.run, runner._Recorder.measure = _dying_run, _dying_measure
    else:
        _write = rawio.write_table

        def _dying_write(path, *a, **k):
            if f"gpu{_rank}" in str(path):
                _count()
            return _write(path, *a, **k)

        rawio.write_table = _dying_write
"""


@pytest.fixture(scope="module")
def x2_calibrated(tmp_path_factory) -> Path:
    """A results folder with both simulated GPUs calibrated (no Snakemake)."""
    from fingrav.config import parse_config
    from fingrav.layout import SweepLayout
    from fingrav.stages import calibrate

    root = tmp_path_factory.mktemp("dies") / "tiny-x2"
    cfg = parse_config(x2_config())
    calibrate.run(SweepLayout(root), cfg.device, cfg.calibration, cfg.seed)
    return root


@pytest.mark.parametrize("where", ["runs:12", "writing:3"])
def test_one_rank_dying_fails_the_collection_loudly_and_leaves_nothing_complete(
    x2_calibrated: Path, tmp_path: Path, monkeypatch, where: str
) -> None:
    """Rank 1 is killed in the middle of the runs (or between two of its raw files): the collection fails at once
    with a DeviceError naming the dead rank (torch.multiprocessing terminates the others: rank 0 waits in a
    barrier), not after the 30-minute process-group timeout; no receipt is written for any GPU, rank 1 has no
    manifest, and the earlier collection of both GPUs is in the archive."""
    import shutil
    import time

    from fingrav import rawio
    from fingrav.config import parse_config
    from fingrav.errors import DeviceError
    from fingrav.layout import SweepLayout
    from fingrav.stages import collect

    layout = SweepLayout(tmp_path / "tiny-x2")
    shutil.copytree(x2_calibrated, layout.root)
    cfg = parse_config(x2_config())
    policy = cfg.policy_for(SCENARIO).model_copy(update={"runs": 20, "sse_runs": 20})
    collect.run(layout, cfg.device, cfg.scenario(SCENARIO), policy, cfg.seed)  # an earlier, complete collection
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(RANK_DIES)
    # the hook first, the checkout under test after it (a worktree run puts its own code on PYTHONPATH)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(hooks), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("FINGRAV_TEST_RANK_DIES", f"1:{where}")
    t0 = time.monotonic()
    with pytest.raises(DeviceError, match=r"multi-GPU collection failed.*(process 1|SIGKILL)") as exc:
        collect.run(layout, cfg.device, cfg.scenario(SCENARIO), policy, cfg.seed)
    assert time.monotonic() - t0 < 120, "the surviving rank waited for the process-group timeout"
    assert "SIGKILL" in str(exc.value)
    for k in (0, 1):
        assert not layout.collected(SCENARIO, k).exists()  # nothing looks complete to the pipeline
        (old,) = layout.archive_dir.glob(f"{SCENARIO}-gpu{k}-*")
        assert rawio.verify_manifest(old)  # the earlier collection, archived whole
    assert not (layout.scenario_dir(SCENARIO, 1) / rawio.MANIFEST).exists()


def test_a_lockstep_group_on_other_gpus_calibrates_them_first(x2_calibrated: Path, tmp_path: Path) -> None:
    """The group was calibrated on simulated cards 0 and 1 (device.index 0); its collect job is then given cards 2
    and 3 (a scheduler's pick): each rank calibrates the card it is on, collects with that calibration and leaves
    it beside its raw data (raw/gpu<k>/<scenario>/calibration.json), so calibration and collection are of one GPU."""
    import shutil

    from fingrav import rawio
    from fingrav.collect.distributed import collect_distributed
    from fingrav.collect.gpu_calibration import calibrated_gpu
    from fingrav.config import parse_config
    from fingrav.contracts.calibration import Calibration
    from fingrav.layout import SweepLayout

    layout = SweepLayout(tmp_path / "tiny-x2")
    shutil.copytree(x2_calibrated, layout.root)
    cfg = parse_config(x2_config())
    moved = cfg.device.model_copy(update={"index": 2})
    policy = cfg.policy_for(SCENARIO).model_copy(update={"runs": 10, "sse_runs": 10})
    # (the collect stage's ownership check, which refuses another configured device index, is bypassed: under a
    # scheduler the configured index stays and the physical GPUs change)
    collect_distributed(moved, cfg.scenario(SCENARIO), policy, cfg.seed, layout, calibration=cfg.calibration)
    for k in (0, 1):
        own = rawio.read_model(layout.scenario_calibration(SCENARIO, k), Calibration)
        sweep = rawio.read_model(layout.calibration_json(k), Calibration)
        assert calibrated_gpu(own) is not None and calibrated_gpu(own) != calibrated_gpu(sweep)
        assert rawio.verify_manifest(layout.scenario_dir(SCENARIO, k))
