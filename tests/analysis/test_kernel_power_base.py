"""The SSE's kernel power with base runs (`fingrav.analysis.kernel_power.base_samples`, `with_base_runs`): SSE runs
and runs of the warm-ups alone through an H200-like sensor (20 ms period, 12.4 ms lag, 0.5 W noise, 0.5 ms of
sampling jitter); the SSE is the difference it makes, with no prior over the burst."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.kernel_power import (
    METHOD_BASE,
    base_samples,
    estimate_kernel_power,
    target_samples,
    with_base_runs,
)
from fingrav.analysis.profiles import ClusterBootstrap, small_sample_factor
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.profile import KernelPower
from fingrav.contracts.sensor import SensorModel
from fingrav.sensorfit import step_response
from fingrav.testing.plans import make_plan

MS = 1_000_000
IDLE_MW = 120_000.0
WINDOW, LAG, PERIOD, DELAY = 0.2 * MS, 12.4 * MS, 20.0 * MS, 2.8 * MS
SENSOR = SensorModel(
    period_ns=PERIOD,
    window_ns=WINDOW,
    lag_ns=LAG,
    settle_ns=WINDOW + 5 * LAG,
    noise_mw=500.0,
    step_mw=200_000.0,
    group_delay_se_ns=30_000.0,
    window_se_ns=250_000.0,
    lag_se_ns=40_000.0,
)
IDENTITY = ClockMap(offset_ns=0.0, gpu_ref_ns=0)


def _burst(
    rng: np.random.Generator,
    n_sse: int,
    n_base: int,
    exec_ns: int,
    warm_mw: tuple[float, ...],
    sse_mw: float,
    gap_ns: int = 0,
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """SSE runs (the warm-ups at `warm_mw`, then the SSE at `sse_mw`) and base runs (the warm-ups alone), shuffled,
    1 s apart, each at a random phase of the sensor's grid, the executions `gap_ns` apart (idle power between); the
    samples read the response at their time plus N(0, 0.5 ms), plus 0.5 W of noise. Returns (host executions of the
    SSE runs, raw executions of the base runs, runs, samples); the host clock is the GPU's."""
    kinds = rng.permutation(np.array(["sse"] * n_sse + ["base"] * n_base))
    hx, raw, runs, smp = [], [], [], []
    w = len(warm_mw)
    for r, kind in enumerate(kinds):
        t0 = 1_000 * MS * (r + 1) + int(rng.uniform(0, PERIOD))
        levels = list(warm_mw) + ([sse_mw] if kind == "sse" else [])
        starts = t0 + np.arange(len(levels)) * (exec_ns + gap_ns)
        for i, s in enumerate(starts):
            if kind == "sse":
                cycle_end = int(s + exec_ns + (gap_ns if i < len(levels) - 1 else 0))
                hx.append((r, "sse", "main", i, int(s), int(s + exec_ns), True, cycle_end))
            else:
                raw.append((r, "main", i, int(s), int(s + exec_ns)))
        runs.append((r, kind, 400 * MS, 0))
        t = np.arange(t0 - 100 * MS, t0 + (w + 1) * (exec_ns + gap_ns) + 6 * LAG, PERIOD) + rng.uniform(0, PERIOD)
        tj = t - DELAY + rng.normal(0.0, 0.5 * MS, t.size)
        reading = np.full(t.size, IDLE_MW)
        for s, p in zip(starts, levels, strict=True):
            reading += (p - IDLE_MW) * (
                step_response((tj - s) / MS, 0, WINDOW / MS, LAG / MS)
                - step_response((tj - s - exec_ns) / MS, 0, WINDOW / MS, LAG / MS)
            )
        reading += rng.normal(0.0, 500.0, t.size)
        smp.append(pl.DataFrame({"t_ns": t.astype(np.int64), "channel": "total", "power_mw": reading}))
    hx_f = pl.DataFrame(
        hx,
        schema=["run", "phase", "segment", "exec_index", "exec_start_ns", "exec_end_ns", "golden", "cycle_end_ns"],
        orient="row",
    ).with_columns(pl.col("run").cast(pl.Int32), pl.col("exec_index").cast(pl.Int32))
    raw_f = pl.DataFrame(raw, schema=["run", "segment", "exec_index", "gpu_start_ns", "gpu_end_ns"], orient="row")
    runs_f = pl.DataFrame(runs, schema=["run", "phase", "idle_ns", "delay_ns"], orient="row")
    return hx_f, raw_f, runs_f, pl.concat(smp)


def _estimates(
    seed: int, exec_ms: float, warm_mw: tuple[float, ...], sse_mw: float, n: int = 100, gap_ns: int = 0
) -> list[KernelPower]:
    """(with base runs: n SSE + n base, SSE runs alone: 2n) kernel powers of the same kind of data."""
    rng = np.random.default_rng(seed)
    exec_ns = int(exec_ms * MS)
    w = len(warm_mw)
    plan = make_plan(warmups=w, sse_index=w, ssp_index=w + 1, tail=1, base_runs=n)
    out = []
    for n_sse, n_base in ((n, n), (2 * n, 0)):
        hx, raw, runs, smp = _burst(rng, n_sse, n_base, exec_ns, warm_mw, sse_mw, gap_ns)
        frame = target_samples(smp, hx, runs, plan, SENSOR, int(DELAY), "sse")
        ids = np.unique(hx["run"].to_numpy()).astype(np.int64)
        boot = ClusterBootstrap(ids.size, 400, 0.95, seed=seed)
        rows = base_samples(smp, raw, runs, plan, IDENTITY, SENSOR, int(DELAY), frame, 0.05)
        assert rows.height == 0 if n_base == 0 else rows["run"].n_unique() == n_base
        frame, ids, counts = with_base_runs(frame, rows, ids, boot.counts, 0.95, seed)
        out.append(estimate_kernel_power(frame, SENSOR, ids, counts, 0.95, "sse", 10.0))
    return out


def test_base_runs_measure_the_sse_where_the_prior_extrapolates() -> None:
    """Warm-ups that ramp steeply then level off (the clock coming up after idle): with base runs (200 runs in all)
    the SSE is the difference it makes, right, with a CI under +-5 %; the smooth-burst prior reading 200 SSE runs
    alone scatters over more than 1.5 times that (its bootstrap part alone)."""
    truth = 900_000.0
    with_base, alone = _estimates(3, 2.7, (550_000.0, 860_000.0, 890_000.0), truth)
    assert with_base.measurable, with_base.reason
    assert with_base.power.method == METHOD_BASE and with_base.base_runs == 100 and with_base.runs == 100
    assert with_base.power.ci_low <= truth <= with_base.power.ci_high
    half = (with_base.power.ci_high - with_base.power.ci_low) / 2 / truth
    assert half < 0.05
    assert abs(with_base.power.value - truth) / truth < 0.03
    # the prior alone: wider
    alone_half = (alone.components["bootstrap_high_mw"] - alone.components["bootstrap_low_mw"]) / 2 / truth
    assert alone.base_runs == 0 and alone_half > 1.5 * half


def test_few_runs_widen_the_bootstrap_part(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bootstrap's percentile interval over few runs is too narrow: widened about the estimate by
    `small_sample_factor` of the smaller stratum (here 12 SSE runs against 14 base runs), as the readings' CIs are."""
    import fingrav.analysis.kernel_power as kp

    rng = np.random.default_rng(5)
    plan = make_plan(warmups=2, sse_index=2, ssp_index=3, tail=1, base_runs=14)
    hx, raw, runs, smp = _burst(rng, 12, 14, int(2.7 * MS), (700_000.0, 800_000.0), 850_000.0, 0)
    frame = target_samples(smp, hx, runs, plan, SENSOR, int(DELAY), "sse")
    ids = np.unique(hx["run"].to_numpy()).astype(np.int64)
    boot = ClusterBootstrap(ids.size, 400, 0.95, seed=5)
    rows = base_samples(smp, raw, runs, plan, IDENTITY, SENSOR, int(DELAY), frame, 0.05)
    frame, ids, counts = with_base_runs(frame, rows, ids, boot.counts, 0.95, 5)
    assert kp._fewest_clusters(frame) == 12

    def estimate() -> KernelPower:
        return estimate_kernel_power(frame, SENSOR, ids, counts, 0.95, "sse", 50.0)

    wide = estimate()
    monkeypatch.setattr(kp, "small_sample_factor", lambda n, level: 1.0)
    plain = estimate()
    f = small_sample_factor(12, 0.95)
    assert f > 1.05
    point = wide.power.value
    for side in ("bootstrap_low_mw", "bootstrap_high_mw"):
        assert wide.components[side] - point == pytest.approx(f * (plain.components[side] - point), rel=1e-9)


def test_launch_gaps_are_not_read_as_the_sse() -> None:
    """Executions 90 us apart (idle power between): a base run ends without the gap the SSE runs have before their
    SSE; placed where its SSE would have started, the base runs' warm-ups match the SSE runs' and a 0.6 ms SSE reads
    right (counted in one kind only, the gaps' missing energy read as the SSE's: ~-14 %)."""
    truth = 850_000.0
    est, _ = _estimates(8, 0.6, (800_000.0, 840_000.0, 850_000.0), truth, n=150, gap_ns=90_000)
    assert est.measurable, est.reason
    assert est.power.ci_low <= truth <= est.power.ci_high and abs(est.power.value - truth) / truth < 0.06


@pytest.mark.slow
def test_randomized_base_runs_cover_the_truth() -> None:
    """Random kernel lengths (0.8-4.5 ms), warm-up shapes and SSE levels: the 95 % CI covers the truth in nearly
    every case and no reported value is off by more than its CI's half-width x 1.5."""
    rng = np.random.default_rng(11)
    covered = reported = 0
    for k in range(10):
        exec_ms = float(rng.uniform(0.8, 4.5))
        sse = float(rng.uniform(600_000.0, 950_000.0))
        warm = tuple(sse * f for f in np.sort(rng.uniform(0.6, 1.05, 3)))
        est, _ = _estimates(200 + k, exec_ms, warm, sse, n=80)
        if not est.measurable:
            continue
        reported += 1
        half = (est.power.ci_high - est.power.ci_low) / 2
        covered += est.power.ci_low <= sse <= est.power.ci_high
        assert abs(est.power.value - sse) <= 1.5 * half
    assert reported >= 7 and covered >= reported - 1


def test_base_samples_screen_incomplete_and_slow_runs() -> None:
    """A base run missing an execution, or slowed throughout beyond the SSE runs' warm-ups, is left out; the rest
    have an empty target at their last execution's end and the SSE runs' kind of what follows."""
    rng = np.random.default_rng(1)
    plan = make_plan(warmups=3, sse_index=3, ssp_index=4, tail=1, base_runs=6)
    hx, raw, runs, smp = _burst(rng, 6, 6, 2 * MS, (500_000.0, 600_000.0, 650_000.0), 700_000.0)
    frame = target_samples(smp, hx, runs, plan, SENSOR, int(DELAY), "sse")
    base_ids = sorted(set(raw["run"].to_list()))
    slow, short = base_ids[0], base_ids[1]
    slower = pl.col("run") == slow  # each execution 0.7 ms longer: the run's span 2.1 ms longer
    raw = raw.with_columns(
        gpu_start_ns=pl.when(slower)
        .then(pl.col("gpu_start_ns") + pl.col("exec_index") * 700_000)
        .otherwise(pl.col("gpu_start_ns")),
        gpu_end_ns=pl.when(slower)
        .then(pl.col("gpu_end_ns") + (pl.col("exec_index") + 1) * 700_000)
        .otherwise(pl.col("gpu_end_ns")),
    ).filter(~((pl.col("run") == short) & (pl.col("exec_index") == 1)))
    rows = base_samples(smp, raw, runs, plan, IDENTITY, SENSOR, int(DELAY), frame, 0.05)
    kept = set(rows["run"].to_list())
    assert kept == set(base_ids) - {slow, short}
    per = rows.unique("run")
    assert (per["t_start_ns"] == per["t_end_ns"]).all() and per["sse_run"].all() and per["base_run"].all()
    assert rows.columns == frame.columns


@pytest.mark.slow
def test_a_sweep_with_base_runs_reads_them_into_the_sse_kernel_power(tmp_path) -> None:
    """The pipeline on the simulated H200 (run_policy.sse_base_runs): the SSE's kernel power is the base-run
    estimator's (its method, its base runs counted apart from the runs), and it covers the simulator's truth."""
    import json

    import yaml
    from conftest import snakemake, tiny_config

    cfg = tiny_config(sweep="base", preset="h200", sse="always", sse_runs=60, sse_base_runs=60, runs=20)
    cfg["calibration"]["steps"] = 40
    cfg["analysis"]["kernel_power_max_ci_pct"] = 25.0
    cfg["scenarios"] = [{"name": "g", "kernel": {"kind": "gemm", "m": 8192, "n": 16384, "k": 8192}}]
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(tmp_path, "--cores", "1", "--configfile", str(tmp_path / "base.yaml"))
    summary = json.loads((tmp_path / "results/base/profiles/gpu0/g/summary.json").read_text())
    kp = summary["kernel_power"]["sse"]
    assert kp["base_runs"] >= 30 and kp["runs"] >= 30  # the base runs binned like the SSE runs: the golden window
    assert kp["measurable"], kp.get("reason")
    assert kp["power"]["method"] == METHOD_BASE
    assert kp["power"]["ci_low"] <= kp["truth_mw"] <= kp["power"]["ci_high"]


def test_the_bootstrap_interval_never_leaves_out_its_point() -> None:
    """Widened about the point by `small_sample_factor`; a point outside its replicates' interval (a nonlinear fit)
    keeps the interval on the point's side, never a bound past the point."""
    import fingrav.analysis.kernel_power as kp

    reps = np.linspace(100.0, 200.0, 1001)
    f = small_sample_factor(10, 0.95)
    lo, hi = kp._bootstrap_interval(150.0, reps, 0.95, 10)
    assert lo == pytest.approx(150.0 - (150.0 - 102.5) * f) and hi == pytest.approx(150.0 + (197.5 - 150.0) * f)
    lo, hi = kp._bootstrap_interval(90.0, reps, 0.95, 10)
    assert lo == 90.0 and hi == pytest.approx(90.0 + (197.5 - 90.0) * f)
