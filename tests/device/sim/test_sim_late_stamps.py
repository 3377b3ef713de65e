"""Late-stamped samples of the simulated power sensor (`fingrav.device.sim.presets.SensorSpec`: late_every,
late_ns, late_spread_ns, late_far_share): as on the H200's NVML sample buffer, a sample is read on its regular grid
and only its timestamp comes late."""

from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest

from fingrav.config import GemmKernel, SimConfig, SimOverrides
from fingrav.device.sim import SimulatedGPU, presets
from fingrav.device.sim.presets import H200, MI300X, SensorSpec
from fingrav.device.sim.sensor import LATE_FAR_PERIODS, SensorStream
from fingrav.device.sim.timeline import PowerTimeline

MS = 1_000_000.0
HOUR_NS = 3600e9
H200_TOTAL = H200.sensors[0]
NO_LATE = {"late_every": 0, "late_ns": 0.0, "late_spread_ns": 0.0, "late_far_share": 0.0}


def _stream(spec: SensorSpec, seed: int = 0, rng_late: np.random.Generator | None = None) -> SensorStream:
    rng_late = np.random.default_rng(seed + 2) if rng_late is None else rng_late
    grid, noise = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    return SensorStream(spec, [0], np.array([100_000.0]), grid, noise, rng_late)


def _grid_and_stamps(spec: SensorSpec, span_ns: float = HOUR_NS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    s = _stream(spec, seed)
    s.start(0.0)
    return s.sample_times(span_ns)


def test_h200_stamps_are_late_like_the_hardware() -> None:
    """The preset's stream: about one sample in five late, 5 apart in the mode, ~1 % of all beyond 6 ms, every
    stamp at or after its grid time and the stamps strictly increasing."""
    g, st = _grid_and_stamps(H200_TOTAL)
    late = st - g
    assert g.size > 170_000
    assert np.all(late >= 0) and np.all(np.diff(st) > 0)
    is_late = late > 0
    # one in five, less the normal cut at 0 (3.1 % of them), plus the far ones among the other four
    assert is_late.mean() == pytest.approx(0.2 * (1 - 0.031) + 0.8 * 0.007, abs=0.004)
    gaps = np.diff(np.flatnonzero(is_late))
    assert np.bincount(gaps).argmax() == 5 and np.mean(gaps == 5) > 0.8
    # beyond 6 ms: the far ones (0.7 %) and the normal's tail (1.6 % of one in five)
    assert np.mean(late > 6 * MS) == pytest.approx(0.007 + 0.2 * 0.0165, abs=0.0012)
    assert late.max() <= LATE_FAR_PERIODS[1] * H200_TOTAL.period_ns and late.max() > 17 * MS
    # the periodic ones (the most common residue of the late samples' index): 0.88 / 2.8 / 4.72 ms + the far ones
    k = np.flatnonzero(is_late)
    phase = np.bincount(k % 5).argmax()
    periodic = late[phase::5]
    q10, q50, q90 = np.percentile(periodic, [10, 50, 90]) / MS
    assert q10 == pytest.approx(1.0, abs=0.15) and q50 == pytest.approx(2.8, abs=0.05)
    assert q90 == pytest.approx(4.8, abs=0.15)
    # the grid itself is regular: 0.1 ms interval jitter
    assert np.std(np.diff(g)) / MS == pytest.approx(0.1, abs=0.005)


def test_lateness_follows_the_spec() -> None:
    """A normal cut at 0 with median late_ns and sd late_spread_ns on every late_every-th sample, exactly; far-late
    stamps uniform over LATE_FAR_PERIODS of the period on a late_far_share of all samples."""
    spec = dataclasses.replace(H200_TOTAL, late_every=4, late_ns=3.0 * MS, late_spread_ns=1.0 * MS, late_far_share=0)
    g, st = _grid_and_stamps(spec)
    late = st - g
    k = np.flatnonzero(late > 0)
    assert np.unique(k % 4).size == 1  # every 4th, one phase
    assert k.size / g.size == pytest.approx(0.25 * (1 - 0.00135), abs=0.002)  # less the cut at 0: P(z < -3)
    q10, q50, q90 = np.percentile(late[k], [10, 50, 90]) / MS
    assert q50 == pytest.approx(3.0, abs=0.03)
    assert q10 == pytest.approx(3.0 - 1.2816, abs=0.04) and q90 == pytest.approx(3.0 + 1.2816, abs=0.04)

    far = dataclasses.replace(H200_TOTAL, **(NO_LATE | {"late_far_share": 0.05}))
    g, st = _grid_and_stamps(far)
    late = st - g
    assert np.mean(late > 0) == pytest.approx(0.05, abs=0.003)
    lo, hi = (x * far.period_ns for x in LATE_FAR_PERIODS)
    f = late[late > 0]
    assert f.min() >= lo and f.max() <= hi and np.median(f) == pytest.approx((lo + hi) / 2, rel=0.03)


def test_late_stamp_never_passes_the_next_sample() -> None:
    """A lateness longer than the period is cut to one stamp step before the next sample's grid time; the integer
    stamps of the device stay strictly increasing."""
    spec = dataclasses.replace(H200_TOTAL, period_ns=5.0 * MS, late_every=2, late_ns=8.0 * MS, late_spread_ns=MS)
    g, st = _grid_and_stamps(spec, 600e9)
    assert np.all(np.diff(st) > 0)
    cut = st[:-1] == g[1:] - spec.stamp_resolution_ns
    assert cut.mean() > 0.4  # most of the late ones (8 ms late on a 5 ms grid)
    ov = SimOverrides(sensor_period_ms=5.0)
    dev = SimulatedGPU(SimConfig(preset="h200", overrides=ov), seed=4)
    dev.start_sampling()
    dev.sleep_ns(int(20_000 * MS))
    s = dev.stop_sampling()
    for ch in dev.channels:
        t = s.t_ns[s.channel == ch]
        assert t.size > 100 and np.all(np.diff(t) > 0)


def _square_timeline(span_ns: float) -> PowerTimeline:
    """Excess power 0 / 300 W, switching every 37 ms (a reading that changes from one sample to the next)."""
    tl = PowerTimeline(1)
    t0 = np.arange(0.0, span_ns, 37 * MS)
    p0 = np.where(np.arange(t0.size) % 2 == 1, 300_000.0, 0.0)
    p0[-1] = 0.0
    tl.append(t0, p0[None, :], np.zeros((1, t0.size)))
    return tl


def test_values_are_read_at_the_grid_times() -> None:
    """A noiseless sensor: each late-stamped sample's value is the noise-free reading at its grid time (that of the
    same stream without late stamps), not at its stamp; the grid does not move."""
    quiet = {"noise_mw": 0.0, "quantization_mw": 0.0, "acquire_jitter_ns": 0.0}
    late_spec = dataclasses.replace(H200_TOTAL, **quiet)
    on_time_spec = dataclasses.replace(late_spec, **NO_LATE)
    tl = _square_timeline(10_000 * MS)
    out = {}
    for name, spec in (("late", late_spec), ("on_time", on_time_spec)):
        s = _stream(spec, seed=7)
        s.start(0.0)
        parts = [s.collect(now, tl, visible=True) for now in np.arange(50.0, 10_000.0, 13.0) * MS]
        out[name] = tuple(np.concatenate([p[i] for p in parts], axis=-1) for i in range(3))
    (st, vals, clean), (st0, vals0, _) = out["late"], out["on_time"]
    n = min(st.size, st0.size)
    assert n > 450 and abs(st.size - st0.size) <= 1  # at most the last one is not stamped yet
    assert np.array_equal(vals[:, :n], clean[:, :n])  # noiseless
    np.testing.assert_allclose(vals[:, :n], vals0[:, :n], rtol=1e-12, atol=1e-6)
    late = st[:n] - st0[:n]
    assert np.all(late >= 0) and np.mean(late > 0) > 0.15 and np.all(np.diff(st) > 0)
    # the noise-free reading at the (us-floored) stamps differs where the stamp is late and the power moves
    at_stamp = _stream(on_time_spec).true_response(st[:n].astype(float), tl)[0]
    at_grid = _stream(on_time_spec).true_response(st0[:n].astype(float), tl)[0]
    moved = (late > MS) & (np.abs(np.diff(at_grid, append=at_grid[-1])) > 10_000)
    assert moved.sum() > 10 and np.all(np.abs(at_stamp[moved] - vals[0, :n][moved]) > 100)


def test_a_late_sample_becomes_visible_at_its_stamp() -> None:
    """The host sees a sample `visible_after_ns` after its stamp, a late one included: collecting in steps never
    returns a sample stamped after the cutoff, and none is lost or drawn twice."""
    spec = dataclasses.replace(H200_TOTAL, late_far_share=0.05)
    s = _stream(spec, seed=3)
    s.start(0.0)
    tl = PowerTimeline(1)
    seen = []
    nows = np.arange(1.0, 5_000.0, 0.7) * MS
    for now in nows:
        st, _, _ = s.collect(float(now), tl, visible=True)
        assert np.all(st <= now - spec.visible_after_ns)
        seen.append(st)
    st = np.concatenate(seen)
    whole = _stream(spec, seed=3)
    whole.start(0.0)
    st_whole, _, _ = whole.collect(float(nows[-1]) - spec.visible_after_ns, tl)
    n = st_whole.size
    assert n > 200 and np.array_equal(st[:n], st_whole) and st.size - n <= 1


def test_defaults_draw_nothing_and_leave_the_stream_as_it_was() -> None:
    """Without late stamps the late generator is never drawn from, and the late stamps of another stream leave its
    grid and values as they were (the lateness has a generator of its own)."""
    spec = dataclasses.replace(H200_TOTAL, **NO_LATE)
    rng_late = np.random.default_rng(99)
    state = rng_late.bit_generator.state
    s = _stream(spec, rng_late=rng_late)
    s.start(0.0)
    g, st = s.sample_times(600e9)
    assert st is g and rng_late.bit_generator.state == state
    g_late, _ = _grid_and_stamps(H200_TOTAL, 600e9)
    assert np.array_equal(g, g_late)


def _idle_digest(preset: str, monkeypatch: pytest.MonkeyPatch | None = None) -> str:
    """Digest of the stamps and values of 3 s of idle sampling (no kernel: idle + noise, quantized, no sums of
    the true-power timeline), drained once and at the stop."""
    dev = SimulatedGPU(SimConfig(preset=preset), seed=5)
    dev.start_sampling()
    dev.sleep_ns(int(3000 * MS))
    h = hashlib.sha256()
    for s in (dev.drain_samples(), dev.stop_sampling()):
        h.update(np.ascontiguousarray(s.t_ns).tobytes())
        h.update(np.ascontiguousarray(s.power_mw).tobytes())
    return h.hexdigest()[:16]


def test_defaults_are_bit_identical_to_before_late_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pinned: the sample stream of the mi300x preset, and of the h200 preset with its sensor as it was before late
    stamps (2.34 ms interval jitter, none late, none of the later changes to its sensor), are bit for bit those of the
    code before late stamps existed."""
    assert all(getattr(s, k) == v for s in MI300X.sensors for k, v in NO_LATE.items())
    assert _idle_digest("mi300x") == "59a53272d96d0002"
    # the sensor of then: a 4.5 ms window, 12 ms lag, 2.8 ms dead time, 3 W of noise, no acquisition jitter
    old_total = dataclasses.replace(
        H200_TOTAL,
        jitter_ns=2.34 * MS,
        window_ns=4.5 * MS,
        lag_ns=12.0 * MS,
        delay_ns=2.8 * MS,
        noise_mw=3_000.0,
        acquire_jitter_ns=0.0,
        **NO_LATE,
    )
    monkeypatch.setitem(presets.PRESETS, "h200", dataclasses.replace(H200, sensors=(old_total, *H200.sensors[1:])))
    assert _idle_digest("h200") == "982b5e7157905db3"


def test_device_samples_with_and_without_late_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated H200 under load: turning its late stamps off moves no value and no on-time stamp."""
    ov = SimOverrides(sensor_noise_mw=0.0, sensor_quantization_mw=0.0)

    def session() -> tuple[np.ndarray, np.ndarray]:
        dev = SimulatedGPU(SimConfig(preset="h200", overrides=ov), seed=2)
        k = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
        dev.start_sampling()
        parts = []
        for _ in range(6):
            dev.execute([(k, 300)])
            parts.append(dev.drain_samples())
            dev.sleep_ns(int(60 * MS))
        parts.append(dev.stop_sampling())
        tot = [(p.t_ns[p.channel == "total"], p.power_mw[p.channel == "total"]) for p in parts]
        return np.concatenate([t for t, _ in tot]), np.concatenate([v for _, v in tot])

    t_late, v_late = session()
    on_time = dataclasses.replace(H200_TOTAL, **NO_LATE)
    monkeypatch.setitem(presets.PRESETS, "h200", dataclasses.replace(H200, sensors=(on_time, *H200.sensors[1:])))
    t0, v0 = session()
    n = min(t_late.size, t0.size)
    assert n > 25 and abs(t_late.size - t0.size) <= 1
    np.testing.assert_allclose(v_late[:n], v0[:n], rtol=1e-12)
    late = t_late[:n] - t0[:n]
    assert np.all(late >= 0) and 0 < np.mean(late > 0) < 0.4 and np.all(np.diff(t_late) > 0)
    assert np.ptp(v0) > 100_000  # the load shows


def test_overrides_set_the_late_stamps_on_every_stream() -> None:
    """`sim.overrides` sensor_late_every / _ms / _spread_ms / _far_share (`SENSOR_LATE_OVERRIDES`) set every stream's
    late stamps; `preset_summary` lists them where a stream has them (a stream without keeps its old summary)."""
    from types import SimpleNamespace

    late = {"sensor_late_every": 3, "sensor_late_ms": 1.5, "sensor_late_spread_ms": 0.5, "sensor_late_far_share": 0.02}
    ov = SimpleNamespace(**(SimOverrides().model_dump() | late))  # whether or not the config defines them yet
    p = presets.resolve_preset(SimpleNamespace(preset="mi300x", overrides=ov))
    assert [(s.late_every, s.late_ns, s.late_spread_ns, s.late_far_share) for s in p.sensors] == [
        (3, 1.5 * MS, 0.5 * MS, 0.02)
    ]
    assert presets.preset_summary(p)["sensors"]["smu"]["late_stamps"] == {
        "every": 3,
        "median_ms": 1.5,
        "spread_ms": 0.5,
        "far_share": 0.02,
    }
    assert "late_stamps" not in presets.preset_summary(MI300X)["sensors"]["smu"]
    h = presets.preset_summary(H200)["sensors"]
    assert h["nvml_total"]["late_stamps"] == {"every": 5, "median_ms": 2.8, "spread_ms": 1.5, "far_share": 0.007}
    assert h["nvml_total"]["period_jitter_ms"] == pytest.approx(0.1) and "late_stamps" not in h["nvml_memory"]


def test_the_lateness_scales_with_an_overridden_period() -> None:
    """A sensor's late stamps are a share of its grid: overriding the h200 preset's period scales its lateness (and
    the far-late stamps, in periods), unless the lateness is overridden too."""
    from fingrav.config import SimConfig, SimOverrides
    from fingrav.device.sim.presets import PRESETS, resolve_preset

    base = PRESETS["h200"].sensors[0]
    fast = resolve_preset(SimConfig(preset="h200", overrides=SimOverrides(sensor_period_ms=1.0))).sensors[0]
    assert fast.late_ns == pytest.approx(base.late_ns / 20.0) and fast.late_spread_ns == pytest.approx(
        base.late_spread_ns / 20.0
    )
    own_ov = SimOverrides(sensor_period_ms=1.0, sensor_late_ms=0.3)
    own = resolve_preset(SimConfig(preset="h200", overrides=own_ov)).sensors[0]
    assert own.late_ns == pytest.approx(0.3 * MS)
