"""Where a sweep's time goes: every stage job of a sweep run in this process under cProfile, in the DAG's order.

    python benchmarks/stage_profile.py [--configfile config/sim-h200.yaml] [--top 25] [--stage collect]
    python benchmarks/stage_profile.py --margin 0.04    # only the jobs a change of analysis.margin reruns

Takes the jobs' command lines from `snakemake -n -p --forceall` (the sweep's results folder is removed first, so
every job runs from scratch), runs each one's `fingrav.stages.<stage>.from_params` here (no stage worker, no
Snakemake), and prints per stage: jobs, wall and CPU seconds (CPU time is the steadier number on a shared machine),
and the top functions by cumulative and by own time. With --margin M the sweep is kept (it must have been run) and
only the jobs that a change of `analysis.margin` to M makes Snakemake rerun are profiled, per job too.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import resource
import shlex
import shutil
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
_CMD = re.compile(r"(?:-m fingrav\.stages|sys\.exit\(main\(\)\)') (\w+) --log (\S+) --params-file (\S+)")


def jobs(configfile: str, margin: float | None = None) -> list[tuple[str, str, dict]]:
    """(stage, log, params) of every job of the sweep, in the order Snakemake would run them (one core); with
    `margin`, only the jobs that a change of analysis.margin to it reruns."""
    cmd = ["snakemake", "--cores", "1", "-n", "-p"]
    if margin is None:
        cmd.append("--forceall")
    if margin is not None:
        data = yaml.safe_load((ROOT / configfile).read_text())
        data["analysis"] = {**(data.get("analysis") or {}), "margin": margin}
        changed = ROOT / ".snakemake" / "stage_profile_margin.yaml"
        changed.parent.mkdir(exist_ok=True)
        changed.write_text(yaml.safe_dump(data, sort_keys=False))
        cmd += ["--configfile", str(changed)]
    elif configfile != "config/config.yaml":
        cmd += ["--configfile", configfile]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    found = []
    for line in out.splitlines():
        m = _CMD.search(line)
        if m:
            stage, log, params = m.group(1), shlex.split(m.group(2))[0], shlex.split(m.group(3))[0]
            found.append((stage, log, json.loads((ROOT / params).read_text())))
    return found


def _children_cpu() -> float:
    """CPU seconds of this process' finished child processes (the report renders its PNGs in one)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--stage", action="append", help="print profiles of these stages only (all run)")
    ap.add_argument("--keep", action="store_true", help="keep the results folder (do not remove it first)")
    ap.add_argument("--margin", type=float, help="profile only what a change of analysis.margin to this reruns")
    ap.add_argument("--per-job", action="store_true", help="print each job's wall and CPU seconds too")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(var, "1")  # before numpy / polars load: what a one-thread Snakemake job runs with
    import importlib

    from fingrav.logs import logging_to

    sweep = yaml.safe_load(Path(args.configfile).read_text())["sweep"]
    todo = jobs(args.configfile, args.margin)
    if not args.keep and args.margin is None:
        shutil.rmtree(ROOT / "results" / sweep, ignore_errors=True)
    profiles: dict[str, cProfile.Profile] = defaultdict(cProfile.Profile)
    wall: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    t_all = time.perf_counter()
    for stage, log, params in todo:
        mod = importlib.import_module(f"fingrav.stages.{stage}")
        t0, c0 = time.perf_counter(), time.process_time() + _children_cpu()
        with logging_to(log):
            profiles[stage].runcall(mod.from_params, params)
        wall[stage] += time.perf_counter() - t0
        job_cpu = time.process_time() + _children_cpu() - c0
        cpu[stage] += job_cpu
        count[stage] += 1
        if args.per_job:
            label = params.get("scenario", "")
            print(f"  {stage:<14}{label:<24}{time.perf_counter() - t0:>8.2f} s{job_cpu:>8.2f} CPU-s")
    total = time.perf_counter() - t_all
    print(f"{'stage':<14}{'jobs':>6}{'wall s':>10}{'cpu s':>10}")
    for stage in wall:
        print(f"{stage:<14}{count[stage]:>6}{wall[stage]:>10.2f}{cpu[stage]:>10.2f}")
    print(
        f"{'all':<14}{len(todo):>6}{total:>10.2f}{sum(cpu.values()):>10.2f}"
        f"  (load {os.getloadavg()[0]:.2f}, {os.cpu_count()} cpus; cpu: this process, every thread, under cProfile,"
        " and its child processes: the report's PNG renderer)"
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
