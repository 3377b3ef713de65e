"""The simulator's truth is time-weighted and agrees with a direct integral of its own power trace."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.config import GemmKernel, GemvKernel, SimConfig, SimOverrides
from fingrav.device.sim import SimulatedGPU


@pytest.mark.parametrize(
    ("preset", "kernel", "gap_us"),
    [
        ("h200", GemmKernel(m=2048, n=2048, k=2048), 30.0),
        ("mi300x", GemvKernel(m=4096, k=4096), 80.0),
        ("h200", GemmKernel(m=8192, n=8192, k=8192), 5.0),
    ],
)
def test_truth_is_the_integral_of_the_true_power(preset: str, kernel: object, gap_us: float) -> None:
    dev = SimulatedGPU(SimConfig(preset=preset, overrides=SimOverrides(launch_gap_us=gap_us)), seed=7)
    k = dev.prepare(kernel)
    dev.sleep_ns(50_000_000)
    dev.execute([(k, 40)])
    truth = dev.ground_truth_of_last_execute()
    assert truth is not None
    for ch, d in truth.items():
        start = np.asarray(d["start_host_ns"], np.int64)
        cyc = np.asarray(d["cycle_ns"])
        assert np.array_equal(np.diff(start), cyc[:-1])  # a cycle runs to the next start
        assert cyc.std() > 0  # launch gaps vary: the case where unweighted and weighted means differ
        for i in range(len(start) - 1):
            e = dev.true_energy_mj(int(start[i]), int(start[i + 1]))[ch]
            assert d["cycle_energy_mj"][i] == pytest.approx(e, rel=1e-9)
            offs = np.round(np.linspace(0, start[i + 1] - start[i], 20001)).astype(np.int64)  # epoch ns: int math
            p = dev.true_power_mw(start[i] + offs)[ch]
            integral = float(np.sum(0.5 * (p[1:] + p[:-1]) * np.diff(offs))) * 1e-9  # mW x ns -> mJ
            assert d["cycle_energy_mj"][i] == pytest.approx(integral, rel=1e-3)
            assert d["power_mw"][i] == pytest.approx(d["cycle_energy_mj"][i] / cyc[i] * 1e9, rel=1e-12)
        # the time-weighted mean (what the analysis' truth uses) vs the unweighted mean of cycle powers
        weighted = d["cycle_energy_mj"][:-1].sum() / cyc[:-1].sum() * 1e9
        e_all = dev.true_energy_mj(int(start[0]), int(start[-1]))[ch]
        assert weighted == pytest.approx(e_all / (start[-1] - start[0]) * 1e9, rel=1e-9)


@pytest.mark.parametrize("preset", ["h200", "mi300x"])
def test_reading_truth_is_the_noise_free_sensor_at_every_sample(preset: str) -> None:
    """The truth of a sensor *reading*: for every sample the simulator returns, the same sensor without noise
    or quantization (`drain_reading_truth`), equal to `sensor_response_mw` at the sample's stamp."""
    dev = SimulatedGPU(SimConfig(preset=preset), seed=3)
    k = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
    dev.start_sampling()
    dev.sleep_ns(30_000_000)
    dev.execute([(k, 2000)])
    dev.sleep_ns(5_000_000)
    dev._collect()  # compute the samples due so far, before a drain forgets the history they need
    pending = np.concatenate([ps.t_ns for ps in dev._readings_truth])
    resp_all = dev.sensor_response_mw(pending)
    samples = dev.drain_samples()
    truth = dev.drain_reading_truth()
    assert len(samples.t_ns) > 10 and np.array_equal(np.sort(pending), np.sort(truth.t_ns))
    assert np.array_equal(samples.t_ns, truth.t_ns) and np.array_equal(samples.channel, truth.channel)
    for ch in np.unique(truth.channel):
        m = truth.channel == ch
        t = truth.t_ns[m]
        order = {int(v): i for i, v in enumerate(pending)}
        resp = resp_all[str(ch)][[order[int(v)] for v in t]]
        # stamps are floored to the sensor's resolution: the response at the stamp differs a little
        assert np.median(np.abs(truth.power_mw[m] - resp)) < 0.01 * np.median(resp)
        noise = samples.power_mw[m] - truth.power_mw[m]
        assert np.abs(noise).max() > 0  # the samples carry noise / quantization, the truth does not
    assert len(dev.drain_reading_truth().t_ns) == 0  # drained once
