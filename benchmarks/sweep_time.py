"""Wall time of a whole sweep from scratch with `snakemake --cores 1` (the README's timing claims).

    python benchmarks/sweep_time.py [--configfile config/sim-h200.yaml] [--repeat 3]

Removes the sweep's results folder and Snakemake's metadata before each run, records the load average
before and after, and prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    sweep = yaml.safe_load((ROOT / args.configfile).read_text())["sweep"]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
