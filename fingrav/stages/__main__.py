"""`python -m fingrav.stages <stage> --log <file> --params-file <json file>`: run one stage from its rule.

Rules are shell commands rather than Snakemake `script:`s: a script job imports Snakemake itself
(~0.3 s per job) before any work. The params are the JSON of the once-validated sweep config's sections
(Snakemake tracks their changes); each stage's `from_params` turns them back into typed objects. Analysis
jobs run in a preloaded stage worker when one can be had (`fingrav.stages.worker`), else in this process.
This module imports only the standard library until it runs a stage.
"""

from __future__ import annotations

import argparse
import os
import sys

from fingrav.backends import get_backend
from fingrav.stages.job import params_of, parser, run_stage


def _needs_gpu(args: argparse.Namespace) -> bool:
    if args.stage not in ("calibrate", "collect"):
        return False
    if os.environ.get("SLURM_JOB_ID"):  # a scheduler's GPU job runs in its own allocation, never in a worker
        return True
    try:
        device = params_of(args).get("device") or {}
    except Exception:  # unreadable params: run in this process, which reports it with the file's name
        return True
    return get_backend(device.get("backend", "sim")).real_gpu or int(device.get("world_size") or 1) > 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser().parse_args(argv)
    if not _needs_gpu(args):
        from fingrav.stages.worker import run_via_worker

        status = run_via_worker(argv)
        if status is not None:
            return status
    return run_stage(argv)


if __name__ == "__main__":
    sys.exit(main())
