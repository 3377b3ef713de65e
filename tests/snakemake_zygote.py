"""A Snakemake "zygote" for the tests: one process that has imported Snakemake (and its plugins) once and forks a
child per `snakemake` command, so that the suite's ~50 Snakemake calls do not each pay its ~2.5 s of imports.

    python tests/snakemake_zygote.py      (started by conftest.snakemake; not a test module)

Protocol, one JSON line each way on stdin / stdout: a request {"argv", "cwd", "env", "stdout", "stderr"} (the
last two: files for the command's output); the reply {"pid": <child>} as soon as the child runs, then
{"rc": <exit status>} when it has ended (a negative status: killed by that signal). The child is the command as
`python -m snakemake argv` would run it: the working directory and environment of the request, its stdout and
stderr on the given files, `sys.argv` set, fingrav's logger plugin's screen of the command line (which a fresh
process runs when it imports the plugin), then `snakemake.cli.main()`. Only requests whose PYTHONPATH is the
zygote's own can be served this way (sys.path is fixed when an interpreter starts): conftest runs the others as a
subprocess. One command at a time.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _preload() -> None:
    """Import Snakemake and build its argument parser once (this collects the executor, storage, report and
    logger plugins: most of a Snakemake start)."""
    import snakemake.cli

    snakemake.cli.get_argument_parser()


def _screen_as_on_import() -> None:
    """What importing fingrav's logger plugin does in a fresh `snakemake` process (it screens the command line's
    config files), which the zygote did once, in _preload, with its own command line: again, for this command,
    when Snakemake's registry has collected the plugin (as a fresh process would, or would not)."""
    from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry

    if "fingrav" in LoggerPluginRegistry().plugins:
        import snakemake_logger_plugin_fingrav

        snakemake_logger_plugin_fingrav.screen_command_line()


def _child(req: dict) -> None:
    """Run one Snakemake command in this (forked) process and exit with its status."""
    code = 1
    try:
        os.setsid()
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        import snakemake
        from snakemake.cli import main

        sys.argv = [str(Path(snakemake.__file__).with_name("__main__.py")), *req["argv"]]  # as `-m snakemake` has it
        _screen_as_on_import()
        main(list(req["argv"]))
        code = 0
    except SystemExit as exc:  # as the interpreter ends on it: a message (not a number) goes to stderr, status 1
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve() -> None:
    """Answer requests from stdin until it closes."""
    _preload()
    reply = sys.stdout
    print(json.dumps({"ready": True}), file=reply, flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(req)
        print(json.dumps({"pid": pid}), file=reply, flush=True)
        _, status = os.waitpid(pid, 0)
        rc = os.waitstatus_to_exitcode(status)
        print(json.dumps({"rc": rc}), file=reply, flush=True)


if __name__ == "__main__":
    serve()
