"""Scale benchmark of the analysis: bin + differentiate on synthetic raw data of ~1e6 executions and
~1e7 power samples (target: < 10 s wall and < 4 GB peak RSS on 2 cores).

The parent process generates the raw files (fingrav.testing.synthetic) into a temporary sweep folder, then
runs the two stages (fingrav.stages.bin.run / fingrav.stages.differentiate.run, file I/O included) in a
fresh child process per trial limited to `--threads` threads, and reports each child's wall time and
peak resident memory (ru_maxrss from os.wait4), so generation does not count. A last child times each
step of the pure functions separately (the breakdown).

    python benchmarks/analysis_scale.py                 # 5000 SSP runs x 200 executions + 1000 SSE runs
                                                        # + a 2 s reference run, ~1.1e7 samples
    python benchmarks/analysis_scale.py --runs 500      # smaller
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

logger = logging.getLogger("analysis_scale")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing


def generate_raw(
    out: Path,
    runs: int,
    execs_per_run: int,
    exec_time_ns: int,
    period_ns: int,
    seed: int,
    sse_runs: int = 0,
    reference_ms: float = 0.0,
) -> dict:
    """Write synthetic raw files of one scenario (+ truth, calibration) under the sweep folder `out`: `runs` SSP runs,
    `sse_runs` SSE runs and, when reference_ms > 0, a reference run of that length (ms)."""
    import numpy as np

    from fingrav import rawio
    from fingrav.contracts.calibration import Calibration
    from fingrav.layout import SweepLayout
    from fingrav.testing.synthetic import SynthSpec, generate

    rng = np.random.default_rng(seed)
    tail = max(1, execs_per_run // 4)
    spec = SynthSpec(
        runs=runs,
        exec_time_ns=exec_time_ns,
        warmups=3,
        ssp_index=execs_per_run - tail - 1,
        tail=tail,
        idle_ns=execs_per_run * exec_time_ns,
        max_delay_ns=period_ns,
        sample_period_ns=period_ns,
        trailing=1,
        launch_gap_ns=2_000,
        delay_ns=30_000,
        drift=5e-6,
        seed=seed,
        outlier_runs=tuple(int(r) for r in rng.choice(runs, runs // 30, replace=False)),
        sse_runs=sse_runs,
        sse_outlier_runs=tuple(int(r) for r in rng.choice(sse_runs, sse_runs // 30, replace=False)),
        reference_executions=int(reference_ms * 1e6 // (exec_time_ns + 2_000)),
        reference_transient_ns=int(reference_ms * 1e6 / 10),
    )
    d = generate(spec)
    layout = SweepLayout(out)
    raw = layout.scenario_dir("scale")
    for kind in ("executions", "runs", "samples", "clock"):
        f = d[kind]
        rawio.write_table(
            raw / f"{kind}.parquet",
            kind,
            {c: f[c].to_numpy() for c in f.columns},
            {"stage": "benchmark", **({"gaps": []} if kind == "samples" else {})},
        )
    rawio.write_json(raw / "plan.json", d["plan"])
    t = d["truth"]
    rawio.write_table(layout.truth("scale"), "truth", {c: t[c].to_numpy() for c in t.columns}, {})
    cal = Calibration(clock=d["clock_fit"].model_dump(), sensor=d["sensor"], channels=list(d["sensor"]), steps={})
    rawio.write_json(layout.calibration_json(0), cal)
    return {
        "executions": d["executions"].height,
        "samples": d["samples"].height,
        "runs": runs,
        "sse_runs": sse_runs,
        "reference_executions": spec.reference_executions,
    }


def child(out: Path) -> None:
    """Run the two stages on `out` and write timings to out/timings.json."""
    from fingrav import rawio
    from fingrav.config import AnalysisConfig
    from fingrav.contracts.profile import ScenarioSummary
    from fingrav.layout import SweepLayout
    from fingrav.stages import bin as bin_stage
    from fingrav.stages import differentiate

    layout = SweepLayout(out)
    analysis = AnalysisConfig(bootstrap_reps=1000, margin=0.05)
    t0 = time.perf_counter()
    binned = bin_stage.run(layout, "scale", 0, analysis)
    t1 = time.perf_counter()
    differentiate.run(layout, "scale", 0, analysis, 20.0, True)
    t2 = time.perf_counter()
    meta = rawio.read_metadata(binned)
    row = rawio.read_model(layout.summary_json("scale"), ScenarioSummary).row  # the result's flat columns
    (out / "timings.json").write_text(
        json.dumps(
            {
                "bin_s": t1 - t0,
                "differentiate_s": t2 - t1,
                "total_s": t2 - t0,
                "runs_golden": meta["runs_golden"],
                **{k: row[k] for k in ("ssp_lois", "power_w", "ssp_power_w", "power_vs_truth_pct", "sse_lois")},
                **{k: row[k] for k in ("reference_power_w", "reference_vs_truth_pct")},
            }
        )
    )


def child_breakdown(out: Path) -> None:
    """Time each step of bin + differentiate in process (pure functions, no file writes) and write
    out/breakdown.json."""
    import polars as pl

    from fingrav import rawio
    from fingrav.analysis import binning, flags, loi, profiles, reference, validation
    from fingrav.config import AnalysisConfig
    from fingrav.contracts.calibration import Calibration
    from fingrav.contracts.plan import Plan
    from fingrav.contracts.tables import LOIS_DICTIONARY_COLUMNS
    from fingrav.layout import SweepLayout

    layout = SweepLayout(out)
    raw = layout.scenario_dir("scale")
    steps: dict[str, float] = {}
    t = time.perf_counter()

    def lap(name: str) -> None:
        nonlocal t
        now = time.perf_counter()
        steps[name] = round(now - t, 3)
        t = now

    ex = pl.read_parquet(raw / "executions.parquet")
    runs = pl.read_parquet(raw / "runs.parquet")
    smp = pl.read_parquet(raw / "samples.parquet")
    truth = pl.read_parquet(layout.truth("scale"))
    plan = Plan.model_validate(rawio.read_json(raw / "plan.json"))
    cal = Calibration.model_validate(rawio.read_json(layout.calibration_json(0)))
    delay = int(cal.total.delay_ns or 0)
    lap("read_parquet")
    binned, _ = binning.bin_runs(ex, runs, plan, 0.05)
    lap("bin_runs")
    hx = loi.host_executions(ex, runs, plan, cal.clock_map, binned)
    lap("host_executions")
    lois = loi.assign_lois(smp, hx, delay)
    lap("assign_lois (join_asof)")
    prof = profiles.compute_profiles(lois, hx, plan, AnalysisConfig(bootstrap_reps=1000))
    lap("compute_profiles (bootstrap 1000 + fits)")
    flags.count_gaps(smp, hx, [], delay)
    lap("count_gaps")
    reference.reference_stats(ex, runs, smp, plan, cal.clock_map, delay)
    lap("reference_stats")
    validation.validate(truth, binned, plan, prof.channels["total"]["ssp"].power.value, None, None)
    lap("validate")
    rawio.write_arrow(out / "lois_breakdown.parquet", lois.to_arrow(), {}, LOIS_DICTIONARY_COLUMNS)
    lap("write lois.parquet")
    (out / "breakdown.json").write_text(json.dumps({"steps_s": steps, "lois_rows": lois.height}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5000, help="SSP runs")
    ap.add_argument("--sse-runs", type=int, default=1000, help="SSE runs (warm-ups + 1 executions each)")
    ap.add_argument("--reference-ms", type=float, default=2000.0, help="reference run length (0: none)")
    ap.add_argument("--execs-per-run", type=int, default=200)
    ap.add_argument("--exec-time-us", type=float, default=50.0)
    ap.add_argument("--period-us", type=float, default=20.0, help="sample period (2 channels are written)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="stage runs (each in a fresh process)")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--child-breakdown", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    if args.child is not None:
        child(args.child)
        return 0
    if args.child_breakdown is not None:
        child_breakdown(args.child_breakdown)
        return 0
    with tempfile.TemporaryDirectory(prefix="fingrav-scale-") as tmp:
        out = Path(tmp)
        tg = time.perf_counter()
        sizes = generate_raw(
            out,
            args.runs,
            args.execs_per_run,
            int(args.exec_time_us * 1e3),
            int(args.period_us * 1e3),
            args.seed,
            args.sse_runs,
            args.reference_ms,
        )
        logger.info(
            "generated %d executions, %d samples in %.1f s",
            sizes["executions"],
            sizes["samples"],
            time.perf_counter() - tg,
        )
        env = {
            **os.environ,
            "POLARS_MAX_THREADS": str(args.threads),
            "OMP_NUM_THREADS": str(args.threads),
            "OPENBLAS_NUM_THREADS": str(args.threads),
            "MKL_NUM_THREADS": str(args.threads),
            "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        prefix = []
        if hasattr(os, "sched_setaffinity") and args.threads < (os.cpu_count() or 1):
            prefix = ["taskset", "-c", f"0-{args.threads - 1}"]
        trials = []
        for _ in range(args.repeat):
            # a fresh child per trial: ru_maxrss of RUSAGE_CHILDREN is the max over waited-for children
            tw = time.perf_counter()
            proc = subprocess.Popen(
                [*prefix, sys.executable, __file__, "--child", str(out)], env=env, stdout=subprocess.DEVNULL
            )
            _, status, usage = os.wait4(proc.pid, 0)
            if status != 0:
                raise SystemExit(f"benchmark child failed with status {status}")
            wall = time.perf_counter() - tw
            timings = json.loads((out / "timings.json").read_text())
            trials.append(
                {
                    **{k: round(v, 3) if isinstance(v, float) else v for k, v in timings.items()},
                    "child_wall_s_with_imports": round(wall, 3),
                    "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
                }
            )
            logger.info("trial: %s", json.dumps(trials[-1]))
        subprocess.run(
            [*prefix, sys.executable, __file__, "--child-breakdown", str(out)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        breakdown = json.loads((out / "breakdown.json").read_text())
        lois_mb = (out / "profiles" / "gpu0" / "scale" / "lois.parquet").stat().st_size / 2**20
        load = os.getloadavg()
    totals = sorted(t["total_s"] for t in trials)
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "threads": args.threads,
        **sizes,
        "trials": trials,
        "total_s_min": totals[0],
        "total_s_median": totals[len(totals) // 2],
        "peak_rss_mib_max": max(t["peak_rss_mib"] for t in trials),
        "lois_parquet_mib": round(lois_mb, 1),
        "breakdown": breakdown,
        "loadavg_after": [round(x, 2) for x in load],
    }
    logger.info("%s", json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
