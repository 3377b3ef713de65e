"""`python -m fingrav.stages <stage> --log <file> --params-file <json file>`: run one stage from its rule.

Rules are shell commands rather than Snakemake `script:`s: a script job imports Snakemake itself
(~0.3 s per job) before any work. The params are the JSON of the once-validated sweep config's sections
(Snakemake tracks their changes); each stage's `from_params` turns them back into typed objects. Analysis
jobs run in a preloaded stage worker when one can be had (`fingrav.stages.worker`), else in this process.
This module imports only the standard library until it runs a stage; the analysis rules start it without
site-packages (`python -S`, rules/common.smk `stage`: ~30 ms less of each job's start), and it loads them
(`site.main()`) only when it runs the stage itself.
"""

from __future__ import annotations

import os
import sys

from fingrav.stages import GPU_STAGES, STAGES

TYPE_CHECKING = False  # typing is not imported: this client starts every analysis job
if TYPE_CHECKING:
    import argparse


def _needs_gpu(args: argparse.Namespace) -> bool:
    if args.stage not in GPU_STAGES:
        return False
    from fingrav.backends import get_backend
    from fingrav.stages.job import params_of

    if os.environ.get("SLURM_JOB_ID"):  # a scheduler's GPU job runs in its own allocation, never in a worker
        return True
    try:
        device = params_of(args).get("device") or {}
    except Exception:  # unreadable params: run in this process, which reports it with the file's name
        return True
    return get_backend(device.get("backend", "sim")).real_gpu or int(device.get("world_size") or 1) > 1


def _thread_budget() -> None:
    """Polars keeps to the job's threads as the linear-algebra libraries do: Snakemake sets OMP_NUM_THREADS (and
    OPENBLAS_NUM_THREADS, ...) to the rule's `threads` for every job, and runs other jobs on the other cores; a
    polars pool as wide as the machine in every job only contends with them (and costs more than it saves on the
    small frames of one scenario). Set before polars starts its pool, here and in the stage worker this job may
    start (the worker's children take each job's environment)."""
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit() and int(threads) > 0:
        os.environ.setdefault("POLARS_MAX_THREADS", threads)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _thread_budget()
    # an analysis stage goes to the worker as it is (its child parses the arguments and reports them if wrong):
    # argparse, logging and typing cost a job's client more than the rest of it
    analysis = bool(argv) and argv[0] in STAGES and argv[0] not in GPU_STAGES
    if analysis or not _needs_gpu(_parsed(argv)):
        from fingrav.stages.worker import run_via_worker

        status = run_via_worker(argv)
        if status is not None:
            return status
    _load_site()
    from fingrav.stages.job import run_stage

    return run_stage(argv)


def _parsed(argv: list[str]) -> argparse.Namespace:
    from fingrav.stages.job import parser

    return parser().parse_args(argv)


def _load_site() -> None:
    """Add site-packages to the path now when the interpreter started without them (`python -S`): the stage
    about to run in this process imports numpy, polars, ... from there."""
    if sys.flags.no_site:
        import site

        site.main()


if __name__ == "__main__":
    sys.exit(main())
