"""Base-run matrix (issue 22): the SSE's kernel power from SSE runs and base runs (`run_policy.sse_base_runs`) on
simulated H200-like GPUs with randomly drawn slow sensors, every number compared with the simulator's truth.

Each sweep takes the random device of `experiments/fidelity_matrix.py`'s `draw_sweep` (clock offset and drift,
execution jitter, outlier runs, launch gaps, stamp cost, limit cycles, warming, placement, the card's state, late
stamps, drawn again for this period) on the h200 preset, with a slow sensor drawn here: period 8-40 ms (interval
jitter 0-1 %), a first-order lag of 3-20 ms, a window of 0.05-4 ms, a dead time of 0.5-5 ms, noise 0.1-3 W, readings
rounded to 1 mW, 0.25 W or 1 W, acquisition jitter 0-5 % of the period (sd),
and `--scenarios` GEMMs and attentions of 0.5-5 ms, each with 100 SSE runs and 100 base runs (30 SSP runs, no
reference run: only the SSE matters here). Then calibrate -> collect -> bin -> differentiate in process, as the matrix
does. Prints per execution-time band how many SSE kernel powers were reported, how many at <= +-5 %, their CI
coverage and |error| / half-width.

    python experiments/base_runs_matrix.py --sweeps 24 --scenarios 3 --seed 5 --jobs 2 --out /tmp/base-matrix.jsonl

`--repeat SWEEP SCENARIO` runs one drawn sweep's scenario `--repeats` times (seeds 1000 ...; stop 32: `--seed 5
--repeat 16 s1`), whose spread of errors over half-widths tells a calibrated CI (sd 0.51) from a narrow one.
"""

from __future__ import annotations

import argparse
import copy
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from fingrav.testing.experiments import load_experiment

logger = logging.getLogger("base_matrix")

#: GEMMs (m, n, k; bf16) and causal attentions (heads, q = kv length) of ~0.5-5 ms on the simulated H200
SHAPES: tuple[dict[str, Any], ...] = (
    {"kind": "gemm", "m": 8192, "n": 8192, "k": 2048},
    {"kind": "gemm", "m": 8192, "n": 8192, "k": 4096},
    {"kind": "gemm", "m": 4096, "n": 8192, "k": 14336},
    {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192},
    {"kind": "gemm", "m": 8192, "n": 16384, "k": 8192},
    {"kind": "gemm", "m": 12288, "n": 16384, "k": 8192},
    {"kind": "gemm", "m": 16384, "n": 16384, "k": 8192},
    {"kind": "attention", "batch": 1, "heads": 64, "q_len": 4096, "kv_len": 4096, "head_dim": 128, "causal": True},
    {"kind": "attention", "batch": 1, "heads": 64, "q_len": 8192, "kv_len": 8192, "head_dim": 128, "causal": True},
    {"kind": "attention", "batch": 1, "heads": 64, "q_len": 12288, "kv_len": 12288, "head_dim": 128, "causal": True},
)
#: execution-time bands of the summary (ms)
BANDS = ((0.0, 1.0), (1.0, 2.0), (2.0, 3.5), (3.5, 6.0))


def draw(rng: np.random.Generator, index: int, n_scenarios: int) -> dict[str, Any]:
    """One sweep config: the fidelity matrix's random device on the h200 preset with a slow sensor drawn here, and
    `n_scenarios` kernels of SHAPES, each measured with 100 SSE runs and 100 base runs."""
    fm = load_experiment("fidelity_matrix")
    cfg = fm.draw_sweep(rng, index, 1)
    # the matrix's late stamps were drawn for its own period: drawn again below for this one
    ov = {k: v for k, v in cfg["device"]["sim"]["overrides"].items() if not k.startswith("sensor_late")}
    cfg["device"]["sim"]["overrides"] = ov
    period = float(rng.uniform(8.0, 40.0))
    ov.update(
        {
            "sensor_period_ms": round(period, 3),
            "sensor_period_jitter_ms": round(period * float(rng.uniform(0.0, 0.01)), 4),
            "sensor_window_ms": round(float(np.exp(rng.uniform(np.log(0.05), np.log(4.0)))), 4),
            "sensor_lag_ms": round(float(rng.uniform(3.0, 20.0)), 3),
            "sensor_delay_ms": round(float(rng.uniform(0.5, 5.0)), 3),
            "sensor_noise_mw": round(float(rng.uniform(100.0, 3000.0)), 1),
            "sensor_quantization_mw": round(float(rng.choice([1.0, 250.0, 1000.0])), 1),
            "sensor_acquire_jitter_ms": round(period * float(rng.uniform(0.0, 0.05)), 4),
        }
    )
    ov |= fm._draw_late_stamps(index, period)  # else the preset's, every 5th 14 % of the period late
    cfg["device"]["sim"]["preset"] = "h200"
    cfg["sweep"] = f"base-{index}"
    cfg["calibration"] = {"steps": 80, "step_on_ms": 150.0, "step_off_ms": 150.0}
    cfg["run_policy"] = {
        "mode": "auto",
        "sse": "always",
        "sse_runs": 100,
        "sse_base_runs": 100,
        "runs": 30,
        "max_runs": 60,
        "min_lois": 30,
        "reference_ms": 0.0,
    }
    picks = rng.choice(len(SHAPES), size=n_scenarios, replace=False)
    cfg["scenarios"] = [{"name": f"s{k}", "kernel": dict(SHAPES[int(p)])} for k, p in enumerate(picks)]
    return cfg


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per execution-time band: scenarios, SSE kernel powers reported, at <= +-5 %, CI coverage, max |error|,
    |error| / half-width p95 and the signed error / half-width's mean and sd."""
    out: dict[str, Any] = {"scenarios": len(rows), "errors": sum("error" in r for r in rows)}
    ok = [r for r in rows if "error" not in r]
    for lo, hi in (*BANDS, (0.0, 99.0)):
        band = [r for r in ok if r.get("exec_time_us") is not None and lo <= r["exec_time_us"] / 1e3 < hi]
        rep = [r for r in band if r.get("sse_kernel_power_w") is not None and r.get("truth_sse_kernel_power_w")]
        half = [(r["sse_kernel_power_ci_high_w"] - r["sse_kernel_power_ci_low_w"]) / 2 for r in rep]
        err = [r["sse_kernel_power_w"] - r["truth_sse_kernel_power_w"] for r in rep]
        cov = [r["sse_kernel_power_ci_low_w"] <= r["truth_sse_kernel_power_w"] <= r["sse_kernel_power_ci_high_w"]
               for r in rep]  # fmt: skip
        key = "all" if hi == 99.0 else f"{lo:g}-{hi:g} ms"
        ratio = np.array([e / h for e, h in zip(err, half, strict=True)])  # signed error / half-width
        out[key] = {
            "scenarios": len(band),
            "reported": len(rep),
            "within_5pct": sum(h / r["sse_kernel_power_w"] <= 0.05 for h, r in zip(half, rep, strict=True)),
            "ci_coverage": round(sum(cov) / len(cov), 3) if cov else None,
            "max_abs_error_pct": round(
                max(abs(e) / r["truth_sse_kernel_power_w"] * 100 for e, r in zip(err, rep, strict=True)), 2
            )
            if rep
            else None,  # fmt: skip
            "err_over_half_p95": round(float(np.percentile(np.abs(ratio), 95)), 3) if rep else None,
            # a calibrated 95 % CI: mean 0, sd 1 / 1.96 = 0.51
            "err_over_half_mean": round(float(ratio.mean()), 3) if rep else None,
            "err_over_half_sd": round(float(ratio.std()), 3) if rep else None,
        }
    return out


def run_one(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    """The fidelity matrix's `run_sweep`, with each row's sensor draw and kernel power kept."""
    fm = load_experiment("fidelity_matrix")
    rows = fm.run_sweep(cfg)
    sensor = {k: v for k, v in cfg["device"]["sim"]["overrides"].items() if k.startswith("sensor_")}
    return [{**r, "sensor": sensor} for r in rows]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=24)
    ap.add_argument("--scenarios", type=int, default=3, help="kernels per sweep")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/tmp/base-matrix.jsonl"))
    ap.add_argument(
        "--repeat",
        nargs=2,
        metavar=("SWEEP", "SCENARIO"),
        type=lambda v: int(v) if v.isdigit() else v,
        help="run drawn sweep SWEEP's scenario SCENARIO --repeats times instead (e.g. --repeat 16 s1)",
    )
    ap.add_argument("--repeats", type=int, default=24)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s", stream=sys.stderr)
    logger.setLevel(logging.INFO)
    rng = np.random.default_rng(args.seed)
    cfgs = [draw(rng, i, args.scenarios) for i in range(args.sweeps)]
    if args.repeat is not None:  # one drawn sweep's scenario again and again: its spread against its CIs
        cfgs = repeats(cfgs[args.repeat[0]], args.repeat[1], args.repeats)
    return load_experiment("fidelity_matrix").run_and_report(cfgs, args.jobs, args.out, run_one, summarize)


def repeats(cfg: dict[str, Any], scenario: str, n: int) -> list[dict[str, Any]]:
    """`n` sweeps of `cfg`'s device and sensor with only `scenario`, seeds 1000 ... 1000 + n - 1 (a new calibration
    and new runs each time)."""
    out = []
    for r in range(n):
        c = copy.deepcopy(cfg)
        c["scenarios"] = [s for s in c["scenarios"] if s["name"] == scenario]
        if not c["scenarios"]:
            raise SystemExit(f"--repeat: {cfg['sweep']} has no scenario {scenario!r}")
        c["seed"], c["sweep"] = 1000 + r, f"{cfg['sweep']}-r{r}"
        out.append(c)
    return out


if __name__ == "__main__":
    sys.exit(main())
