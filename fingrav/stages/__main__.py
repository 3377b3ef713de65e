"""`python -m fingrav.stages <stage> --log <file> --params <json>`: run one stage from its rule.

Rules are shell commands rather than Snakemake `script:`s: a script job imports Snakemake itself
(~0.3 s per job) before any work. The params are the JSON of the once-validated sweep config's sections
(Snakemake tracks their changes); each stage's `from_params` turns them back into typed objects. Analysis
jobs run in a preloaded stage worker when one can be had (`fingrav.stages.worker`), else in this process.
This module imports only the standard library until it runs a stage.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys

from fingrav.stages import STAGES

GPU_BACKENDS = ("nvml", "amdsmi")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m fingrav.stages", description=__doc__.split("\n\n")[0])
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--log", required=True, help="the stage's log file")
    ap.add_argument("--params", required=True, help="the stage's parameters as JSON")
    return ap


def run_stage(argv: list[str]) -> int:
    """Run the stage in this process: 0 when it succeeded, 1 after a FingravError (logged)."""
    from fingrav.errors import FingravError
    from fingrav.logs import logging_to

    args = _parser().parse_args(argv)
    with logging_to(args.log):
        try:
            importlib.import_module(f"fingrav.stages.{args.stage}").from_params(json.loads(args.params))
        except FingravError as err:
            logging.getLogger("fingrav.stages").error("%s: %s", args.stage, err)
            return 1
    return 0


def _needs_gpu(args: argparse.Namespace) -> bool:
    if args.stage not in ("calibrate", "collect"):
        return False
    device = json.loads(args.params).get("device") or {}
    return device.get("backend") in GPU_BACKENDS or int(device.get("world_size") or 1) > 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(argv)
    if not _needs_gpu(args):
        from fingrav.stages.worker import run_via_worker

        status = run_via_worker(argv)
        if status is not None:
            return status
    return run_stage(argv)


if __name__ == "__main__":
    sys.exit(main())
