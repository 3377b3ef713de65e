"""The SSE runs' residuals (issue 22): what scatters an SSE run's readings from one run to the next, on a dataset's
replay (real GPU) or a simulated sweep.

For each scenario: the joint estimator's fit (`fingrav.analysis.kernel_power`, smooth-burst prior, at the grid
times; SSE runs only) and its residuals r; per sample the fitted excess over idle (the level) and the response's
slope. Prints r's rms, the per-run gain (r regressed on the level within each run) against what the noise alone
gives, and how much of r a per-run gain, a per-run time shift and both leave; then r² regressed on level² and slope²
over all samples (a gain and a timing scatter per sample, root-mean-square). On an H200 (results/h200-sse): timing
0.40-0.72 ms per sample, gain ~0; experiments/RESULTS.md, stop 31.

    python experiments/sse_residuals.py results/h200-sse-replay gemm-12k-16k-8k prefill-70b-10k
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

import fingrav.analysis.differentiate as differentiate_analysis
from fingrav.analysis import kernel_power as kp
from fingrav.config import AnalysisConfig
from fingrav.layout import SweepLayout
from fingrav.stages import differentiate

#: the slope's finite difference (ms)
STEP_MS = 0.5


def sse_frame(root: Path, scenario: str) -> tuple[pl.DataFrame, Any]:
    """The SSE's fit frame and sensor as the differentiate stage builds them (`target_samples` at the grid times),
    SSE runs only (no base runs)."""
    seen: dict[str, Any] = {}
    estimate = kp.estimate_kernel_power

    def spy(frame: pl.DataFrame, sensor: Any, *args: Any, **kw: Any) -> Any:
        if args[3] == "sse":  # target
            seen["frame"], seen["sensor"] = frame, sensor
        return estimate(frame, sensor, *args, **kw)

    differentiate_analysis.estimate_kernel_power = spy  # type: ignore[assignment]
    try:
        differentiate.run(SweepLayout(root), scenario, 0, AnalysisConfig(), 50.0, (root / "truth").exists())
    finally:
        differentiate_analysis.estimate_kernel_power = estimate  # type: ignore[assignment]
    frame = seen["frame"]
    return frame.filter(pl.col("sse_run") & ~pl.col("base_run")), seen["sensor"]


def residuals(frame: pl.DataFrame, sensor: Any) -> dict[str, float]:
    """The module docstring's figures of one scenario (W, ms, fractions)."""
    t = frame["t_ns"].to_numpy().astype(float)
    y = frame["power_mw"].to_numpy().astype(float)
    runs = frame["run"].to_numpy()
    pieces = kp._role_pieces(frame, sensor)
    segs = kp._joint_segments(frame, pieces, kp._post_ns(sensor))
    w, lag = float(sensor.window_ns), float(sensor.lag_ns)
    x = kp._design(t, segs, w, lag)
    theta = kp._solve(x.T @ x, x.T @ y, kp._penalty(pieces, sensor))
    fit = x @ theta
    r, level = y - fit, fit - theta[0]
    slope = (kp._design(t + STEP_MS * 1e6, segs, w, lag) @ theta - fit) / STEP_MS  # mW per ms
    noise = float(sensor.noise_mw or 1.0)
    gains, floor = [], []
    for run in np.unique(runs):
        m = runs == run
        ss = float((level[m] ** 2).sum())
        if ss > 20_000.0**2:
            gains.append(float((r[m] * level[m]).sum()) / ss)
            floor.append(noise / math.sqrt(ss))

    def left(cols: list[np.ndarray]) -> float:
        tot = n = 0.0
        for run in np.unique(runs):
            m = runs == run
            a = np.column_stack([c[m] for c in cols])
            if a.shape[0] > a.shape[1]:
                coef = np.linalg.lstsq(a, r[m], rcond=None)[0]
                tot += float(((r[m] - a @ coef) ** 2).sum())
                n += m.sum()
        return math.sqrt(tot / n) / 1e3 if n else math.nan

    c = np.linalg.lstsq(np.column_stack([np.ones_like(r), level**2, slope**2]), r**2, rcond=None)[0]
    root = lambda v: math.copysign(math.sqrt(abs(v)), v)  # noqa: E731
    return {
        "runs": float(np.unique(runs).size),
        "rms_w": float(np.sqrt(np.mean(r**2))) / 1e3,
        "gain_sd": float(np.std(gains)),
        "gain_sd_noise_alone": float(np.sqrt(np.mean(np.square(floor)))),
        "left_gain_w": left([level]),
        "left_shift_w": left([slope]),
        "left_both_w": left([level, slope]),
        "gain_per_sample": root(float(c[1])),
        "timing_per_sample_ms": root(float(c[2])),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a sweep folder with raw data and binned runs (a replay, a sim sweep)")
    ap.add_argument("scenarios", nargs="+")
    args = ap.parse_args(argv)
    for sc in args.scenarios:
        out = residuals(*sse_frame(args.results, sc))
        print(f"{args.results.name}/{sc}: " + ", ".join(f"{k} {v:.3g}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
