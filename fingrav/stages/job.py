"""One stage job from its command line: `<stage> --log <file> --params-file <json file>` (`fingrav.stages.__main__`).

A rule passes its parameters through a file (rules/common.smk `params_file`:
`.snakemake/fingrav-params/<sha256>.json`), never on the command line: Linux limits one argument to 131,072 bytes,
which the report's parameters (the whole sweep config) pass beyond ~1,000 scenarios, and a callable's `args` can
too. `--params <json>` (inline) remains for small calls.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
from pathlib import Path
from typing import Any

from fingrav.stages import STAGES


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m fingrav.stages", description="run one fingrav stage")
    ap.add_argument("stage", choices=STAGES)
    ap.add_argument("--log", required=True, help="the stage's log file")
    given = ap.add_mutually_exclusive_group(required=True)
    given.add_argument("--params-file", help="a file holding the stage's parameters as JSON")
    given.add_argument("--params", help="the stage's parameters as JSON (small ones only: see the module docstring)")
    return ap


def params_of(args: argparse.Namespace) -> dict[str, Any]:
    """The stage's parameters (from --params-file or --params); a FingravError naming the file when unreadable."""
    from fingrav.errors import DataError

    if args.params_file is None:
        return json.loads(args.params)
    path = Path(args.params_file)
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise DataError(f"{path}: the stage's parameters cannot be read ({err.strerror})") from None
    except ValueError as err:
        raise DataError(f"{path}: the stage's parameters are not JSON ({err})") from None


def check_root(params: dict[str, Any]) -> None:
    """Every stage job writes under its `root`: never into a committed dataset (`fingrav.guard`)."""
    from fingrav.guard import check_write

    if params.get("root"):
        check_write(Path(params["root"]), "root")


def run_stage(argv: list[str]) -> int:
    """Run the stage in this process: 0 when it succeeded, 1 after a FingravError (logged)."""
    from fingrav.errors import FingravError
    from fingrav.logs import logging_to

    args = parser().parse_args(argv)
    with logging_to(args.log):
        try:
            params = params_of(args)
            check_root(params)
            importlib.import_module(f"fingrav.stages.{args.stage}").from_params(params)
        except FingravError as err:  # a known problem: one message, no traceback
            logging.getLogger("fingrav.stages").error("%s: %s", args.stage, err)
            return 1
        except MemoryError:  # a sweep too large for this machine (max_gpu_hours raised past it): no traceback
            logging.getLogger("fingrav.stages").error(
                "%s: out of memory on this machine: lower the scenario's runs or executions (run_policy)", args.stage
            )
            return 1
        except OSError as err:  # a full disk, a read-only folder: the file and the reason, no traceback
            where = f"{err.filename}: " if err.filename else ""
            logging.getLogger("fingrav.stages").error("%s: %s%s", args.stage, where, err.strerror or err)
            return 1
        except Exception:  # a bug: the traceback goes to the stage's log too
            logging.getLogger("fingrav.stages").exception("%s failed", args.stage)
            return 1
    return 0
