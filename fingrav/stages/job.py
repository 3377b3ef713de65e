"""One stage job from its command line: `<stage> --log <file> --params <json>` (`fingrav.stages.__main__`)."""

from __future__ import annotations

import argparse
import importlib
import json
import logging

from fingrav.stages import STAGES


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m fingrav.stages", description="run one fingrav stage")
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--log", required=True, help="the stage's log file")
    ap.add_argument("--params", required=True, help="the stage's parameters as JSON")
    return ap


def run_stage(argv: list[str]) -> int:
    """Run the stage in this process: 0 when it succeeded, 1 after a FingravError (logged)."""
    from fingrav.errors import FingravError
    from fingrav.logs import logging_to

    args = parser().parse_args(argv)
    with logging_to(args.log):
        try:
            importlib.import_module(f"fingrav.stages.{args.stage}").from_params(json.loads(args.params))
        except FingravError as err:  # a known problem: one message, no traceback
            logging.getLogger("fingrav.stages").error("%s: %s", args.stage, err)
            return 1
        except Exception:  # a bug: the traceback goes to the stage's log too
            logging.getLogger("fingrav.stages").exception("%s failed", args.stage)
            return 1
    return 0
