"""Collectives and several GPUs without torch: config validation, the simulator's collective model, the
file layout of ranks, the runner's lockstep (ranks as threads), combining ranks, the report's multi-GPU
part, and the torch device's collective handles on a fake torch. The multi-process gloo tests are in
tests/collect/test_distributed.py (they need torch)."""

from __future__ import annotations

import copy
import json
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from conftest import ROOT, tiny_config

from fingrav.config import AllGatherKernel, AllReduceKernel, DeviceConfig, GemmKernel, SimConfig, parse_config
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.multigpu import Combined, CombinedChannel, CombinedResult, RankResult
from fingrav.contracts.plan import Plan, Probe
from fingrav.contracts.profile import Estimate, ScenarioSummary
from fingrav.contracts.provenance import Provenance
from fingrav.errors import ConfigError, DeviceError
from fingrav.layout import SweepLayout
from fingrav.testing.plans import sim_calibration

MS = 1_000_000
US = 1_000


def _x2(**device: Any) -> dict:
    data = copy.deepcopy(tiny_config())
    data["device"].update(world_size=2, **device)
    data["scenarios"].append({"name": "ar-64k", "kernel": {"kind": "allreduce", "size_bytes": 65536}})
    return data


# --------------------------------------------------------------------------- config
def test_collective_configs_and_labels() -> None:
    cfg = parse_config(_x2())
    assert cfg.device.world_size == 2 and cfg.device.dist_backend is None
    k = cfg.scenario("ar-64k").kernel
    assert isinstance(k, AllReduceKernel) and k.label() == "allreduce 64KiB bf16"
    assert AllGatherKernel(size_bytes=1 << 30).label() == "allgather 1GiB bf16"
    assert AllReduceKernel(size_bytes=3 * 512 << 20, dtype="fp32").label() == "allreduce 1536MiB fp32"
    assert cfg.scenario("ar-64k").has_collective and not cfg.scenario("cb-2k").has_collective


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["device"].update(world_size=1), ["scenario 'ar-64k'", "device.world_size must be >= 2", "is 1"]),
        (lambda d: d["device"].update(world_size=0), ["device.world_size", "greater than or equal to 1"]),
        (lambda d: d["scenarios"][3]["kernel"].update(size_bytes=3), ["size_bytes=3", "whole number of bf16"]),
        (lambda d: d["scenarios"][3]["kernel"].update(size_bytes=0), ["scenarios['ar-64k'].kernel.size_bytes", "0"]),
        (lambda d: d["scenarios"][3]["kernel"].update(bytes=8), ["scenarios['ar-64k'].kernel.bytes", "unknown key"]),
        (
            lambda d: d["scenarios"][3].update(kernel={"kind": "allgather", "size_bytes": 6}),
            ["scenarios['ar-64k'].kernel", "allgather size_bytes=6", "device.world_size=2"],
        ),
        (lambda d: d["device"].update(dist_backend="nccl"), ["'nccl' needs GPUs"]),
        (lambda d: d["device"].update(dist_backend="mpi"), ["device.dist_backend", "'mpi'"]),
        (
            lambda d: (
                d["scenarios"][0].update(predecessor={"count": 2, "kernel": {"kind": "allgather", "size_bytes": 64}})
                or d["device"].update(world_size=1)
            ),
            ["scenario 'cb-2k'", "device.world_size must be >= 2"],
        ),
    ],
)
def test_bad_collective_configs_name_the_field(mutate, expected) -> None:
    data = _x2()
    mutate(data)
    with pytest.raises(ConfigError) as exc:
        parse_config(data)
    msg = str(exc.value)
    for part in expected:
        assert part in msg, f"{part!r} not in {msg!r}"
    assert "{'sweep'" not in msg  # a model-level check does not dump the whole config


def test_gloo_on_gpus_is_rejected() -> None:
    data = _x2(dist_backend="gloo")
    data["device"]["backend"] = "nvml"
    with pytest.raises(ConfigError, match="'gloo' cannot run collectives on GPUs"):
        parse_config(data)


def test_one_gpu_device_params_keep_their_form() -> None:
    """A one-GPU sweep's device section defaults to world_size 1 and no torch.distributed backend, and the
    collect rule's params are the device config as validated (the rules pass whole config sections)."""
    d = DeviceConfig().model_dump(mode="json")
    assert d["world_size"] == 1 and d["dist_backend"] is None
    text = ROOT.joinpath("rules", "common.smk").read_text()
    # the collect rule passes the validated device section (device_params: the listed-GPU fields only when set)
    assert "device=device_params(" in text and 'device.model_dump(mode="json"' in text


# --------------------------------------------------------------------------- simulator
def test_collective_time_model() -> None:
    from fingrav.device.sim.kernels import collective_time_ns
    from fingrav.device.sim.presets import PRESETS

    for preset in PRESETS.values():
        spec = preset.collective
        for n in (2, 4, 8):
            bw = spec.bus_bw_bytes_s(n)
            for size in (65536, 1 << 30):
                t_ar, x_ar = collective_time_ns(preset, "allreduce", size, n)
                t_ag, x_ag = collective_time_ns(preset, "allgather", size, n)
                assert x_ar == pytest.approx(2 * (n - 1) / n * size / bw * 1e9)
                assert x_ag == pytest.approx((n - 1) / n * size / bw * 1e9)
                assert t_ar == pytest.approx(spec.latency_ns + spec.step_latency_ns * 2 * (n - 1) + x_ar)
                assert t_ag == pytest.approx(spec.latency_ns + spec.step_latency_ns * (n - 1) + x_ag)
        # latency-bound: a few us; bandwidth-bound: ms and proportional to the size
        t64k, _ = collective_time_ns(preset, "allreduce", 65536, 2)
        t512m, x512m = collective_time_ns(preset, "allreduce", 512 << 20, 2)
        t1g, x1g = collective_time_ns(preset, "allreduce", 1 << 30, 2)
        assert 3 * US < t64k < 30 * US
        assert t1g > 1 * MS and x1g == pytest.approx(2 * x512m) and t1g - x1g == pytest.approx(t512m - x512m)
    with pytest.raises(DeviceError):
        collective_time_ns(PRESETS["h200"], "allreduce", 65536, 1)


def test_sim_collective_power_and_execution() -> None:
    from fingrav.device.sim import SimulatedGPU

    dev = SimulatedGPU(SimConfig(preset="h200", overrides={"exec_jitter_pct": 0.0}), seed=1, world_size=2)
    info = {}
    for name, k in (
        ("lat", AllReduceKernel(size_bytes=65536)),
        ("bw", AllReduceKernel(size_bytes=1 << 30)),
        ("ag", AllGatherKernel(size_bytes=1 << 30)),
        ("gemm", GemmKernel(m=8192, n=8192, k=8192)),
    ):
        info[name] = dev.kernel_info(dev.prepare(k))
    w = {k: v["steady_cycle_w"] for k, v in info.items()}
    assert w["bw"]["memory"] > w["lat"]["memory"] + 20  # bandwidth-bound: much more memory-side power
    assert w["lat"]["total"] < w["bw"]["total"] < w["gemm"]["total"]  # collectives far below the GEMM
    assert w["ag"]["total"] < w["bw"]["total"]  # no reduction arithmetic
    assert info["bw"]["u_compute"] == 0.0 and info["bw"]["u_memory"] > 0.99 and info["lat"]["u_memory"] < 0.05
    h = dev.prepare(AllReduceKernel(size_bytes=1 << 30))
    dev.sleep_ns(50 * MS)
    rec = dev.execute([(h, 8)])
    assert np.allclose(rec.duration_ns[3:], h.base_ns * (1 + dev.preset.clock_drift), rtol=1e-3)
    truth = dev.ground_truth_of_last_execute()
    assert truth is not None and set(truth) == {"total", "memory"}
    assert dev.describe()["world_size"] == 2
    with pytest.raises(DeviceError, match="at least 2 GPUs"):
        SimulatedGPU(SimConfig(preset="h200")).prepare(AllReduceKernel(size_bytes=65536))


# --------------------------------------------------------------------------- file layout
def test_rank_paths(tmp_path: Path) -> None:
    """Every per-GPU path has a gpu<k> part (fingrav.layout), rank 0 included."""
    from fingrav.ranks import rank_device_config, rank_seed

    L = SweepLayout(tmp_path)
    assert L.scenario_dir("ar", 0) == tmp_path / "raw" / "gpu0" / "ar"
    assert L.scenario_dir("ar", 2) == tmp_path / "raw" / "gpu2" / "ar"
    assert L.plan("ar", 1) == tmp_path / "raw" / "gpu1" / "ar" / "plan.json"
    assert L.truth("ar", 1) == tmp_path / "truth" / "gpu1" / "ar.parquet"
    assert L.calibration_json(1) == tmp_path / "calibration" / "gpu1.json"
    assert L.calibration_json(0) == tmp_path / "calibration" / "gpu0.json"
    assert L.calibration_dir(1) == tmp_path / "raw" / "gpu1" / "calibration"
    assert L.binned("ar", 1) == tmp_path / "binned" / "gpu1" / "ar.parquet"
    assert L.summary_json("ar", 1) == tmp_path / "profiles" / "gpu1" / "ar" / "summary.json"
    assert L.combined("ar") == tmp_path / "profiles" / "combined" / "ar.json"
    assert rank_seed(7, 0) == 7 and rank_seed(7, 1) != rank_seed(7, 2)
    assert rank_device_config(DeviceConfig(index=2, world_size=2), 1).index == 3


# --------------------------------------------------------------------------- lockstep (ranks as threads)
class ThreadLockstep:
    """A `Lockstep` over threads of one process (test double of fingrav.collect.distributed.TorchLockstep)."""

    def __init__(self, rank: int, world_size: int, shared: dict) -> None:
        self.rank, self.world_size, self.shared = rank, world_size, shared
        self.calls = 0

    def _exchange(self, obj: Any) -> list[Any]:
        self.calls += 1
        key = self.calls
        with self.shared["lock"]:
            self.shared.setdefault(key, [None] * self.world_size)[self.rank] = obj
        self.shared["barrier"].wait(timeout=60)
        out = list(self.shared[key])
        self.shared["barrier"].wait(timeout=60)
        return out

    def barrier(self) -> None:
        self._exchange(None)

    def broadcast(self, obj: Any) -> Any:
        return self._exchange(obj)[0]

    def all_gather(self, obj: Any) -> list[Any]:
        return self._exchange(obj)

    def describe(self) -> dict[str, Any]:
        return {"rank": self.rank, "world_size": self.world_size, "backend": "threads"}


def _calibration(preset: str = "mi300x") -> Calibration:
    return sim_calibration(preset)


def test_runner_lockstep_follows_rank0_plan(tmp_path: Path) -> None:
    """Two ranks as threads: rank 1's GPU has much longer launch gaps (its own plan would differ), yet it
    issues exactly rank 0's executions; the delays are the same on both."""
    from fingrav.collect.plan import make_plan
    from fingrav.collect.runner import collect_scenario
    from fingrav.config import RunPolicy, Scenario
    from fingrav.device.sim import SimulatedGPU

    scenario = Scenario(name="ar", kernel=AllReduceKernel(size_bytes=1 << 20))
    policy = RunPolicy(max_runs=40, runs=20, sse_runs=20, probe_ms=60.0)
    shared: dict = {"lock": threading.Lock(), "barrier": threading.Barrier(2)}
    plans: dict[int, Any] = {}
    errors: list[BaseException] = []

    def rank_main(rank: int) -> None:
        try:
            over = {"launch_gap_us": 60.0} if rank == 1 else {}
            dev = SimulatedGPU(SimConfig(overrides=over), index=rank, seed=10 + rank, world_size=2)
            plans[rank] = collect_scenario(
                dev, scenario, policy, _calibration(), 5, tmp_path / f"r{rank}", sync=ThreadLockstep(rank, 2, shared)
            )
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)
            shared["barrier"].abort()

    threads = [threading.Thread(target=rank_main, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    # every rank followed the same plan; only what says which rank it is (and its own device) differs
    per_rank = {"rank", "rank_local", "distributed", "provenance", "reference_stop", "ssp_stop"}  # its own decisions
    assert plans[0].model_dump(exclude=per_rank) == plans[1].model_dump(exclude=per_rank)
    s0, s1 = plans[0].ssp_stop, plans[1].ssp_stop  # each rank's own LOIs, the same SSP runs (any rank going on)
    assert s0 is not None and s1 is not None and s0.runs == s1.runs
    assert (plans[0].rank, plans[1].rank) == (0, 1)
    import json

    p0, p1 = (json.loads((tmp_path / f"r{r}" / "plan.json").read_text()) for r in (0, 1))
    assert p0["rank"] == 0 and p1["rank"] == 1 and p1["world_size"] == 2
    local0, local1 = p0["rank_local"], p1["rank_local"]
    assert local1["cycle_ns"] > local0["cycle_ns"] + 40 * US  # rank 1 alone would have planned differently
    own = make_plan(local1["exec_time_ns"], local1["cycle_ns"], plans[0].sensor, Probe(**local1["probe"]), policy)
    assert own.executions_per_run != plans[0].executions_per_run
    r0, r1 = (pl.read_parquet(tmp_path / f"r{r}" / "runs.parquet") for r in (0, 1))
    cols = ["run", "phase", "delay_ns", "idle_ns"]
    assert r0.select(cols).equals(r1.select(cols))
    e0, e1 = (pl.read_parquet(tmp_path / f"r{r}" / "executions.parquet") for r in (0, 1))
    count = [pl.col("run"), pl.col("segment")]
    assert e0.group_by(count).len().sort(count).equals(e1.group_by(count).len().sort(count))


def test_merge_probes_is_conservative_and_solo_is_identity() -> None:
    from fingrav.collect.runner import Solo, merge_probes

    fields = (
        "busy_ns",
        "executions",
        "idle_level_mw",
        "level_mw",
        "peak_mw",
        "tol_mw",
        "t_stable_ns",
        "t_recover_ns",
        "settled",
        "samples",
    )
    a = Probe(**dict(zip(fields, (1, 10, 100.0, 400.0, 420.0, 4.0, 5 * MS, 7 * MS, True, 50), strict=True)))
    b = Probe(**dict(zip(fields, (1, 10, 101.0, 401.0, 421.0, 4.0, 9 * MS, 3 * MS, False, 50), strict=True)))
    m = merge_probes([a, b])
    assert (m.t_stable_ns, m.t_recover_ns, m.settled, m.level_mw) == (9 * MS, 7 * MS, False, 400.0)
    assert merge_probes([a]) is a
    s = Solo()
    assert s.broadcast(3) == 3 and s.all_gather(3) == [3] and s.world_size == 1


# --------------------------------------------------------------------------- combining ranks
def _summary(
    name: str,
    row: dict,
    channels: dict,
    *,
    predecessor_count: int = 0,
    provenance: dict | None = None,
    valid: bool = True,
) -> ScenarioSummary:
    """A summary.json model (differentiate's output) with only what combine and the report read."""
    plan = Plan(
        exec_time_ns=9_000,
        cycle_ns=10_000,
        warmups=3,
        sse_index=3,
        ssp_index=8,
        tail=4,
        trailing=0,
        executions_per_run=12,
        runs=60,
        sse_runs=60,
        sse_executions_per_run=4,
        idle_ns=10_000_000,
        delay_max_ns=1_000_000,
        lois_wanted=30,
        predecessor_count=predecessor_count,
        sensor={
            "period_ns": 1_000_000,
            "delay_ns": 300_000,
            "window_ns": 1_000_000,
            "lag_ns": 0,
            "settle_ns": 10_000_000,
        },
        provenance=provenance or {},
    )
    none = Estimate()
    return ScenarioSummary(
        scenario=name,
        row=row,
        channels=channels,
        clock={},
        flags=[],
        valid=valid,
        plan=plan,
        provenance={},
        sensor={},
        runs={},
        gaps={},
        samples={},
        sample_phase={},
        exec_time_ns=none,
        cycle_time_ns=none,
        energy_per_exec_mj=none,
        sse_reading_vs_ssp_pct=none,
        interleaved_reading_vs_ssp_pct=none,
    )


def _rank_data(
    rng: np.random.Generator, level_mw: float, runs: np.ndarray, golden: np.ndarray, common: np.ndarray
) -> tuple[ScenarioSummary, pl.DataFrame]:
    rows = {"run": [], "golden": [], "role": [], "channel": [], "power_mw": []}
    for r, g in zip(runs, golden, strict=True):
        for ch, base in (("total", level_mw), ("memory", level_mw / 5)):
            for _ in range(4):
                rows["run"].append(int(r))
                rows["golden"].append(bool(g))
                rows["role"].append("ssp")
                rows["channel"].append(ch)
                rows["power_mw"].append(base + common[r] * (1 if ch == "total" else 0.2) + rng.normal(0, 500))
    lois = pl.DataFrame(rows)
    gold = lois.filter(pl.col("golden"))
    stats = {
        ch: {
            "ssp": {
                "mean_mw": float(gold.filter(pl.col("channel") == ch)["power_mw"].mean()),
                "fit_coeffs": [0.0, 0.0, float(gold.filter(pl.col("channel") == ch)["power_mw"].mean())],
            }
        }
        for ch in ("total", "memory")
    }
    mean_w = stats["total"]["ssp"]["mean_mw"] / 1e3
    row = {
        "scenario": "ar",
        "ssp_power_w": mean_w,
        "ssp_power_ci_low_w": mean_w - 1,
        "ssp_power_ci_high_w": mean_w + 1,
        "exec_time_us": 9.0,
        "energy_per_exec_mj": 2.0,
        "energy_per_exec_ci_low_mj": 1.9,
        "energy_per_exec_ci_high_mj": 2.1,
        "valid": True,
        "flags": "",
        "truth_ssp_power_w": mean_w * 1.01,
        "ssp_error_pct": -1.0,
    }
    return _summary("ar", row, stats), lois


def test_combine_ranks_sums_with_a_joint_bootstrap() -> None:
    from fingrav.analysis.combine import combine_ranks
    from fingrav.config import AnalysisConfig

    rng = np.random.default_rng(0)
    runs = np.arange(60)
    common = rng.normal(0, 20_000, 60)  # run-to-run variation shared by both GPUs (same runs in lockstep)
    g1 = np.ones(60, bool)
    g1[::7] = False  # rank 1 keeps fewer golden runs
    s0, l0 = _rank_data(rng, 300_000.0, runs, np.ones(60, bool), common)
    s1, l1 = _rank_data(rng, 310_000.0, runs, g1, common)
    out = combine_ranks([s0, s1], [l0, l1], AnalysisConfig(bootstrap_reps=400, ci_level=0.95))
    c = out.combined
    expect = s0.row["power_w"] + s1.row["power_w"]
    assert c.power.value == pytest.approx(expect) and c.power.unit == "W"
    assert c.power.ci_low < expect < c.power.ci_high
    # the joint bootstrap keeps the correlation: the CI is wider than treating the GPUs as independent
    half = c.power.half_width
    sd_run = 20.0 / np.sqrt(60)  # W, per GPU
    assert half > 1.96 * np.sqrt(2) * sd_run * 1.15
    assert c.channels["memory"].mean.value == pytest.approx(
        (s0.role("memory", "ssp").power.value + s1.role("memory", "ssp").power.value) / 1e3
    )
    assert c.channels["total"].fit_coeffs_mw[-1] == pytest.approx(expect * 1e3)
    assert c.energy_per_exec.value == 4.0 and c.energy_per_exec.ci_low == pytest.approx(3.8)
    assert c.truth is not None and c.truth.power_w == pytest.approx(expect * 1.01) and c.valid is True
    row = out.row
    assert list(row) == out.row_columns
    assert row["world_size"] == 2 and row["combined_power_w"] == c.power.value
    assert row["combined_power_ci_low_w"] == c.power.ci_low and row["combined_energy_per_exec_mj"] == 4.0
    assert "combined_ssp_memory_power_w" in row and "rank1_ssp_memory_power_w" in row
    assert row["rank1_power_w"] == s1.row["power_w"] == out.ranks[1].power.value and "rank0_power_w" not in row
    assert out.ranks[1].channels_w["memory"] == pytest.approx(s1.role("memory", "ssp").power.value / 1e3)
    # the JSON the stage writes reads back into the same model
    assert CombinedResult.model_validate(json.loads(json.dumps(out.model_dump(mode="json")))) == out
    s1 = s1.model_copy(update={"result": s1.result.model_copy(update={"valid": False})})
    assert combine_ranks([s0, s1], [l0, l1], AnalysisConfig(bootstrap_reps=100)).row["combined_valid"] is False


# --------------------------------------------------------------------------- report
def _scn(tmp_path: Path, name: str, kernel: dict, channels: dict, predecessor: dict | None = None):
    from fingrav.report.load import ScenarioData

    summary = _summary(
        name,
        {"scenario": name, "ssp_power_w": channels["total"] / 1e3, "predecessor": None if predecessor is None else "x"},
        {ch: {"ssp": {"mean_mw": v, "ci_low_mw": v * 0.99, "ci_high_mw": v * 1.01}} for ch, v in channels.items()},
        predecessor_count=predecessor["count"] if predecessor else 0,
        provenance={"scenario": {"name": name, "kernel": kernel, "predecessor": predecessor}},
    )
    return ScenarioData(name=name, summary=summary, layout=SweepLayout(tmp_path))


def _combined(world: int, total_w: float, memory_w: float) -> CombinedResult:
    tot = Estimate(value=total_w * world, ci_low=total_w * world * 0.99, ci_high=total_w * world * 1.01, unit="W")
    ch = {"total": CombinedChannel(mean=tot), "memory": CombinedChannel(mean=Estimate(value=memory_w * world))}
    row = {
        "world_size": world,
        "combined_power_w": total_w * world,
        "combined_valid": True,
        "rank1_power_w": total_w,
        "rank1_valid": True,
        "rank1_flags": "x;y",
    }
    return CombinedResult(
        scenario="x",
        world_size=world,
        combined=Combined(power=tot, channels=ch, energy_per_exec=Estimate(), valid=True),
        ranks=[
            RankResult(rank=k, power=Estimate(value=total_w), energy_per_exec=Estimate(), valid=True, channels_w={})
            for k in range(world)
        ],
        row=row,
        row_columns=list(row),
    )


def test_report_multi_gpu_columns_and_fig10(tmp_path: Path) -> None:
    from fingrav.report import collectives as G
    from fingrav.report.table import metrics_frame

    scns = [
        _scn(tmp_path, "ar-64k", {"kind": "allreduce", "size_bytes": 65536}, {"total": 180e3, "memory": 42e3}),
        _scn(tmp_path, "ag-1g", {"kind": "allgather", "size_bytes": 1 << 30}, {"total": 340e3, "memory": 75e3}),
        _scn(tmp_path, "cb-4k", {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096}, {"total": 650e3, "memory": 60e3}),
        _scn(tmp_path, "cb-8k", {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192}, {"total": 690e3, "memory": 66e3}),
        _scn(
            tmp_path,
            "ar-1g-after-cb-8k",
            {"kind": "allreduce", "size_bytes": 1 << 30},
            {"total": 390e3, "memory": 87e3},
            predecessor={"count": 4, "kernel": {"kind": "gemm"}},
        ),
    ]
    combined = {"ar-64k": _combined(2, 180, 42), "ag-1g": _combined(2, 340, 75), "cb-8k": _combined(2, 690, 66)}
    assert [G.kernel_class(G.scenario_kernel(s)) for s in scns] == [
        "latency-bound collective",
        "bandwidth-bound collective",
        "GEMM",
        "GEMM",
        "bandwidth-bound collective",
    ]
    df = G.fig10_data(scns, combined)
    assert set(df["scenario"].to_list()) == {"ar-64k", "ag-1g", "cb-8k"}  # the 8K GEMM, no interleaved scenario
    tot = dict(
        zip(*df.filter(pl.col("channel") == "total").select("scenario", "power_w").to_dict().values(), strict=True)
    )
    assert tot == {"ar-64k": pytest.approx(180), "ag-1g": pytest.approx(340), "cb-8k": pytest.approx(690)}
    assert "memory-side (memory)" in df["channel"].to_list()
    assert G.fig10_chart(scns, combined) is not None and G.gpus_chart(scns, combined) is not None
    assert G.fig10_chart(scns[2:4], {}) is None  # no collective: no figure

    # the multi-GPU columns go to the long metrics table (summary.csv stays narrow), numbers only
    m = metrics_frame([s.result for s in scns], {n: c.row for n, c in combined.items()})
    extra = m.filter(pl.col("metric").str.starts_with("combined_") | pl.col("metric").str.starts_with("rank"))
    got = {(r["scenario"], r["metric"]): r["value"] for r in extra.iter_rows(named=True)}
    assert got[("cb-8k", "combined_power_w")] == pytest.approx(1380.0) and got[("cb-8k", "rank1_power_w")] == 690.0
    assert ("cb-8k", "rank1_valid") not in got and ("cb-4k", "combined_power_w") not in got


def test_kernel_label_of_collectives() -> None:
    from fingrav.analysis.differentiate import describe_plan
    from fingrav.testing.synthetic import SynthSpec, generate

    prov = Provenance(scenario={"name": "ar", "kernel": {"kind": "allreduce", "size_bytes": 1 << 29, "dtype": "bf16"}})
    plan = generate(SynthSpec(runs=2, sse_runs=2))["plan"].model_copy(update={"provenance": prov})
    assert describe_plan(plan).kernel == "allreduce 512MiB bf16"


# --------------------------------------------------------------------------- torch device on a fake torch
def test_torch_collective_handles_on_a_fake_torch(monkeypatch) -> None:
    """Bookkeeping only (a fake torch.distributed that advances a fake clock): the collective is bracketed by
    stamps like a GEMM, launched from the stream (no graph capture), warmed up once in prepare. The real
    NCCL path has not run on GPUs."""
    import types

    from fingrav.testing.fakes.fake_torch import FakeGPUClock, device_class, fake_torch_module

    clock = FakeGPUClock()
    torch = fake_torch_module(clock)
    calls: list[tuple[str, tuple]] = []

    def all_reduce(t, op=None):
        calls.append(("all_reduce", t.a.shape))
        clock.t += 7_000

    def all_gather_into_tensor(out, inp):
        calls.append(("all_gather", (out.a.shape, inp.a.shape)))
        out.a[...] = np.tile(inp.a, 2)
        clock.t += 5_000

    torch.distributed = types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: True,
        get_world_size=lambda: 2,
        get_backend=lambda: "nccl",
        ReduceOp=types.SimpleNamespace(AVG="avg", SUM="sum"),
        all_reduce=all_reduce,
        all_gather_into_tensor=all_gather_into_tensor,
    )
    monkeypatch.setitem(sys.modules, "torch", torch)
    dev = device_class(clock)(stamp_capacity=16)
    ar = dev.prepare(AllReduceKernel(size_bytes=1024))
    ag = dev.prepare(AllGatherKernel(size_bytes=1024, dtype="fp32"))
    assert calls == [("all_reduce", (512,)), ("all_gather", ((256,), (128,)))]  # one warm-up each
    rec = dev.execute([(ar, 3), (ag, 2)])
    assert rec.segment.tolist() == [0, 0, 0, 1, 1]
    assert rec.duration_ns.tolist() == [7010] * 3 + [5010] * 2  # collective + one stamp, like a GEMM
    assert clock.captures == 0 and len(calls) == 7  # stream launches: no graph captured
    assert dev.describe()["collective_launch_mode"] == "stream"
    torch.distributed.is_initialized = lambda: False
    with pytest.raises(DeviceError, match="torch.distributed initialized"):
        dev.prepare(AllReduceKernel(size_bytes=1024))
