"""CPU seconds of the differentiate jobs that a change of analysis.margin reruns, without a profiler (for A/B pairs).

    python benchmarks/stage_cpu.py --margin 0.04 [--code /path/to/other/checkout]

Runs the sweep's bin jobs (untimed) and then its differentiate jobs (timed by `time.process_time`) in this process,
one thread each for BLAS and polars (what a one-thread Snakemake job runs with), taking the job list from
`benchmarks/stage_profile.py --margin` (the sweep must have been run once). --code imports fingrav from another
checkout (e.g. a `git archive` copy of main) on the same sweep, so two versions can be timed in interleaved pairs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--configfile", default="config/config.yaml")
    ap.add_argument("--margin", type=float, required=True)
    ap.add_argument("--code", default=str(ROOT), help="the checkout whose fingrav is timed (default: this one)")
    args = ap.parse_args(argv)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "POLARS_MAX_THREADS"):
        os.environ.setdefault(var, "1")  # before numpy / polars load
    os.environ.setdefault("FINGRAV_GIT_COMMIT", "stage_cpu")  # as the workflow sets it: no git per job
    sys.path.insert(0, str(ROOT / "benchmarks"))
    sys.path.insert(0, args.code)
    os.chdir(ROOT)
    import stage_profile

    import fingrav
    from fingrav.logs import logging_to

    cpu = 0.0
    jobs = 0
    for stage, log, params in stage_profile.jobs(args.configfile, args.margin):
        if stage not in ("bin", "differentiate"):
            continue
        mod = importlib.import_module(f"fingrav.stages.{stage}")
        c0 = time.process_time()
        with logging_to(log):
            mod.from_params(params)
        if stage == "differentiate":
            cpu += time.process_time() - c0
            jobs += 1
    print(
        f"differentiate: {jobs} jobs, {cpu:.3f} CPU-s (load {os.getloadavg()[0]:.2f}, fingrav from "
        f"{Path(fingrav.__file__).parent})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
