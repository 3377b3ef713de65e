"""Wall time of a whole sweep from scratch with `snakemake --cores 1` (the README's timing claims).

    python benchmarks/sweep_time.py [--configfile config/sim-h200.yaml] [--repeat 3] [--margin 0.03]
                                    [--reanalysis-cores 2]

Removes the sweep's results folder and Snakemake's metadata before each run, records the load average
before and after, and prints one JSON line per run. --margin: after each run, time the re-analysis that a change
of `analysis.margin` to this value causes (bin -> differentiate -> report of every scenario, nothing measured
again), with the same config otherwise, on --reanalysis-cores cores (default 2: the re-analysis is CPU work
whose per-scenario jobs Snakemake runs side by side; the sweep itself is timed with `--cores 1`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--margin", type=float, help="also time the re-analysis after analysis.margin changes to this")
    ap.add_argument("--reanalysis-cores", type=int, default=2, help="snakemake --cores of the re-analysis")
    args = ap.parse_args(argv)
    data = yaml.safe_load((ROOT / args.configfile).read_text())
    sweep = data["sweep"]
    for i in range(args.repeat):
        shutil.rmtree(ROOT / "results" / sweep, ignore_errors=True)
        shutil.rmtree(ROOT / ".snakemake" / "metadata", ignore_errors=True)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        cmd = ["snakemake", "--cores", "1", "-q"]
        if args.configfile != "config/config.yaml":
            cmd += ["--configfile", args.configfile]
        rc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        wall = time.perf_counter() - t0
        print(
            json.dumps(
                {
                    "run": i + 1,
                    "config": args.configfile,
                    "rc": rc,
                    "wall_s": round(wall, 1),
                    "load_before": round(load0, 2),
                    "load_after": round(os.getloadavg()[0], 2),
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                }
            ),
            flush=True,
        )
        if args.margin is not None and rc == 0:
            _reanalysis(data, args.margin, i + 1, args.reanalysis_cores)
    return 0


def _reanalysis(data: dict, margin: float, run: int, cores: int) -> None:
    """Time `snakemake --cores <cores>` after a change of analysis.margin (the sweep's config with the new margin)."""
    changed = {**data, "analysis": {**(data.get("analysis") or {}), "margin": margin}}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "margin.yaml"
        cfg.write_text(yaml.safe_dump(changed, sort_keys=False))
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        cmd = ["snakemake", "--cores", str(cores), "-q", "--configfile", str(cfg)]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True)
        wall = time.perf_counter() - t0
    print(
        json.dumps(
            {
                "run": run,
                "reanalysis_margin": margin,
                "cores": cores,
                "rc": proc.returncode,
                "wall_s": round(wall, 1),
                "load_before": round(load0, 2),
                "load_after": round(os.getloadavg()[0], 2),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
