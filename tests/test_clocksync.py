"""Clock sync: known offset and drift recovered from reads with heavy-tailed latencies."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fingrav.clocksync import ClockFit, fit_clock
from fingrav.device.base import ClockReads
from fingrav.errors import DataError

HOST_EPOCH = 1_764_400_000_000_000_000  # ns, a 2025-ish wall clock
GPU_EPOCH = HOST_EPOCH - 163_000  # GPU clock epoch near the host one (globaltimer-like)


def synth_reads(
    offset_ns: float,
    drift: float,
    rng: np.random.Generator,
    bursts: int = 10,
    per_burst: int = 50,
    span_s: float = 15.0,
    slow: int = 0,
) -> tuple[ClockReads, int]:
    """Bursts of reads: GPU stamp taken `a` after host_before, host_after `b` after the stamp;
    a, b = 5 us + heavy (Pareto) tails; `slow` reads get an extra ms on one side only.
    True host time of a GPU stamp g: g + offset + drift * (g - GPU_EPOCH). Returns (reads, g0)."""
    hb, gg, ha = [], [], []
    for i in range(bursts):
        t = HOST_EPOCH + int(i * span_s * 1e9 / max(bursts - 1, 1))
        for _ in range(per_burst):
            a = 5_000 + rng.pareto(1.5) * 2_000
            b = 5_000 + rng.pareto(1.5) * 2_000
            host_stamp = t + a
            # invert host = g + off + drift (g - g0) for g (float is fine at this level: g0-relative)
            g_rel = (host_stamp - GPU_EPOCH - offset_ns) / (1 + drift)
            g = GPU_EPOCH + int(g_rel) // 32 * 32  # 32 ns ticks
            hb.append(t)
            gg.append(g)
            ha.append(int(host_stamp + b))
            t = int(host_stamp + b + rng.uniform(1_000, 20_000))
    hb_a, g_a, ha_a = (np.array(v, dtype=np.int64) for v in (hb, gg, ha))
    if slow:
        idx = rng.choice(len(hb_a), size=slow, replace=False)
        hb_a[idx] -= 1_000_000  # host_before much earlier: the launch took a ms
    return ClockReads(hb_a, g_a, ha_a), GPU_EPOCH


def true_offset_at(fit: ClockFit, offset_ns: float, drift: float, g0: int) -> float:
    return offset_ns + drift * (fit.gpu_ref_ns - g0)


@pytest.mark.parametrize("drift_ppm", [-50.0, 0.0, 37.0, 50.0])
def test_offset_and_drift_recovered(drift_ppm: float) -> None:
    rng = np.random.default_rng(int(drift_ppm) + 100)
    offset = 163_250.0 + drift_ppm * 1000  # hundreds of us
    reads, g0 = synth_reads(offset, drift_ppm * 1e-6, rng)
    fit = fit_clock(reads)
    assert abs(fit.offset_ns - true_offset_at(fit, offset, drift_ppm * 1e-6, g0)) < 1_000
    assert abs(fit.drift_ppm - drift_ppm) < 1.0
    assert fit.residual_ns < 2_000
    assert fit.n_pairs == 500 and 4 <= fit.n_kept <= 500
    assert fit.round_trip_min_ns >= 10_000 and fit.round_trip_median_ns > fit.round_trip_min_ns
    # mapping agrees with the truth over the whole span (within ~1 us)
    g = reads.gpu_ns
    truth = g + np.rint(offset + drift_ppm * 1e-6 * (g - g0)).astype(np.int64)
    assert np.max(np.abs(fit.gpu_to_host(g) - truth)) < 1_500


def test_robust_to_slow_reads() -> None:
    rng = np.random.default_rng(7)
    reads, g0 = synth_reads(-420_000.0, 20e-6, rng, slow=40)
    fit = fit_clock(reads)
    assert abs(fit.offset_ns - true_offset_at(fit, -420_000.0, 20e-6, g0)) < 1_000
    assert abs(fit.drift_ppm - 20.0) < 1.0


def test_single_burst_and_few_reads() -> None:
    rng = np.random.default_rng(3)
    reads, g0 = synth_reads(100_000.0, 0.0, rng, bursts=1, per_burst=8)
    fit = fit_clock(reads)
    assert abs(fit.offset_ns - 100_000.0) < 3_000
    assert fit.drift == 0.0  # one burst cannot constrain the drift
    with pytest.raises(DataError):
        fit_clock(ClockReads(reads.host_before_ns[:3], reads.gpu_ns[:3], reads.host_after_ns[:3]))
    with pytest.raises(DataError):
        fit_clock(ClockReads(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)))


def test_mapping_round_trip_and_dict() -> None:
    fit = ClockFit(
        offset_ns=163_123.4,
        gpu_ref_ns=GPU_EPOCH + 7_000_000_000,
        drift=-43.2e-6,
        residual_ns=350.0,
        n_pairs=500,
        n_kept=100,
        round_trip_min_ns=12_400.0,
        round_trip_median_ns=15_000.0,
    )
    g = GPU_EPOCH + np.array([0, 1, 5_000_000_000, 14_999_999_999], dtype=np.int64)
    h = fit.gpu_to_host(g)
    assert h.dtype == np.int64
    expect = [int(x) + round(163_123.4 - 43.2e-6 * (int(x) - fit.gpu_ref_ns)) for x in g]
    assert h.tolist() == expect
    assert np.max(np.abs(fit.host_to_gpu(h) - g)) <= 1
    d = json.loads(json.dumps(fit.to_dict()))
    assert d["drift_ppm"] == pytest.approx(-43.2)
    assert ClockFit.from_dict(d) == fit
    assert ClockFit.from_dict({**d, "valid": True}) == fit
    d2 = {k: v for k, v in d.items() if k != "drift"}
    assert ClockFit.from_dict(d2).drift == pytest.approx(fit.drift)
    with pytest.raises(DataError):
        ClockFit.from_dict({"drift": 0.0})
