"""The simulator's sustained operation (issue 10): the H200 preset's power limit cycle on cap-bound kernels, the
stamp kernels' cost in the GPU timeline, and the truth of an unstamped sustained run."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.config import GemmKernel, GemvKernel, SimConfig, SimOverrides
from fingrav.device.sim import SimulatedGPU
from fingrav.device.sim.presets import H200

MS = 1_000_000


def _block_means_w(t_ns: np.ndarray, mw: np.ndarray, t0: int, block_ns: int) -> np.ndarray:
    k = (t_ns - t0) // block_ns
    return np.array([mw[k == b].mean() for b in np.unique(k) if (k == b).sum() >= 3]) / 1e3


def test_cap_bound_gemm_cycles_burst_then_clamped_and_its_mean_sits_at_the_cap() -> None:
    periodic = SimOverrides(limit_cycle_jitter_pct=0.0)  # the preset's cycle, strictly periodic
    dev = SimulatedGPU(SimConfig(preset="h200", overrides=periodic), seed=2)
    k = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
    assert dev.kernel_info(k)["heavy"]
    dev.start_sampling()
    dev.sleep_ns(1_000 * MS)
    t0 = dev.host_time_ns()
    n = int(4.0e9 / dev.kernel_info(k)["steady_us"] / 1e3)
    rec = dev.run_unstamped(k, n)
    readings = dev.drain_reading_truth()  # noise-free readings: the sensor's view of the true power
    assert len(rec) == 1  # one record spanning the run
    st = dev.sustained_truth_of_last_run()["total"]
    assert st["cycles"] >= 3
    # whole-cycle mean at the cap target (690 W), within the clamp-level rounding
    assert st["power_mw"] == pytest.approx(H200.cap_target_mw, rel=0.01)
    # total power in 100 ms blocks: the burst level (~725 W) early, clamped blocks later, repeating
    tot = (readings.channel == "total") & (readings.t_ns >= t0) & (readings.t_ns < t0 + 3_900 * MS)
    mean_w = _block_means_w(readings.t_ns[tot], readings.power_mw[tot], t0, 100 * MS)
    assert mean_w[1:6].mean() == pytest.approx(H200.cap_burst_mw / 1e3, rel=0.02)
    assert mean_w.min() < 0.92 * mean_w.max()  # clamps of ~0.2 s every ~0.9 s
    low = mean_w < 0.5 * (mean_w.min() + mean_w.max())
    starts = np.flatnonzero(low[1:] & ~low[:-1])
    period_blocks = (H200.limit_cycle_high_ns + H200.limit_cycle_low_ns) / (100 * MS)
    assert np.diff(starts).mean() == pytest.approx(period_blocks, abs=1.5)


def test_limit_cycles_vary_from_one_to_the_next_and_average_to_the_cap_over_many() -> None:
    from fingrav.device.sim.device import limit_cycle_schedule

    starts, lows = limit_cycle_schedule(H200, np.random.default_rng(1), cycles=400)
    periods = np.diff(starts)
    assert 0.07 < periods.std() / periods.mean() < 0.2  # the preset's 15 % per phase
    assert periods.mean() == pytest.approx((H200.limit_cycle_high_ns + H200.limit_cycle_low_ns), rel=0.05)
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=3)
    k = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
    dev.run_unstamped(k, int(60e9 / dev.kernel_info(k)["steady_us"] / 1e3))  # one minute: ~65 cycles
    st = dev.sustained_truth_of_last_run()["total"]
    assert st["cycles"] >= 40 and st["power_mw"] == pytest.approx(H200.cap_target_mw, rel=0.01)


def test_light_kernel_has_no_cycle() -> None:
    dev = SimulatedGPU(SimConfig(preset="h200"), seed=2)
    k = dev.prepare(GemvKernel(m=8192, k=8192))
    assert not dev.kernel_info(k)["heavy"]
    dev.run_unstamped(k, 20_000)
    st = dev.sustained_truth_of_last_run()["total"]
    assert st["cycles"] == 0 and st["power_mw"] < H200.cap_target_mw


def test_stamps_cost_gpu_time_and_unstamped_runs_do_not_pay_it() -> None:
    cfg = SimConfig(preset="h200", overrides=SimOverrides(exec_jitter_pct=0.0, launch_gap_us=2.0))
    dev = SimulatedGPU(cfg, seed=5)
    k = dev.prepare(GemmKernel(m=1024, n=1024, k=1024))
    dev.sleep_ns(100 * MS)
    stamped = dev.execute([(k, 2000)])
    cyc_stamped = float(np.diff(stamped.gpu_start_ns).mean())
    dev.sleep_ns(100 * MS)
    one = dev.run_unstamped(k, 2000)
    cyc_unstamped = float((one.gpu_end_ns[0] - one.gpu_start_ns[0]) / 2000)
    extra = cyc_stamped - cyc_unstamped
    # the preset's overhead per stamped execution (1.6 us), up to the gaps' lognormal spread
    assert extra == pytest.approx(H200.stamp_overhead_ns, rel=0.25)
    truth = dev.sustained_truth_of_last_run()["total"]
    assert truth["cycle_ns"] == pytest.approx(cyc_unstamped, rel=0.01)


def test_a_kernel_below_the_cap_warms_and_the_truth_is_over_the_runs_second_half() -> None:
    dev = SimulatedGPU(SimConfig(preset="h200", overrides=SimOverrides(thermal_rise_pct=3.0)), seed=4)
    k = dev.prepare(GemvKernel(m=8192, k=8192))
    dev.start_sampling()
    t0 = dev.host_time_ns()
    n = int(6e9 / dev.kernel_info(k)["steady_us"] / 1e3)
    dev.run_unstamped(k, n)
    r = dev.drain_reading_truth()
    tot = (r.channel == "total") & (r.t_ns > t0 + 200 * MS)
    w = _block_means_w(r.t_ns[tot], r.power_mw[tot], t0, 1_000 * MS)
    assert w[-1] > w[0] * 1.01  # ~+2 % of the excess power from 0.2 s to 6 s (2 s time constant)
    st = dev.sustained_truth_of_last_run()["total"]
    assert w[2] / 1e0 < st["power_mw"] / 1e3 < w[-1] * 1.001  # the second half's mean: between mid-run and the end
    cold = SimulatedGPU(SimConfig(preset="h200", overrides=SimOverrides(thermal_rise_pct=0.0)), seed=4)
    kc = cold.prepare(GemvKernel(m=8192, k=8192))
    cold.run_unstamped(kc, n)
    assert cold.sustained_truth_of_last_run()["total"]["power_mw"] < st["power_mw"]
