"""experiments/base_runs_matrix.py: its draws are valid sweeps on the h200 preset with a slow sensor in the stated
ranges (late stamps drawn for that sensor's own period) and base runs beside the SSE runs; its summary counts per
execution-time band."""

from __future__ import annotations

import numpy as np

from fingrav.config import parse_config
from fingrav.testing.experiments import load_experiment


def test_draws_are_slow_sensors_with_base_runs() -> None:
    bm = load_experiment("base_runs_matrix")
    rng = np.random.default_rng(3)
    for i in range(12):
        cfg = bm.draw(rng, i, 3)
        parsed = parse_config(cfg)
        ov = cfg["device"]["sim"]["overrides"]
        assert parsed.device.sim.preset == "h200" and len(parsed.scenarios) == 3
        period = ov["sensor_period_ms"]
        assert 8.0 <= period <= 40.0 and 3.0 <= ov["sensor_lag_ms"] <= 20.0
        assert 0 <= ov["sensor_acquire_jitter_ms"] <= 0.05 * period + 1e-3
        if "sensor_late_ms" in ov:  # drawn for this period: 2.5-25 % of it
            assert 0.025 * period - 1e-3 <= ov["sensor_late_ms"] <= 0.25 * period + 1e-3
        rp = cfg["run_policy"]
        assert rp["sse"] == "always" and rp["sse_runs"] == 100 and rp["sse_base_runs"] == 100


def test_summary_bands() -> None:
    bm = load_experiment("base_runs_matrix")

    def row(ms: float, v: float, half: float, truth: float) -> dict:
        return {
            "exec_time_us": ms * 1e3,
            "sse_kernel_power_w": v,
            "sse_kernel_power_ci_low_w": v - half,
            "sse_kernel_power_ci_high_w": v + half,
            "truth_sse_kernel_power_w": truth,
        }

    rows = [row(0.5, 900.0, 80.0, 850.0), row(1.5, 900.0, 30.0, 880.0), row(4.0, 900.0, 10.0, 930.0)]
    rows.append({"exec_time_us": 3000.0, "sse_kernel_power_w": None})
    s = bm.summarize(rows)
    assert s["all"]["scenarios"] == 4 and s["all"]["reported"] == 3 and s["all"]["within_5pct"] == 2
    assert s["all"]["ci_coverage"] == round(2 / 3, 3) and s["3.5-6 ms"]["ci_coverage"] == 0.0
    assert s["0-1 ms"]["within_5pct"] == 0 and s["2-3.5 ms"]["reported"] == 0
