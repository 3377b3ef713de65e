"""Where a sweep's time goes: every stage job of a sweep run in this process under cProfile, in the DAG's order.

    python benchmarks/stage_profile.py [--configfile config/sim-h200.yaml] [--top 25] [--stage collect]

Takes the jobs' command lines from `snakemake -n -p --forceall` (the sweep's results folder is removed first, so
every job runs from scratch), runs each one's `fingrav.stages.<stage>.from_params` here (no stage worker, no
Snakemake), and prints per stage: jobs, wall and CPU seconds (CPU time is the steadier number on a shared machine),
and the top functions by cumulative and by own time.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_CMD = re.compile(r"-m fingrav\.stages (\w+) --log (\S+) --params (.*)$")


def jobs(configfile: str) -> list[tuple[str, str, dict]]:
    """(stage, log, params) of every job of the sweep, in the order Snakemake would run them (one core)."""
    cmd = ["snakemake", "--cores", "1", "-n", "-p", "--forceall"]
    if configfile != "config/config.yaml":
        cmd += ["--configfile", configfile]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = _CMD.search(line)
        if m:
            stage, log, params = m.group(1), shlex.split(m.group(2))[0], shlex.split(m.group(3))[0]
            found.append((stage, log, json.loads(params)))
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--stage", action="append", help="print profiles of these stages only (all run)")
    ap.add_argument("--keep", action="store_true", help="keep the results folder (do not remove it first)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(var, "1")  # before numpy / polars load: what a one-thread Snakemake job runs with
    import importlib

    from fingrav.logs import logging_to

    sweep = yaml.safe_load(Path(args.configfile).read_text())["sweep"]
    todo = jobs(args.configfile)
    if not args.keep:
        shutil.rmtree(ROOT / "results" / sweep, ignore_errors=True)
    profiles: dict[str, cProfile.Profile] = defaultdict(cProfile.Profile)
    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    t_all = time.perf_counter()
    for stage, log, params in todo:
        mod = importlib.import_module(f"fingrav.stages.{stage}")
        t0, c0 = time.perf_counter(), time.process_time()
        with logging_to(log):
            profiles[stage].runcall(mod.from_params, params)
        wall[stage] += time.perf_counter() - t0
        cpu[stage] += time.process_time() - c0
        count[stage] += 1
    total = time.perf_counter() - t_all
    print(f"{'stage':<14}{'jobs':>6}{'wall s':>10}{'cpu s':>10}")
    for stage in wall:
        print(f"{stage:<14}{count[stage]:>6}{wall[stage]:>10.2f}{cpu[stage]:>10.2f}")
    print(
        f"{'all':<14}{len(todo):>6}{total:>10.2f}{sum(cpu.values()):>10.2f}"
        f"  (load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cpus; cpu: this process, every thread, under cProfile)"
    )
    for stage, prof in profiles.items():
        if args.stage and stage not in args.stage:
            continue
        for key in ("cumulative", "tottime"):
            buf = io.StringIO()
            pstats.Stats(prof, stream=buf).strip_dirs().sort_stats(key).print_stats(args.top)
            lines = [ln for ln in buf.getvalue().splitlines() if ln.strip()]
            start = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("ncalls"))
            print(f"\n== {stage}: top {args.top} by {key}")
            print("\n".join(lines[start:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
