"""Issue 20: the SSE decision (run_policy.sse), the plan's cost by run kind and the sweep estimate of `fingrav plan`."""

from __future__ import annotations

import pytest

from fingrav.cli import main
from fingrav.collect.estimate import (
    PROBE_MIN_PERIODS,
    READ_GUARD_NS,
    REFERENCE_CYCLES,
    REFERENCE_PART_NS,
    DeviceTiming,
    limiter_bound,
    plan_cost,
    probe_load_ns,
)
from fingrav.collect.plan import make_plan, sse_decision
from fingrav.collect.sweep_estimate import estimate_sweep, preset_sensor
from fingrav.config import RunPolicy, SweepConfig
from fingrav.contracts.plan import Probe
from fingrav.device.sim.presets import PRESETS

MS = 1_000_000
SENSOR_H200 = preset_sensor(PRESETS["h200"])
SENSOR_MI300X = preset_sensor(PRESETS["mi300x"])


def _policy(**kw) -> RunPolicy:
    return RunPolicy(**{"sse_min_lois": 10, **kw})


def test_short_kernel_on_slow_sensor_skips_sse_with_its_cost() -> None:
    # 25 us on 20 ms samples: ~0.00125 LOIs per run, 2.5 in 2000 runs, < 10 / 2
    d = sse_decision(25_000, 30_000, SENSOR_H200, 100 * MS, 0.0, _policy(max_runs=2000))
    assert d.skipped is not None and "run_policy.sse: always" in d.skipped
    assert d.lois_per_run == pytest.approx(25_000 / SENSOR_H200.period_ns)
    assert d.runs_for_min_lois == pytest.approx(30 / d.lois_per_run, rel=1e-3)
    # each run: idle + guard + mean delay + 4 executions
    per_run = (100 * MS + READ_GUARD_NS + SENSOR_H200.period_ns / 2 + 4 * 30_000) / 1e9
    assert d.runs_for_min_lois_s == pytest.approx(d.runs_for_min_lois * per_run)
    assert f"~{d.runs_for_min_lois} runs" in d.skipped


def test_sse_kept_where_it_gives_a_number_today() -> None:
    # sim-h200 cb-4k (164 us): ~16 LOIs expected in 2000 runs, >= 10 / 2: measured (it gives an SSE reading today)
    d = sse_decision(164_000, 168_000, SENSOR_H200, 100 * MS, 0.0, _policy(max_runs=2000))
    assert d.skipped is None and d.expected_lois > 5
    # the SSP runs' execution at the SSE index gives SSE LOIs too: 40 SSE runs alone would not do, 40 + 800 SSP do
    short = _policy(max_runs=40)
    assert sse_decision(164_000, 168_000, SENSOR_H200, 100 * MS, 0.0, short).skipped is not None
    d = sse_decision(164_000, 168_000, SENSOR_H200, 100 * MS, 0.0, short, ssp_runs=800)
    assert d.skipped is None and d.expected_lois == pytest.approx(840 * d.lois_per_run)
    # a 1 ms sensor: a 1.5 ms execution gives its LOI in every run; a 25 us one in 1 of 40, 100 in 4000 runs
    d = sse_decision(1_500_000, 1_505_000, SENSOR_MI300X, 5 * MS, 0.0, _policy())
    assert d.skipped is None and d.lois_per_run == 1.0
    d = sse_decision(25_000, 30_000, SENSOR_MI300X, 5 * MS, 0.0, _policy())
    assert d.skipped is None and d.expected_lois == pytest.approx(100.0)


@pytest.mark.parametrize(("mode", "skipped"), [("always", False), ("never", True), ("auto", True)])
def test_sse_policy(mode: str, skipped: bool) -> None:
    plan = make_plan(25_000, 30_000, SENSOR_H200, None, _policy(max_runs=2000, sse=mode))
    assert (plan.sse_runs == 0) is skipped
    assert (plan.sse_decision.skipped is not None) is skipped
    assert plan.sse_decision.policy == mode
    if skipped:
        assert plan.notes and plan.cost.sse_s == 0.0


def test_explicit_sse_runs_are_measured_in_auto() -> None:
    plan = make_plan(25_000, 30_000, SENSOR_H200, None, _policy(sse_runs=50))
    assert plan.sse_runs == 50 and plan.sse_decision.skipped is None


def test_plan_cost_adds_up_the_runs() -> None:
    pol = _policy(reference_ms=1000, reference_max_ms=5000, probe_ms=400, probe_source="separate")
    plan = make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, pol, predecessor_count=4, pred_cycle_ns=200_000)
    c = plan_cost(plan, pol, 200_000)
    assert plan.cost == c
    run = lambda n: plan.idle_ns + READ_GUARD_NS + plan.delay_max_ns / 2 + 4 * 200_000 + n * 1_010_000  # noqa: E731
    assert plan.ssp_runs_expected is not None  # the adaptive SSP stop (default): the runs expected, the budget
    assert c.ssp_s == pytest.approx(plan.ssp_runs_expected * run(plan.executions_per_run) / 1e9)
    assert c.ssp_max_s == pytest.approx(plan.runs * run(plan.executions_per_run) / 1e9)
    assert c.sse_s == pytest.approx(plan.sse_runs * run(plan.sse_executions_per_run) / 1e9)
    # the adaptive reference run: reference_ms (reference_max_ms) + the part in flight when the decision stops it
    assert 1.25 < c.reference_s < 1.27 and 5.25 < c.reference_max_s < 5.27
    assert 0.8 < c.probe_s < 0.85  # 400 ms of probe + 400 ms of wait + the timing run
    assert c.total_max_s - c.total_s == pytest.approx(c.reference_max_s - c.reference_s + c.ssp_max_s - c.ssp_s)


def _sweep(tmp_path, **policy) -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "sweep": "est",
            "device": {"backend": "sim", "sim": {"preset": "h200"}},
            "run_policy": {"max_runs": 2000, **policy},
            "scenarios": [
                {"name": "short", "kernel": {"kind": "gemv", "m": 4096, "k": 4096}},
                {"name": "long", "kernel": {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192}},
            ],
        }
    )


def test_sweep_estimate_ranges(tmp_path) -> None:
    est = estimate_sweep(_sweep(tmp_path), results_root=tmp_path)
    short, long = est.scenarios
    assert short.plan.sse_runs == 0 and long.plan.sse_runs > 0  # 12 us skipped, 1.3 ms measured
    assert est.calibration_s > 0  # not calibrated yet: its load steps count
    for s in est.scenarios:
        assert 0 < s.low_s <= s.expected_s < s.high_s
    assert est.total_s == pytest.approx(est.calibration_s + short.expected_s + long.expected_s)
    assert est.total_min_s <= est.total_s < est.total_max_s
    assert "not calibrated" in est.basis[0]


def test_always_costs_more(tmp_path) -> None:
    auto = estimate_sweep(_sweep(tmp_path), results_root=tmp_path)
    always = estimate_sweep(_sweep(tmp_path, sse="always"), results_root=tmp_path)
    assert always.scenarios[0].cost.sse_s > 100 * max(auto.scenarios[0].cost.sse_s, 1.0)


def test_cli_plan_prints_the_estimate(tmp_path, capsys) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "sweep: est\ndevice: {backend: sim, sim: {preset: h200}}\nrun_policy: {max_runs: 2000}\n"
        "scenarios:\n  - {name: mb-4k, kernel: {kind: gemv, m: 4096, k: 4096}}\n"
    )
    assert main(["plan", "--config", str(cfg), "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "mb-4k" in out and "skipped" in out and "run_policy.sse: always" in out and "total:" in out


def test_probes_seen_on_a_real_gpu_price_its_transient() -> None:
    # the committed H200 dataset: its probes settle in ~100 ms (light kernels) and ~250 ms (held back by the
    # limiter), longer than the simulated H200's 60 ms sensor settling; the estimate takes them over the preset's
    from pathlib import Path

    from fingrav.collect.sweep_estimate import expected_probe, probes_seen

    seen = probes_seen(Path(__file__).resolve().parents[2] / "results" / "h200-sustained" / "gpu", PRESETS["h200"])
    assert seen is not None and seen.count >= 10
    assert 70 * MS < seen.stable_light_ns < 150 * MS and seen.stable_heavy_ns > seen.stable_light_ns
    pol = _policy()
    light = expected_probe(pol, SENSOR_H200, PRESETS["h200"], 10_000, False, seen)
    heavy = expected_probe(pol, SENSOR_H200, PRESETS["h200"], 10_000, True, seen)
    assert light.t_stable_ns == int(seen.stable_light_ns) and heavy.t_stable_ns == int(seen.stable_heavy_ns)
    assert light.t_recover_ns == int(seen.recover_ns)
    assert probes_seen(Path(__file__).parent, PRESETS["h200"]) is None  # no plan.json here


def test_an_adaptive_plan_prices_the_runs_it_expects_and_its_budget() -> None:
    """Adaptive SSP stop (run_policy.ssp_ci_pct): a settled probe gives a 4-period tail, the runs min_lois LOIs need
    at that many LOIs per run (at least MIN_RUNS) are priced in ssp_s, the budget (runs) in ssp_max_s."""
    from fingrav.analysis.ssp_stop import MIN_RUNS
    from fingrav.collect.plan import TAIL_PERIODS, expected_ssp_runs

    def probe_of(settled: bool) -> Probe:
        return Probe(
            busy_ns=600 * MS, executions=2000, idle_level_mw=1e5, level_mw=7e5, peak_mw=7.1e5, tol_mw=7e3,
            t_stable_ns=200 * MS, t_recover_ns=100 * MS, settled=settled, samples=30,
        )  # fmt: skip

    pol = _policy(max_runs=50, min_lois=30)
    probe = probe_of(settled=True)
    plan = make_plan(300_000, 302_000, SENSOR_H200, probe, pol)
    assert plan.ssp_ci_pct == pol.ssp_ci_pct and plan.ssp_min_lois == 30 and plan.runs == 50
    assert plan.tail == -(-TAIL_PERIODS * SENSOR_H200.period_ns // 302_000)
    per_run = plan.tail * 302_000 / SENSOR_H200.period_ns  # ~4 LOIs
    assert (
        plan.ssp_runs_expected
        == max(MIN_RUNS, -(-30 // per_run))
        == expected_ssp_runs(plan.tail, 302_000, SENSOR_H200.period_ns, 30, 50)
    )
    c = plan.cost
    one = (plan.idle_ns + READ_GUARD_NS + plan.delay_max_ns / 2 + plan.executions_per_run * 302_000) / 1e9
    assert c.ssp_s == pytest.approx(plan.ssp_runs_expected * one)
    assert c.ssp_max_s == pytest.approx(50 * one)
    assert c.total_max_s - c.total_s == pytest.approx(c.reference_max_s - c.reference_s + c.ssp_max_s - c.ssp_s)
    # a fixed count (ssp_ci_pct null) prices every run and keeps the tail spread over them
    fixed = make_plan(300_000, 302_000, SENSOR_H200, probe, _policy(max_runs=50, min_lois=30, ssp_ci_pct=None))
    assert fixed.ssp_runs_expected is None and fixed.cost.ssp_max_s is None and fixed.tail < plan.tail
    assert fixed.cost.ssp_s == pytest.approx(50 * (one - (plan.tail - fixed.tail) * 302_000 / 1e9))
    # a probe that never settled: the method SSP is flagged unsettled whatever the runs give, so the SSP runs stop at
    # MIN_RUNS (said in the notes and priced so), each with the long tail (>= min_lois LOIs in them)
    unsettled = make_plan(300_000, 302_000, SENSOR_H200, probe_of(settled=False), pol)
    assert unsettled.tail == plan.tail and unsettled.runs == unsettled.ssp_runs_expected == MIN_RUNS
    assert MIN_RUNS * unsettled.tail * 302_000 / SENSOR_H200.period_ns >= 30
    assert any("did not settle, so it is flagged unsettled" in n for n in unsettled.notes)
    assert unsettled.cost.ssp_s == pytest.approx(MIN_RUNS * one) == pytest.approx(unsettled.cost.ssp_max_s)
    # ... and the SSE runs, where they are measured, get the SSE LOIs of the SSP runs not run
    sse_pol = _policy(max_runs=50, min_lois=30, sse="always")
    settled_sse = make_plan(300_000, 302_000, SENSOR_H200, probe, sse_pol)
    unsettled_sse = make_plan(300_000, 302_000, SENSOR_H200, probe_of(settled=False), sse_pol)
    saved = 50 - MIN_RUNS
    assert unsettled_sse.sse_runs - settled_sse.sse_runs == saved - (50 - settled_sse.ssp_runs_expected)
    # explicit SSE runs get no top-up: the SSP runs keep their budget (and their SSE LOIs)
    explicit = make_plan(300_000, 302_000, SENSOR_H200, probe_of(settled=False), _policy(max_runs=50, sse_runs=20))
    assert explicit.runs == 50 and explicit.sse_runs == 20
    # without an adaptive stop nothing changes: the fixed count, the tail spread over it
    fixed_unsettled = make_plan(
        300_000, 302_000, SENSOR_H200, probe_of(settled=False), _policy(max_runs=50, min_lois=30, ssp_ci_pct=None)
    )
    assert fixed_unsettled.runs == 50 and fixed_unsettled.tail == fixed.tail


def _probe_at(level_w: float, tol_w: float = 10.0, peak_w: float | None = None) -> Probe:
    peak = level_w * 1.25 if peak_w is None else peak_w  # a boost past the level before it settles
    return Probe(busy_ns=600 * MS, executions=1000, idle_level_mw=100e3, level_mw=level_w * 1e3,
                 peak_mw=peak * 1e3, tol_mw=tol_w * 1e3, t_stable_ns=150 * MS, t_recover_ns=100 * MS,
                 settled=True, samples=30)  # fmt: skip


def test_limiter_bound_kernel_priced_with_its_limit_cycles_and_more_ssp_runs() -> None:
    """A probe at the power limit: the reference run until the first clamp + REFERENCE_CYCLES cycles and more SSP
    runs; below it, reference_ms and the steady count; every run pays the host gap."""
    timing = DeviceTiming(700e3, 700 * MS, 900 * MS, 40 * MS)
    pol = _policy(reference_ms=2000, reference_max_ms=20000, runs=24, ssp_ci_pct=0.5, probe_source="separate")
    hot, cool = _probe_at(705.0), _probe_at(600.0)
    assert limiter_bound(hot, timing) and not limiter_bound(cool, timing)
    assert limiter_bound(_probe_at(692.0, 10.0), timing)  # within its allowance of the limit
    # levelling off at the cap without overshooting it: held steady (h200-db4's decode attentions), not bound
    assert not limiter_bound(_probe_at(699.0, 10.0, peak_w=704.0), timing)
    assert limiter_bound(_probe_at(699.0, 10.0, peak_w=710.0), timing)
    assert not limiter_bound(_probe_at(600.0, 10.0, peak_w=900.0), timing)  # an overshoot that settles below it
    # a probe that has not run yet (sweep_estimate: level = peak = the limit, no allowance) is bound
    assert limiter_bound(_probe_at(700.0, 0.0, peak_w=700.0), timing)
    assert not limiter_bound(hot, DeviceTiming())  # no known limit: nothing is limiter-bound
    ph = make_plan(100_000, 102_000, SENSOR_H200, hot, pol, timing=timing)
    pc = make_plan(100_000, 102_000, SENSOR_H200, cool, pol, timing=timing)
    busy_hot = 700 * MS + REFERENCE_CYCLES * 900 * MS + REFERENCE_PART_NS
    assert ph.cost.reference_s == pytest.approx((ph.idle_ns + READ_GUARD_NS + busy_hot + 40 * MS) / 1e9)
    assert pc.cost.reference_s == pytest.approx(
        (pc.idle_ns + READ_GUARD_NS + 2000 * MS + REFERENCE_PART_NS + 40 * MS) / 1e9
    )
    assert ph.ssp_runs_expected > pc.ssp_runs_expected
    # the SSE top-up (the runs collected) does not depend on the price
    assert ph.sse_runs == pc.sse_runs and ph.runs == pc.runs == 24
    # the host gap: per SSP run
    no_gap = make_plan(100_000, 102_000, SENSOR_H200, cool, pol, timing=DeviceTiming(700e3, 700 * MS, 900 * MS))
    assert pc.cost.ssp_s - no_gap.cost.ssp_s == pytest.approx(pc.ssp_runs_expected * 0.040)


def test_timing_of_device_from_its_record() -> None:
    from fingrav.collect.sweep_estimate import HOST_GAP_NS, timing_of_device

    t = timing_of_device({"backend": "nvml", "enforced_power_limit_mw": 700000.0})
    h200 = PRESETS["h200"]
    assert t.limit_mw == 700000.0 and t.host_gap_ns == HOST_GAP_NS["nvml"]
    assert t.cycle_ns == h200.limit_cycle_high_ns + h200.limit_cycle_low_ns
    assert timing_of_device({"backend": "nvml"}).limit_mw is None  # no limit recorded: nothing limiter-bound
    sim = timing_of_device({"vendor": "sim", "backend": "sim", "preset": "mi300x"})
    assert sim.host_gap_ns == 0.0 and sim.limit_mw == pytest.approx(PRESETS["mi300x"].cap_target_mw)


def test_probe_watch_from_probe_idle_ms() -> None:
    """run_policy.probe_idle_ms shortens the idle after the probe (at least two settle waits); None keeps probe_ms,
    and leaves the collection hash of a config without it as it was."""
    from fingrav.collect.estimate import probe_watch_ns
    from fingrav.config import Scenario, collection_hash

    assert probe_watch_ns(_policy(probe_ms=600), 80 * MS) == 600 * MS
    assert probe_watch_ns(_policy(probe_ms=600, probe_idle_ms=250), 80 * MS) == 250 * MS
    assert probe_watch_ns(_policy(probe_ms=600, probe_idle_ms=100), 80 * MS) == 160 * MS
    # the idle after a separate probe (the watch after a probe read from the reference run is priced the same)
    a = make_plan(100_000, 102_000, SENSOR_H200, None, _policy(probe_ms=600, probe_source="separate"))
    b = make_plan(
        100_000, 102_000, SENSOR_H200, None, _policy(probe_ms=600, probe_idle_ms=250, probe_source="separate")
    )
    assert a.cost.probe_s - b.cost.probe_s == pytest.approx(0.35)
    scen = Scenario.model_validate({"name": "x", "kernel": {"kind": "gemm", "m": 8, "n": 8, "k": 8}})
    pol = RunPolicy()
    assert collection_hash(scen, pol, 1) == collection_hash(scen, RunPolicy(probe_idle_ms=None), 1)
    assert collection_hash(scen, pol, 1) != collection_hash(scen, RunPolicy(probe_idle_ms=250), 1)
    # probe_source 'separate' (the default, what collections before it did) keeps their hash; 'reference' does not
    assert collection_hash(scen, pol, 1) == collection_hash(scen, RunPolicy(probe_source="separate"), 1)
    assert collection_hash(scen, pol, 1) != collection_hash(scen, RunPolicy(probe_source="reference"), 1)


def test_a_probe_read_from_the_reference_run_costs_its_watch_only() -> None:
    """run_policy.probe_source 'reference': no probe run of its own and a settle wait (not the plan's idle) before
    the reference run; the watch after it stays. 'separate' is the default."""
    kw = {"reference_ms": 1000, "reference_max_ms": 5000, "probe_ms": 400}
    sep, merged, default = (_policy(**kw, probe_source="separate"), _policy(**kw, probe_source="reference"),
                            _policy(**kw))  # fmt: skip
    plan = make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, sep)
    a, b, c = plan_cost(plan, sep), plan_cost(plan, merged), plan_cost(plan, default)
    assert a == c
    settle = SENSOR_MI300X.settle_ns + SENSOR_MI300X.period_ns
    n_probe = -(-400 * MS // 1_010_000)
    assert a.probe_s - b.probe_s == pytest.approx((settle + READ_GUARD_NS + n_probe * 1_010_000) / 1e9)
    assert a.reference_s - b.reference_s == pytest.approx((plan.idle_ns - settle) / 1e9)
    assert 0.4 < b.probe_s < 0.42  # the 400 ms watch + the timing run
    # no reference run: the probe runs on its own
    none = _policy(reference_ms=0, probe_ms=400)
    assert plan_cost(make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, none), none).probe_s > 0.8


def test_base_runs_are_planned_and_priced_only_where_they_can_run() -> None:
    """run_policy.sse_base_runs: the plan measures them beside the SSE runs and prices them (the SSE run less its SSE
    execution); none where no SSE run is measured or there is no warm-up, with a note; 0 leaves plan.json as it
    was (no key)."""
    pol = _policy(sse_runs=60, sse_base_runs=40)
    plan = make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, pol)
    assert plan.base_runs == 40
    run = lambda n: plan.idle_ns + READ_GUARD_NS + plan.delay_max_ns / 2 + n * 1_010_000  # noqa: E731
    expected = (60 * run(plan.sse_executions_per_run) + 40 * run(plan.sse_index)) / 1e9
    assert plan.cost.sse_s == pytest.approx(expected)
    none = make_plan(25_000, 30_000, SENSOR_H200, None, _policy(max_runs=2000, sse="never", sse_base_runs=40))
    assert none.base_runs == 0 and any("40 base runs not measured: no SSE runs" in n for n in none.notes)
    cold = make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, _policy(sse_runs=60, sse_base_runs=40, warmups=0))
    assert cold.base_runs == 0 and any("no warm-ups" in n for n in cold.notes)
    plain = make_plan(1_000_000, 1_010_000, SENSOR_MI300X, None, _policy(sse_runs=60))
    assert "base_runs" not in plain.model_dump() and "base_runs" in plan.model_dump()
    # 0 (the default, what collections before it did) keeps their hash; base runs are another collection
    from fingrav.config import Scenario, collection_hash

    scen = Scenario.model_validate({"name": "x", "kernel": {"kind": "gemm", "m": 8, "n": 8, "k": 8}})
    assert collection_hash(scen, RunPolicy(), 1) == collection_hash(scen, RunPolicy(sse_base_runs=0), 1)
    assert collection_hash(scen, RunPolicy(), 1) != collection_hash(scen, RunPolicy(sse_base_runs=40), 1)


def test_earlier_collections_price_the_same_kernels_ssp_runs(tmp_path) -> None:
    """`fingrav plan --probes-from A --probes-from B`: a kernel whose adaptive SSP stop took n runs in earlier
    collections is priced at their mean (within MIN_RUNS and the budget), the others at the plan's expected count;
    a collection copied into two folders counts once."""
    import json
    import shutil
    from pathlib import Path

    from fingrav.analysis.ssp_stop import MIN_RUNS
    from fingrav.collect.sweep_estimate import probes_seen

    src = Path(__file__).resolve().parents[2] / "results" / "h200-sustained" / "gpu" / "raw" / "gpu0"
    plans = sorted(src.glob("*/plan.json"))[:2]
    assert len(plans) == 2

    def copy(folder: Path, runs: int, created: str) -> None:
        for p in plans:
            doc = json.loads(p.read_text())
            doc["ssp_ci_pct"] = 0.5
            doc["ssp_stop"] = {"extend": False, "reason": "ci_reached", "runs": runs, "lois": 40}
            doc["provenance"]["created_utc"] = created
            (folder / "raw" / "gpu0" / p.parent.name).mkdir(parents=True)
            (folder / "raw" / "gpu0" / p.parent.name / "plan.json").write_text(json.dumps(doc))

    copy(tmp_path / "a", 10, "2026-12-01T00:00:00+00:00")
    copy(tmp_path / "b", 21, "2026-12-02T00:00:00+00:00")
    shutil.copytree(tmp_path / "b", tmp_path / "b-copy")
    seen = probes_seen([tmp_path / "a", tmp_path / "b", tmp_path / "b-copy"], PRESETS["h200"])
    assert seen is not None and seen.count == 4 and len(seen.kernels) == 2
    own = next(iter(seen.kernels.values()))
    assert sorted(own.ssp_runs) == [10, 21]
    pol = _policy(max_runs=50, min_lois=30, runs=24)
    probe = own.probe
    plan = make_plan(own.exec_time_ns, own.cycle_ns, SENSOR_H200, probe, pol)
    assert own.expected_ssp_runs(plan) == min(plan.runs, 16)  # round(15.5)
    fixed = make_plan(own.exec_time_ns, own.cycle_ns, SENSOR_H200, probe, _policy(ssp_ci_pct=None, runs=24))
    assert own.expected_ssp_runs(fixed) is None  # a fixed count is not priced from earlier stops
    few = type(own)(own.probe, own.exec_time_ns, own.cycle_ns, (3,))
    assert few.expected_ssp_runs(plan) == MIN_RUNS


def test_a_sensor_slower_than_the_probe_lengthens_it() -> None:
    """The stability probe's load is run_policy.probe_ms, at least the sensor's settling and PROBE_MIN_PERIODS of its
    periods: unchanged on the H200 (182 ms < 400 ms), longer on a 100 ms sensor, whose 400 ms gave 3-4 samples."""
    pol = _policy(probe_ms=400)
    assert probe_load_ns(pol, SENSOR_H200) == 400 * MS
    slow = SENSOR_H200.model_copy(update={"period_ns": 100 * MS, "settle_ns": 300 * MS})
    assert probe_load_ns(pol, slow) == 300 * MS + PROBE_MIN_PERIODS * 100 * MS
    # the price follows it: a probe run of its own costs its load
    fast_cost = make_plan(100_000, 102_000, SENSOR_H200, None, _policy(probe_ms=400, probe_source="separate")).cost
    slow_cost = make_plan(100_000, 102_000, slow, None, _policy(probe_ms=400, probe_source="separate")).cost
    assert fast_cost is not None and slow_cost is not None
    assert slow_cost.probe_s - fast_cost.probe_s >= (probe_load_ns(pol, slow) - 400 * MS) / 1e9
