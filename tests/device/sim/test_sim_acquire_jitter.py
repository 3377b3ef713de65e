"""Acquisition jitter of the simulated power sensor (`fingrav.device.sim.presets.SensorSpec.acquire_jitter_ns`): as
on the H200's NVML sample buffer, each sample reads the sensor's input a little before or after its grid time while
its stamp stays; the truth of a reading is the noise-free reading averaged over the jitter (what the readings average
to), which is the reading at the grid time wherever the response is straight over the jitter."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

from fingrav.config import SimConfig, SimOverrides
from fingrav.device.sim import SimulatedGPU, presets
from fingrav.device.sim.presets import H200, MI300X, SensorSpec
from fingrav.device.sim.sensor import ACQUIRE_CUT_SD, TRUTH_JITTER_DRAWS, SensorStream
from fingrav.device.sim.timeline import PowerTimeline

MS = 1_000_000.0
H200_TOTAL = H200.sensors[0]
QUIET = {"noise_mw": 0.0, "quantization_mw": 0.0}


def _stream(spec: SensorSpec, seed: int = 0, rng_acquire: np.random.Generator | None = None) -> SensorStream:
    grid, noise, late, truth = (np.random.default_rng(seed + k) for k in (0, 1, 2, 4))
    rng_acquire = np.random.default_rng(seed + 3) if rng_acquire is None else rng_acquire
    return SensorStream(spec, [0], np.array([100_000.0]), grid, noise, late, rng_acquire, truth)


def _expected_by_quadrature(
    stream: SensorStream, grid_ns: np.ndarray, tl: PowerTimeline, nodes: int = 801
) -> np.ndarray:
    """The reading averaged over the acquisition jitter by a dense midpoint rule over its density (the normal cut at
    ACQUIRE_CUT_SD sd, offsets past the dead time read at the dead time): the truth, computed apart from the
    stream's stratified draws."""
    sd, delay = stream.spec.acquire_jitter_ns, stream.spec.delay_ns
    edges = np.linspace(-ACQUIRE_CUT_SD, ACQUIRE_CUT_SD, nodes + 1)
    z = 0.5 * (edges[1:] + edges[:-1])
    w = np.exp(-0.5 * z * z)
    w /= w.sum()
    out = np.zeros((1, grid_ns.size))
    for zi, wi in zip(z, w, strict=True):
        out += wi * stream.true_response(grid_ns + min(zi * sd, delay), tl)
    return out


def _ramp_timeline(span_ns: float) -> PowerTimeline:
    """Excess power 0 / 300 W, switching every 37 ms: the reading moves between one sample and the next."""
    tl = PowerTimeline(1)
    t0 = np.arange(0.0, span_ns, 37 * MS)
    p0 = np.where(np.arange(t0.size) % 2 == 1, 300_000.0, 0.0)
    p0[-1] = 0.0
    tl.append(t0, p0[None, :], np.zeros((1, t0.size)))
    return tl


def _collect(spec: SensorSpec, seed: int = 7, span_ms: float = 20_000.0) -> tuple[np.ndarray, ...]:
    tl = _ramp_timeline(span_ms * MS)
    s = _stream(spec, seed)
    s.start(0.0)
    parts = [s.collect(now, tl) for now in np.arange(50.0, span_ms, 13.0) * MS]
    return tuple(np.concatenate([p[i] for p in parts], axis=-1) for i in range(3)) + (tl,)


def test_each_value_is_read_at_its_jittered_time() -> None:
    """A noiseless sensor with jitter: each value is the noise-free reading at some time within the cut of its grid
    time (the one of the same stream without jitter: the grid and the stamps do not move); on the H200's smooth
    response (a 12 ms lag) the truths are the readings at the grid times to within a few mW; where the reading
    moves, the jitter moves the values by about the slope x its sd."""
    spec = dataclasses.replace(H200_TOTAL, late_every=0, late_far_share=0.0, acquire_jitter_ns=0.0, **QUIET)
    jittered = dataclasses.replace(spec, acquire_jitter_ns=0.5 * MS)
    st, vals, clean, tl = _collect(jittered)
    st0, vals0, clean0, _ = _collect(spec)
    n = min(st.size, st0.size)
    assert n > 900 and np.array_equal(st[:n], st0[:n])  # the stamps stay
    grid = st0[:n].astype(float)
    probe = _stream(spec)
    slope = (probe.true_response(grid + 0.05 * MS, tl)[0] - probe.true_response(grid - 0.05 * MS, tl)[0]) / 0.1
    moving = np.abs(slope) > 2_000.0  # mW per ms
    # truth: the average over the jitter, here the grid-time reading but where the response bends within the jitter
    # (a step's corner: ~0.4 sd x the slope's jump of 24 W/ms, ~5 W); the stratified draws scatter by a fraction of
    # slope x sd / draws
    exact = _expected_by_quadrature(_stream(jittered), grid, tl, nodes=201)
    off = np.abs(exact[0] - vals0[0, :n])
    assert np.quantile(off, 0.9) < 300.0 and 1_000.0 < off.max() < 7_000.0
    err = np.abs(clean[0, :n] - exact[0])
    assert np.sqrt(np.mean(err**2)) < 0.05 * np.sqrt(np.mean((slope * 0.5) ** 2)) and err.max() < 3_000.0
    dv = vals[0, :n] - vals0[0, :n]
    assert moving.sum() > 300 and np.all(dv[~moving & (np.abs(slope) < 1.0)] == pytest.approx(0.0, abs=1e-3))
    # the implied time offsets: sd ~0.5 ms, mean ~0, none beyond the cut
    offset_ms = dv[moving] / slope[moving]
    assert np.std(offset_ms) == pytest.approx(0.5, rel=0.12) and abs(np.mean(offset_ms)) < 0.06
    assert np.abs(offset_ms).max() <= ACQUIRE_CUT_SD * 0.5 * 1.15  # the slope is not quite constant over 1.5 ms


def test_jitter_never_reads_past_the_grid_time() -> None:
    """A dead time shorter than the jitter: the offsets are cut at the dead time (no reading of power after the
    sample's grid time)."""
    spec = dataclasses.replace(H200_TOTAL, delay_ns=0.2 * MS, acquire_jitter_ns=0.5 * MS)
    s = _stream(spec)
    j = s.acquire_offsets(100_000)
    assert j.max() == pytest.approx(0.2 * MS) and np.mean(j == 0.2 * MS) == pytest.approx(0.345, abs=0.01)
    assert j.min() >= -ACQUIRE_CUT_SD * 0.5 * MS and np.std(j[j < 0.2 * MS]) > 0.3 * MS


def test_no_jitter_draws_nothing_and_leaves_the_stream_as_it_was() -> None:
    """Without jitter the generator is never drawn from and the values are the truths (noiseless); the jitter of
    another stream leaves its grid, stamps and noise as they were (a generator of its own)."""
    spec = dataclasses.replace(H200_TOTAL, acquire_jitter_ns=0.0, **QUIET)
    rng = np.random.default_rng(5)
    state = rng.bit_generator.state
    s = _stream(spec, rng_acquire=rng)
    s.start(0.0)
    st, vals, clean = s.collect(2_000 * MS, _ramp_timeline(2_000 * MS))
    assert rng.bit_generator.state == state and np.array_equal(vals, clean) and st.size > 90
    noisy = dataclasses.replace(H200_TOTAL, acquire_jitter_ns=0.0)
    pulses = PowerTimeline(1)  # 37 ms at 300 W every 500 ms: the response is back at idle for most of each gap
    starts = np.arange(0.0, 3_000 * MS, 500 * MS)
    pulses.append(np.sort(np.r_[starts, starts + 37 * MS]), np.tile([300_000.0, 0.0], starts.size)[None, :],
                  np.zeros((1, 2 * starts.size)))  # fmt: skip
    a, b = _stream(noisy, seed=3), _stream(dataclasses.replace(noisy, acquire_jitter_ns=0.3 * MS), seed=3)
    a.start(0.0)
    b.start(0.0)
    ra, rb = a.collect(3_000 * MS, pulses), b.collect(3_000 * MS, pulses)
    assert np.array_equal(ra[0], rb[0]) and ra[0].size > 90  # the grid and the stamps
    idle = ra[2][0] == 100_000.0  # the response at idle over the whole jitter: the same values, the same truths
    assert idle.sum() > 60 and np.array_equal(ra[1][:, idle], rb[1][:, idle])
    assert np.array_equal(rb[2][0, idle], ra[2][0, idle])


def test_the_truth_is_the_reading_averaged_over_the_jitter() -> None:
    """A fast sensor (50 us window, no lag) whose jitter (90 us) spans several executions of two kernels alternating
    at 700 and 200 W: a reading at the grid time holds one of them, but what the sensor reads there on average is a
    blend. The truth is that average: it matches a dense quadrature of the jitter's density to within the
    stratified draws' scatter, and the mean of many jittered readings of one grid time converges to it, not to the
    grid-time reading."""
    spec = dataclasses.replace(
        H200_TOTAL, period_ns=3.5 * MS, jitter_ns=0.0, window_ns=0.05 * MS, lag_ns=0.0, delay_ns=3.8 * MS,
        acquire_jitter_ns=0.09 * MS, late_every=0, late_far_share=0.0, **QUIET,
    )  # fmt: skip
    tl = PowerTimeline(1)
    t0 = np.arange(0.0, 3_000 * MS, 0.04 * MS)  # 40 us segments: 30 us at 600 W excess, 10 us at 100 W, ...
    kind = np.arange(t0.size) % 2
    t0 = t0 + np.where(kind == 1, -0.01 * MS, 0.0)  # the second kernel of each pair starts 10 us early: 30 us / 10 us
    p0 = np.where(kind == 0, 600_000.0, 100_000.0)
    p0[-1] = 0.0
    tl.append(t0, p0[None, :], np.zeros((1, t0.size)))
    s = _stream(spec, seed=11)
    s.start(0.0)
    st, vals, clean = s.collect(2_900 * MS, tl)
    grid = st.astype(float)
    assert st.size > 700
    exact = _expected_by_quadrature(_stream(spec, seed=11), grid, tl)
    at_grid = s.true_response(grid, tl)
    # the grid-time reading is one of the kernels or a mix by the phase; the average over 90 us of jitter is the blend
    assert np.std(at_grid[0]) > 50_000.0 and np.std(exact[0]) < 0.3 * np.std(at_grid[0])
    err = clean[0] - exact[0]
    assert abs(err.mean()) < 2_000.0 and np.std(err) < 0.25 * np.std(at_grid[0]) / np.sqrt(TRUTH_JITTER_DRAWS) * 4
    # many jittered readings of the same grid times: their mean is the truth's, not the grid-time reading's
    reps = np.mean([s.true_response(grid + s.acquire_offsets(grid.size), tl)[0] for _ in range(200)], axis=0)
    assert np.abs(reps - exact[0]).mean() < 0.2 * np.abs(at_grid[0] - exact[0]).mean()


def test_h200_preset_has_the_cards_jitter_and_mi300x_none() -> None:
    assert H200_TOTAL.acquire_jitter_ns == pytest.approx(0.5 * MS)
    assert all(s.acquire_jitter_ns == 0 for s in (*MI300X.sensors, *H200.sensors[1:]))
    h = presets.preset_summary(H200)["sensors"]
    assert h["nvml_total"]["acquire_jitter_ms"] == pytest.approx(0.5) and "acquire_jitter_ms" not in h["nvml_memory"]


def test_override_sets_it_and_a_period_override_scales_it() -> None:
    """`sim.overrides.sensor_acquire_jitter_ms` sets every stream's jitter; an overridden period alone scales the
    preset's jitter with it (a share of the grid), as it scales the late stamps."""
    ov = SimpleNamespace(**(SimOverrides().model_dump() | {"sensor_acquire_jitter_ms": 0.25}))
    p = presets.resolve_preset(SimpleNamespace(preset="mi300x", overrides=ov))
    assert [s.acquire_jitter_ns for s in p.sensors] == [0.25 * MS]
    p = presets.resolve_preset(SimConfig(preset="h200", overrides=SimOverrides(sensor_period_ms=5.0)))
    tot = p.sensors[0]
    assert tot.acquire_jitter_ns == pytest.approx(0.125 * MS) and tot.late_ns == pytest.approx(0.7 * MS)
    p = presets.resolve_preset(
        SimConfig(preset="h200", overrides=SimOverrides(sensor_period_ms=5.0, sensor_acquire_jitter_ms=0.4))
    )
    assert p.sensors[0].acquire_jitter_ns == pytest.approx(0.4 * MS) and p.sensors[0].late_ns == pytest.approx(0.7 * MS)


def test_device_readings_scatter_on_the_response_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated H200 under bursts, with and without its jitter (same seed): the stamps and the noise stay, the
    readings on the response's edges move by several W, those on settled idle not at all."""
    from fingrav.config import GemmKernel

    def session() -> tuple[np.ndarray, np.ndarray]:
        dev = SimulatedGPU(SimConfig(preset="h200"), seed=2)
        k = dev.prepare(GemmKernel(m=8192, n=8192, k=8192))
        dev.start_sampling()
        for _ in range(12):
            dev.execute([(k, 4)])
            dev.sleep_ns(int(150 * MS))
        s = dev.stop_sampling()
        tot = s.channel == "total"
        return s.t_ns[tot], s.power_mw[tot]

    t, v = session()
    still = dataclasses.replace(H200_TOTAL, acquire_jitter_ns=0.0)
    monkeypatch.setitem(presets.PRESETS, "h200", dataclasses.replace(H200, sensors=(still, *H200.sensors[1:])))
    t0, v0 = session()
    assert np.array_equal(t, t0) and t.size > 80
    dv = np.abs(v - v0)
    settled = np.abs(v0 - np.median(v0)) < 5_000.0  # idle, far from any burst
    assert settled.sum() > 30 and dv[settled].max() < 2_000.0
    assert np.ptp(v0) > 100_000 and np.sort(dv)[-5:].min() > 3_000.0  # the edges of a ~400 W response
