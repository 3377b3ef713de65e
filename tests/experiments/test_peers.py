"""experiments/peers.py without a GPU: the reference's statistics on synthetic samples (flat and limit-cycling), the
peers' protocol arithmetic (aiconfigurator's run count and poller, Kernel Tuner's benchmark loop, Zeus's windows and
PowerMonitor means), the fingrav summary rows, the table, the orchestration (budget, failures, missing tools) and
main() end to end with a fake GPU context."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fingrav.testing.experiments import load_experiment

ROOT = Path(__file__).resolve().parents[2]
MS = 1_000_000
S = 1_000_000_000


@pytest.fixture(scope="module")
def peers():
    return load_experiment("peers")


def _samples(power_w, seconds: float = 6.5, period_ms: float = 20.0, noise_w: float = 2.0, seed: int = 1):
    """NVML-like samples every period_ms of power_w(t_s) + noise, from t = 0 (ns, mW)."""
    rng = np.random.default_rng(seed)
    t = np.arange(0, int(seconds * S), int(period_ms * MS), dtype=np.int64)
    p = np.array([power_w(x / S) for x in t]) + rng.normal(0, noise_w, t.size)
    return t, p * 1e3


def _limit_cycle_w(t_s: float) -> float:
    """730 W for the first 0.7 s after idle, then 0.2 s clamped at 600 W / 0.7 s at 720 W, repeating."""
    if t_s < 0.7:
        return 730.0
    phase = (t_s - 0.7) % 0.9
    return 600.0 if phase < 0.2 else 720.0


# --------------------------------------------------------------------------- the reference
def test_settled_power_of_a_flat_run(peers):
    t, p = _samples(lambda s: 500.0)
    r = peers.settled_power(t, p, 0, int(6.5 * S))
    assert r["mean_w"] == pytest.approx(500.0, abs=0.3)
    assert r["ci_low_w"] < r["mean_w"] < r["ci_high_w"] and r["ci_high_w"] - r["ci_low_w"] < 1.0
    assert len(r["block_means_w"]) == 27  # whole 200 ms blocks from 1.0 s to 6.5 s
    assert r["block_spread_pct"] < 1.0 and r["limit_cycle"] is None
    assert r["burst_w"] == pytest.approx(500.0, abs=1.0) and r["n_samples"] == 270


def test_settled_power_ci_covers_a_flat_truth(peers):
    hits = 0
    for seed in range(100):
        t, p = _samples(lambda s: 500.0, seed=seed)
        r = peers.settled_power(t, p, 0, int(6.5 * S))
        hits += r["ci_low_w"] <= 500.0 <= r["ci_high_w"]
    assert hits >= 88  # a 95 % batch-means interval over 27 blocks


def test_settled_power_of_a_limit_cycling_run(peers):
    t, p = _samples(_limit_cycle_w)
    r = peers.settled_power(t, p, 0, int(6.5 * S), sensor_period_ns=20 * MS)
    sel = (t >= S) & (t < int(6.4 * S))
    assert r["mean_w"] == pytest.approx(p[sel].mean() / 1e3, abs=1e-9)
    assert 670.0 < r["mean_w"] < 700.0  # between the levels, weighted by the duty of 0.7 / 0.9
    assert r["burst_w"] == pytest.approx(730.0, abs=1.0)  # short runs after idle see the unclamped level
    assert r["block_spread_pct"] > 5.0 and min(r["block_means_w"]) < 650.0 < max(r["block_means_w"])
    lc = r["limit_cycle"]
    assert lc is not None and lc["cycles"] >= 4
    assert lc["period_ms"]["value"] == pytest.approx(900.0, abs=30.0)
    assert lc["high_w"]["value"] == pytest.approx(720.0, abs=5.0) and lc["low_w"]["value"] == pytest.approx(
        600.0, abs=10
    )
    assert lc["mean_w"]["value"] == pytest.approx((0.7 * 720 + 0.2 * 600) / 0.9, abs=6.0)


def test_settled_power_without_samples(peers):
    r = peers.settled_power(np.zeros(0, np.int64), np.zeros(0), 0, int(2 * S))
    assert r["mean_w"] is None and r["ci_low_w"] is None and r["block_means_w"] == []


def test_t_interval_and_error_pct(peers):
    assert peers.t_interval([]) == (None, None, None)
    assert peers.t_interval([3.0]) == (3.0, None, None)
    m, lo, hi = peers.t_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.302653 / math.sqrt(3), rel=1e-5) == m - lo
    assert peers.error_pct(105.0, 100.0) == pytest.approx(5.0) and peers.error_pct(None, 1.0) is None


# --------------------------------------------------------------------------- aiconfigurator
def test_aiconfigurator_run_count(peers):
    assert peers.aic_runs(6 * 1.4e-3) == 120  # >= 1 s of replays
    assert peers.aic_runs(6 * 7e-6) == 3000  # < 0.1 ms per call: 0.3 s, but capped at 3000 replays
    assert peers.aic_runs(0.2) == 6  # at least num_runs
    assert peers.aic_runs(5e-4) == 2001  # 1 s / 0.5 ms + 1
    assert peers.aic_runs(2.5e-4, min_duration_s=0.25) == 1001  # COLLECTOR_POWER_MIN_DURATION=0.25
    assert peers.aic_runs(5e-5, min_duration_s=0.1) == 2001  # the fast rule never lengthens it: min(0.1, 0.3)
    assert peers.aic_runs(5e-5, min_duration_s=2.0) == 3000  # 0.3 s would be 6001 replays: capped


def test_aiconfigurator_poller_reads_at_once_then_every_interval(peers):
    values = iter([500_000.0, RuntimeError("busy"), 700_000.0] + [600_000.0] * 1000)

    def read():
        v = next(values)
        if isinstance(v, Exception):
            raise v
        return v

    sampler = peers.AicPowerSampler(read, interval_s=0.01)
    sampler.start()
    deadline = time.monotonic() + 10.0  # a loaded machine may run the thread late: wait for reads, not for a time
    while len(sampler.samples) < 4 and time.monotonic() < deadline:
        time.sleep(0.005)
    mean = sampler.stop()
    w = [mw / 1e3 for _, mw in sampler.samples]
    assert w[:2] == [500.0, 700.0] and len(w) >= 4  # the failed read is skipped
    # every interval, never faster: consecutive reads at least one interval apart (the skipped read's included)
    t = [ts for ts, _ in sampler.samples]
    assert min(b - a for a, b in zip(t[1:], t[2:], strict=False)) >= 0.01 * 0.9
    assert t[1] - t[0] >= 2 * 0.01 * 0.9
    assert mean == pytest.approx(np.mean(w))
    assert peers.AicPowerSampler(read).stop() is None


# --------------------------------------------------------------------------- Kernel Tuner
class _FakeKTDev:
    def __init__(self) -> None:
        self.launches = 0
        self.polls = 0

    def synchronize(self) -> None: ...

    def start_event(self) -> None: ...

    def stop_event(self) -> None: ...

    def run_kernel(self) -> None:
        self.launches += 1

    def kernel_finished(self) -> bool:
        self.polls += 1
        return self.polls % 3 == 0


class _Recorder:
    def __init__(self, name: str, results: dict) -> None:
        self.name, self.results_out, self.calls = name, results, []
        self.continuous_duration = 1.0

    def __getattr__(self, hook):
        if hook in ("before_start", "after_start", "during", "after_finish"):
            return lambda: self.calls.append(hook)
        raise AttributeError(hook)

    def get_results(self) -> dict:
        return dict(self.results_out)


def test_kernel_tuner_loop_follows_core_py(peers):
    dev = _FakeKTDev()
    timing = _Recorder("runtime", {"time": 0.25})  # ms
    cont = _Recorder("nvml", {"nvml_power": 650.0})
    out = peers.kt_benchmark(dev, [timing], [cont], iterations=7, sleep=lambda s: None)
    assert dev.launches == 7 + 4000  # 7 timed + ceil(1 s / 0.25 ms)
    assert timing.calls.count("before_start") == 7 and timing.calls.count("after_finish") == 7
    assert cont.calls[0] == "before_start" and cont.calls[-1] == "after_finish" and "during" in cont.calls
    assert out == {"time": 0.25, "nvml_power": 650.0, "continuous_iterations": 4000}
    assert cont.results is out  # the continuous observer holds the results dict (the timed time), as in core.py
    assert peers.kt_continuous_iterations(1.0, 0.007) == 142858


def test_kernel_tuner_observer_loads_without_its_package_init(peers):
    if importlib.util.find_spec("kernel_tuner") is None or importlib.util.find_spec("pynvml") is None:
        pytest.skip("kernel_tuner / nvidia-ml-py not installed here (the GPU run carries the wheel)")
    mod = peers.load_kernel_tuner_nvml()
    assert hasattr(mod, "NVMLObserver") and "constraint" not in sys.modules


# --------------------------------------------------------------------------- Zeus
def test_powermonitor_timeline_mean_and_zeus_log_windows(peers, tmp_path):
    # PowerMonitor keeps a sample only when it changes: 600 W for 1 s, then 700 W for 3 s
    tl = [(10.0, 600.0), (11.0, 600.0), (11.0, 700.0), (14.0, 700.0)]
    assert peers.timeline_mean_w(tl) == pytest.approx((600 * 1 + 700 * 3) / 4)
    assert peers.timeline_mean_w([(1.0, 500.0)]) == 500.0 and peers.timeline_mean_w([]) is None
    log = tmp_path / "zeus.csv"
    log.write_text(
        "start_time,window_name,elapsed_time,gpu0_energy\n"
        "100.0,__zeus_profile_run_trial,5.0,3500.0\n"
        "107.0,other,1.0,10.0\n"
        "109.0,__zeus_profile_run_trial,5.1,3600.0\n"
    )
    assert peers.zeus_windows(log) == [(100.0, 5.0), (109.0, 5.1)]


# --------------------------------------------------------------------------- fingrav's summary
def test_fingrav_rows_are_matched_by_kernel_label(peers, tmp_path):
    path = tmp_path / "summary.csv"
    path.write_text(
        "scenario,kernel,predecessor,ssp_power_w,ssp_power_ci_low_w,ssp_power_ci_high_w,valid,flags,ssp_source,"
        "burst_power_w,cycle_time_us\n"
        "cb-4k-after,gemm 4096x4096x4096 bf16,gemm 8192x8192x8192 bf16,1,0,2,true,,,,\n"
        "cb-4k,gemm 4096x4096x4096 bf16,,691.5,688.0,695.0,true,power_limit_cycling,sustained,734.1,205.6\n"
    )
    labels = {"gemm-4k-bf16": "gemm 4096x4096x4096 bf16", "gemm-512-bf16": "gemm 512x512x512 bf16"}
    rows = peers.read_fingrav_summary(path, labels)
    r = rows["gemm-4k-bf16"]
    assert (r.tool, r.power_w, r.ci_low_w, r.ci_high_w, r.cycle_us) == ("fingrav", 691.5, 688.0, 695.0, 205.6)
    assert "headline sustained" in r.notes and "burst 734 W" in r.notes and "valid" in r.notes
    assert rows["gemm-512-bf16"].status.startswith("not available: no row")


def test_a_kernel_collected_under_several_names_is_matched_by_its_scenario(peers, tmp_path):
    """A replicate dataset (results/h200-ref-check) collects one kernel as <name>-r1 and -r2, each beside its own
    reference: each reference is compared with the collection of its own name, not the first row of the label."""
    path = tmp_path / "summary.csv"
    path.write_text(
        "scenario,kernel,predecessor,power_w,power_ci_low_w,power_ci_high_w,valid,flags\n"
        "g-r1,gemm 2048x2048x2048 fp32,,665.4,659.5,671.4,true,\n"
        "g-r2,gemm 2048x2048x2048 fp32,,651.3,642.3,660.3,true,\n"
    )
    label = "gemm 2048x2048x2048 fp32"
    rows = peers.read_fingrav_summary(path, {"g-r1": label, "g-r2": label, "other": label})
    assert (rows["g-r1"].power_w, rows["g-r2"].power_w) == (665.4, 651.3)
    assert rows["other"].power_w == 665.4  # no scenario of that name: by label, as before


def test_kernel_labels_match_fingrav_config(peers):
    assert peers.kernel_model("gemm-4k-bf16").label() == "gemm 4096x4096x4096 bf16"
    assert peers.kernel_model("gemv-16k-bf16").label() == "gemv 16384x16384 bf16"
    assert set(peers.KERNELS) == {"gemm-8k-bf16", "gemm-4k-bf16", "gemm-8k-fp32", "gemv-16k-bf16", "gemm-512-bf16"}


# --------------------------------------------------------------------------- the table and the outputs
def _rows(peers):
    R = peers.ToolResult
    return [
        R("gemm-4k-bf16", "zeus", 700.0, 690.0, 710.0, 26.0, 210.0, notes="3 trials"),
        R("gemm-4k-bf16", "reference", 680.0, 678.0, 682.0, 8.0, 205.0),
        R("gemm-4k-bf16", "kernel_tuner", status="not available: ModuleNotFoundError: kernel_tuner"),
        R("gemm-4k-bf16", "aiconfigurator", 714.0, gpu_s=1.2, cycle_us=206.0),
    ]


def test_markdown_table(peers):
    ref = {
        "gemm-4k-bf16": {
            "burst_w": 731.0,
            "block_spread_pct": 21.0,
            "block_means_w": [726.2, 572.0],
            "limit_cycle": None,
        }
    }
    table = peers.markdown_table(_rows(peers), ref)
    lines = table.splitlines()
    body = [ln for ln in lines if ln.startswith("| gemm-4k-bf16 | ")]
    assert [ln.split(" | ")[1] for ln in body[:4]] == ["reference", "aiconfigurator", "kernel_tuner", "zeus"]
    assert "| +5.0 |" in body[1] and "| +2.9 |" in body[3] and "690.0 – 710.0" in body[3]
    assert "not available: ModuleNotFoundError" in body[2]
    assert body[-1] == "| gemm-4k-bf16 | 731.0 | 21.0 | none | 726 572 |"


def test_write_outputs(peers, tmp_path):
    rows = _rows(peers)
    rows[0].detail["nan"] = float("nan")
    table = peers.write_outputs(tmp_path / "peers", rows, {"gpu": "H200", "date": "2026-12-01", "reference": {}})
    data = json.loads((tmp_path / "peers" / "peers.json").read_text())
    assert len(data["results"]) == 4 and data["results"][0]["detail"]["nan"] is None
    md = (tmp_path / "peers" / "peers.md").read_text()
    assert md.startswith("# Peers on H200 (2026-12-01)") and table in md


# --------------------------------------------------------------------------- orchestration
class _FakeCtx:
    def __init__(self, fail_prepare: str | None = None) -> None:
        self.prepared, self.released, self.fail_prepare = [], 0, fail_prepare
        self.reference: dict = {}
        self.dev = SimpleNamespace(describe=lambda: {"name": "fake H200"})

    def prepare(self, name):
        if name == self.fail_prepare:
            raise MemoryError("out of memory")
        self.prepared.append(name)
        return f"handle:{name}"

    def release(self) -> None:
        self.released += 1

    def close(self) -> None: ...


def test_run_all_budget_failures_and_missing_tools(peers):
    clock = {"t": 0.0}

    def tool(power):
        def fn(ctx, name, handle):
            assert handle == f"handle:{name}"
            clock["t"] += 10.0
            return [peers.ToolResult(name, "reference", power)]

        return fn

    def broken(ctx, name, handle):
        raise RuntimeError("graph capture failed")

    tools = {"reference": tool(600.0), "aiconfigurator": broken, "zeus": tool(1.0)}
    est = {"reference": lambda k: 8.0, "aiconfigurator": lambda k: 2.0, "zeus": lambda k: 30.0}
    ctx = _FakeCtx(fail_prepare="gemv-16k-bf16")
    sleeps = []
    out = peers.run_all(
        ctx,
        ["gemm-4k-bf16", "gemv-16k-bf16", "gemm-512-bf16"],
        tools,
        {"zeus": "ModuleNotFoundError: sklearn"},
        est,
        budget_s=15.0,
        idle_s=1.0,
        clock=lambda: clock["t"],
        sleep=sleeps.append,
    )
    status = [(r.kernel, r.tool, r.status.split(":")[0]) for r in out]
    assert status == [
        ("gemm-4k-bf16", "reference", "ok"),
        ("gemm-4k-bf16", "aiconfigurator", "failed"),
        ("gemm-4k-bf16", "zeus", "not available"),
        ("gemv-16k-bf16", "reference", "failed"),
        ("gemv-16k-bf16", "aiconfigurator", "failed"),
        ("gemv-16k-bf16", "zeus", "failed"),
        ("gemm-512-bf16", "reference", "skipped"),  # 10 s used + 8 s + 1 s idle > 15 s
        ("gemm-512-bf16", "aiconfigurator", "failed"),
        ("gemm-512-bf16", "zeus", "not available"),
    ]
    assert "graph capture failed" in out[1].status and "MemoryError" in out[3].status
    assert ctx.prepared == ["gemm-4k-bf16", "gemm-512-bf16"] and ctx.released == 2 and sleeps == [1.0, 1.0, 1.0]


def test_parse_args(peers, tmp_path):
    a = peers.parse_args(["--out", str(tmp_path)])
    assert a.kernels == list(peers.KERNELS) and a.tools == list(peers.TOOLS) and a.fingrav_summary is None
    assert (a.reference_s, a.zeus_measure_s, a.zeus_trials, a.budget_s) == (6.5, 5.0, 3, 330.0)
    q = peers.parse_args(["--out", str(tmp_path), "--quick", "--kernels", "gemm-512-bf16", "--tools", "reference"])
    assert (q.reference_s, q.settle_s, q.zeus_measure_s, q.kernels, q.tools) == (
        2.5,
        0.5,
        1.0,
        ["gemm-512-bf16"],
        ["reference"],
    )
    with pytest.raises(SystemExit):
        peers.parse_args(["--out", str(tmp_path), "--reference-s", "1.0"])
    with pytest.raises(SystemExit):
        peers.parse_args(["--out", str(tmp_path), "--kernels", "no-such-kernel"])


def test_kernels_from_a_sweep_config_by_scenario_name(peers, tmp_path, monkeypatch):
    """--config adds the scenarios of a fingrav config (grids expanded) as kernels; the label is the config's."""
    monkeypatch.setattr(peers, "CONFIG_KERNELS", {})
    grid = Path(__file__).resolve().parents[2] / "config" / "llama3-grid.yaml"
    a = peers.parse_args(["--out", str(tmp_path), "--config", str(grid), "--kernels", "l3-8b-qkv-m1", "gemm-4k-bf16"])
    assert a.kernels == ["l3-8b-qkv-m1", "gemm-4k-bf16"]
    assert peers.kernel_model("l3-8b-qkv-m1").label() == "gemm 1x6144x4096 bf16"
    assert peers.kernel_model("l3-decode-70b-kv_len1024-batch1").label().startswith("attention b1 h64 q1 kv1024")
    assert peers.kernel_model("gemm-4k-bf16").label() == "gemm 4096x4096x4096 bf16"
    with pytest.raises(SystemExit):
        peers.parse_args(["--out", str(tmp_path), "--tools", "nvidia-smi"])
    est = peers.estimates(a)
    assert est["zeus"]("x") == pytest.approx(5.0 + 3 * 7.0 + 3.0) and est["reference"]("x") == 8.0


def test_main_end_to_end_with_a_fake_gpu(peers, tmp_path, monkeypatch, capsys):
    summary = tmp_path / "summary.csv"
    summary.write_text("scenario,kernel,predecessor,ssp_power_w,valid\ncb-512,gemm 512x512x512 bf16,,480.0,false\n")

    def reference(ctx, name, handle):
        ctx.reference[name] = {"burst_w": 650.0, "block_means_w": [640.0, 652.0], "block_spread_pct": 1.9}
        return [peers.ToolResult(name, "reference", 650.0, 648.0, 652.0, 8.1, 6.7)]

    def zeus(ctx, name, handle):
        return [peers.ToolResult(name, "zeus", 520.0), peers.ToolResult(name, "zeus_powermonitor", 515.0)]

    monkeypatch.setattr(peers, "GPUContext", lambda args: _FakeCtx())
    monkeypatch.setattr(peers, "run_reference", reference)
    monkeypatch.setattr(peers, "run_zeus", zeus)
    monkeypatch.setattr(peers, "availability", lambda tools: {"kernel_tuner": "not installed"})
    argv = ["--out", str(tmp_path / "out"), "--idle-s", "0", "--kernels", "gemm-512-bf16"]
    argv += ["--tools", "reference", "kernel_tuner", "zeus"]
    assert peers.main([*argv, "--fingrav-summary", str(summary)]) == 0
    printed = capsys.readouterr().out
    assert printed.strip().splitlines()[-1].startswith("| gemm-512-bf16 | 650.0 |")  # the table is printed last
    data = json.loads((tmp_path / "out" / "peers.json").read_text())
    tools = {r["tool"]: r for r in data["results"]}
    assert set(tools) == {"reference", "kernel_tuner", "zeus", "zeus_powermonitor", "fingrav"}
    assert tools["kernel_tuner"]["status"] == "not available: not installed"
    assert tools["fingrav"]["power_w"] == 480.0 and "NOT valid" in tools["fingrav"]["notes"]
    assert data["meta"]["labels"] == {"gemm-512-bf16": "gemm 512x512x512 bf16"} and data["meta"]["gpu"] == "fake H200"
    md = (tmp_path / "out" / "peers.md").read_text()
    assert "| gemm-512-bf16 | zeus | 520.0 |" in md and "| -20.0 |" in md  # 520 vs 650 W


# --------------------------------------------------------------------------- the GPU paths, against fakes
class _Event:
    def __init__(self, clock) -> None:
        self.clock, self.t, self.polls = clock, None, 0

    def record(self) -> None:
        self.t, self.polls = self.clock["t"], 0

    def elapsed_time(self, end) -> float:
        return (end.t - self.t) * 1e3  # ms

    def query(self) -> bool:
        self.polls += 1
        return self.polls > 3  # the GPU is busy for the first three polls after a record


class _Graph:
    def __init__(self, clock, handle) -> None:
        self.clock, self.handle, self.launches = clock, handle, 0

    def replay(self) -> None:
        self.clock["t"] += self.launches * self.handle.exec_s


class _FakeHandle:
    def __init__(self, clock, exec_s: float) -> None:
        self.clock, self.exec_s, self.sets = clock, exec_s, []
        self.capturing: _Graph | None = None

    def launch(self, i: int) -> None:
        self.sets.append(i)
        if self.capturing is not None:
            self.capturing.launches += 1
        else:
            self.clock["t"] += self.exec_s


def _fake_gpu_ctx(peers, handle, clock):
    from contextlib import contextmanager

    from fingrav.device.base import ClockTelemetry, PowerSamples

    @contextmanager
    def graph(g):
        handle.capturing = g
        try:
            yield
        finally:
            handle.capturing = None

    cuda = SimpleNamespace(
        Event=lambda enable_timing=False: _Event(clock),
        synchronize=lambda: None,
        empty_cache=lambda: None,
        CUDAGraph=lambda: _Graph(clock, handle),
        graph=graph,
    )
    host = {"ns": 10 * S}

    class Dev:
        def run_unstamped(self, h, count):
            d = int(count * h.exec_s * 1e9)
            self.last = (host["ns"], host["ns"] + d)
            host["ns"] += d
            return SimpleNamespace(duration_ns=np.array([d]))

        def start_sampling(self):
            pass

        def stop_sampling(self):
            a, b = self.last
            t = np.arange(a - 100 * MS, b + 100 * MS, 20 * MS, dtype=np.int64)
            p = np.where((t >= a) & (t <= b), 690_000.0, 120_000.0)
            return PowerSamples(t, np.array(["total"] * t.size, dtype=object), p)

        def host_time_ns(self):
            return host["ns"]

        def sleep_ns(self, ns):
            host["ns"] += ns

        def read_telemetry(self):
            return ClockTelemetry(host["ns"], 1000, 1980.0, 3201.0, 4, ("sw_power_cap",), {"power": host["ns"]})

        def describe(self):
            return {"enforced_power_limit_mw": 700_000}

    ctx = SimpleNamespace(
        args=peers.parse_args(["--out", "x"]),
        torch=SimpleNamespace(cuda=cuda),
        dev=Dev(),
        nvml_index=0,
        reference={},
    )
    ctx.telemetry = lambda: ctx.dev.read_telemetry().as_dict()
    return ctx


def test_reference_path_with_a_fake_device(peers):
    clock = {"t": 0.0}
    h = _FakeHandle(clock, 200e-6)
    ctx = _fake_gpu_ctx(peers, h, clock)
    (r,) = peers.run_reference(ctx, "gemm-4k-bf16", h)
    assert r.tool == "reference" and r.status == "ok" and r.power_w == pytest.approx(690.0)
    assert r.cycle_us == pytest.approx(200.0) and r.detail["count"] == 32500
    assert ctx.reference["gemm-4k-bf16"]["burst_w"] == pytest.approx(690.0)
    assert r.detail["samples_ms_w"][0][1] == 120.0  # the idle before the run is kept for the plot
    assert r.detail["telemetry"]["violation_ns"]["power"] > 0


def test_aiconfigurator_path_with_the_fake_pynvml(peers, monkeypatch):
    fake = importlib.import_module("fingrav.testing.fakes.fake_pynvml")
    fake.configure(power_mw=lambda t: 650_000.0)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    clock = {"t": 0.0}
    h = _FakeHandle(clock, 1.4e-3)
    ctx = _fake_gpu_ctx(peers, h, clock)
    (r,) = peers.run_aiconfigurator(ctx, "gemm-8k-bf16", h)
    fake.configure()
    assert r.status == "ok" and r.power_w == pytest.approx(650.0) and r.detail["runs"] == 120
    assert h.sets[: 3 * peers.AIC_OPS] == list(range(peers.AIC_OPS)) * 3  # warm-ups: the 6 input copies
    assert r.cycle_us == pytest.approx(1400.0) and r.detail["power_limit_w"] == 700.0
    assert r.detail["samples_w"] and r.detail["throttled"] is False


def test_kernel_tuner_path_with_its_real_observer(peers, monkeypatch):
    if importlib.util.find_spec("kernel_tuner") is None or importlib.util.find_spec("pynvml") is None:
        pytest.skip("kernel_tuner / nvidia-ml-py not installed here (the GPU run carries the wheel)")
    kt = peers.load_kernel_tuner_nvml()

    class FakeNvml:  # what NVMLObserver reads of its `nvml` device object
        def __init__(self, device_id=None, **kwargs) -> None:
            self.device_id, self.readings = device_id, iter([640_000, 650_000, 660_000] * 10_000)
            self.gr_clock, self.temperature = 1980, 55

        def pwr_usage(self) -> int:
            return next(self.readings)

    monkeypatch.setattr(kt, "nvml", FakeNvml)
    clock = {"t": 0.0}
    h = _FakeHandle(clock, 0.25e-3)
    ctx = _fake_gpu_ctx(peers, h, clock)
    (r,) = peers.run_kernel_tuner(ctx, "gemm-4k-bf16", h)
    assert r.status == "ok" and r.tool == "kernel_tuner"
    assert r.power_w == pytest.approx(650.0)  # the median of the readings (W)
    assert r.detail["continuous_iterations"] == 4000 and len(h.sets) == 7 + 4000
    assert r.detail["kernel_tuner_version"].startswith("1.5")


def _stub_zeus(monkeypatch, clock, tmp_path):
    """zeus.monitor / zeus.profile stand-ins with 0.16's call signatures: ZeusMonitor logs every window to its
    log_file as 0.16 does; profile_measurement_duration runs warm-up and measured trials of 5 s at 700 W."""
    from dataclasses import dataclass

    @dataclass
    class TrialResult:
        energy_per_iter: float
        time_per_iter: float
        total_energy: float
        total_time: float
        iterations: int
        temperature_before: float
        temperature_after: float

    class ZeusMonitor:
        def __init__(self, gpu_indices=None, cpu_indices=None, log_file=None, **kw) -> None:
            assert gpu_indices == [0] and cpu_indices == []
            self.log = open(log_file, "w")  # noqa: SIM115 - as ZeusMonitor keeps it open
            self.log.write("start_time,window_name,elapsed_time,gpu0_energy\n")

    def profile_measurement_duration(target, monitor, measurement_duration_search_range, cooldown_duration,
                                     num_trials, num_warmup_trials, **kw):  # fmt: skip
        (dur,) = measurement_duration_search_range
        trials = []
        for i in range(num_warmup_trials + num_trials):
            start = 1000.0 + 20.0 * i
            for _ in range(100):
                target()
            watts = 700.0 + i
            monitor.log.write(f"{start},__zeus_profile_run_trial,{dur},{watts * dur}\n")
            if i >= num_warmup_trials:
                trials.append(TrialResult(watts * dur / 100, dur / 100, watts * dur, dur, 100, 40.0, 50.0))
        monitor.log.flush()
        entry = SimpleNamespace(trials=trials, energy_std=0.01, is_valid=False)
        return SimpleNamespace(entries=[entry])

    class PowerMonitor:
        def __init__(self, gpu_indices=None, update_period=None) -> None:
            self.update_period = update_period
            self.measurement_domains = [SimpleNamespace(value="device_instant")]

        def get_power_timeline(self, domain, gpu_index=None, start_time=None, end_time=None):
            assert domain == "device_instant"
            return {gpu_index: [(start_time, 690.0), (end_time, 690.0)]}

        def stop(self) -> None: ...

    monkeypatch.setitem(sys.modules, "zeus", SimpleNamespace(__path__=[]))
    monkeypatch.setitem(
        sys.modules, "zeus.monitor", SimpleNamespace(ZeusMonitor=ZeusMonitor, PowerMonitor=PowerMonitor)
    )
    monkeypatch.setitem(
        sys.modules, "zeus.profile", SimpleNamespace(profile_measurement_duration=profile_measurement_duration)
    )


def test_zeus_path_with_stand_ins(peers, monkeypatch, tmp_path):
    clock = {"t": 0.0}
    h = _FakeHandle(clock, 1e-5)
    _stub_zeus(monkeypatch, clock, tmp_path)
    ctx = _fake_gpu_ctx(peers, h, clock)
    ctx.power_monitor, ctx.scratch = None, tmp_path
    zeus, pm = peers.run_zeus(ctx, "gemm-512-bf16", h)
    assert (zeus.tool, pm.tool) == ("zeus", "zeus_powermonitor") and zeus.status == pm.status == "ok"
    assert zeus.power_w == pytest.approx(702.0) and zeus.ci_low_w < 702.0 < zeus.ci_high_w  # trials 701, 702, 703 W
    assert zeus.detail["trial_power_w"] == pytest.approx([701.0, 702.0, 703.0])
    assert pm.power_w == pytest.approx(690.0) and pm.detail["trial_w"] == pytest.approx([690.0] * 3)
    assert zeus.detail["power_monitor_update_period_s"] == 0.1 and zeus.cycle_us == pytest.approx(50_000.0)
    assert h.sets[:5] == [0, 1, 2, 3, 4]  # every call takes the next input set


def test_rerender_adds_fingrav_rows_without_a_gpu(peers, tmp_path, capsys):
    rows = _rows(peers) + [peers.ToolResult("gemm-4k-bf16", "fingrav", status="not available: run separately")]
    meta = {"gpu": "H200", "date": "2026-12-01", "labels": {"gemm-4k-bf16": "gemm 4096x4096x4096 bf16"}}
    peers.write_outputs(tmp_path / "gpu", rows, {**meta, "reference": {}})
    summary = tmp_path / "summary.csv"
    summary.write_text("scenario,kernel,predecessor,ssp_power_w,valid\ncb-4k,gemm 4096x4096x4096 bf16,,690.0,true\n")
    argv = ["--out", str(tmp_path / "final"), "--from-json", str(tmp_path / "gpu" / "peers.json")]
    assert peers.main([*argv, "--fingrav-summary", str(summary)]) == 0
    data = json.loads((tmp_path / "final" / "peers.json").read_text())
    fr = [r for r in data["results"] if r["tool"] == "fingrav"]
    assert len(fr) == 1 and fr[0]["power_w"] == 690.0 and data["meta"]["fingrav_summary"] == str(summary)
    assert "| gemm-4k-bf16 | fingrav | 690.0 | — | +1.5 |" in capsys.readouterr().out


def test_rerender_joins_several_peers_json(peers, tmp_path):
    """Two calls of the script on one card (aiconfigurator's protocol, then the reference) re-rendered as one: every
    result once, labels and reference data from both, times summed, each call's arguments kept."""
    parts = {}
    for name, tool, kernel in (("aic", "aiconfigurator", "gemm-4k-bf16"), ("ref", "reference", "gemv-8k-bf16")):
        row = peers.ToolResult(kernel, tool, power_w=600.0)
        meta = {"gpu": "H200", "date": "2026-12-03", "labels": {kernel: f"label {kernel}"}, "args": {"tools": [tool]}}
        ref = {kernel: {"burst_w": 1.0}} if tool == "reference" else {}
        peers.write_outputs(tmp_path / name, [row], {**meta, "reference": ref, "setup_s": 1.0, "total_s": 10.0})
        parts[name] = tmp_path / name / "peers.json"
    argv = ["--out", str(tmp_path / "joined"), "--from-json", str(parts["aic"]), "--from-json", str(parts["ref"])]
    assert peers.main(argv) == 0
    data = json.loads((tmp_path / "joined" / "peers.json").read_text())
    got = [(r["kernel"], r["tool"]) for r in data["results"] if r["tool"] != "fingrav"]
    assert got == [("gemm-4k-bf16", "aiconfigurator"), ("gemv-8k-bf16", "reference")]
    meta = data["meta"]
    assert set(meta["labels"]) == {"gemm-4k-bf16", "gemv-8k-bf16"} and set(meta["reference"]) == {"gemv-8k-bf16"}
    assert meta["setup_s"] == 2.0 and meta["total_s"] == 20.0
    assert [a["tools"] for a in meta["merged_from"].values()] == [["aiconfigurator"], ["reference"]]
    # one file is re-rendered as it is
    assert peers.join_peers({"x": json.loads(parts["aic"].read_text())})["meta"].get("merged_from") is None
