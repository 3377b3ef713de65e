"""What a Snakemake command line names, read before Snakemake's own parser has run: its config files, its Snakefile,
and whether that Snakefile is fingrav's.

Imported by fingrav's Snakemake logger plugin (`snakemake_logger_plugin_fingrav`) for every Snakemake command in an
environment where fingrav is installed, so it stays light: the standard library, and Snakemake's own list of the
default Snakefile places. fingrav's heavier modules load only for a fingrav workflow.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# A line of fingrav's Snakefile (and of a copy of it): a command that runs it has its config files screened by
# `fingrav.preflight.screen_snakemake_command_line` before Snakemake reads them (snakemake_logger_plugin_fingrav)
SNAKEFILE_MARK = "# fingrav-workflow"
MARK_WITHIN_BYTES = 4096  # the mark is looked for in the Snakefile's first 4 KiB


def option_values(argv: Sequence[str], option: str, shortest: str, short: str | None = None) -> list[str]:
    """The values a command line gives to `option` (a long option taking one or more values): `--option a b`,
    `--option=a`, an abbreviation of it from `shortest` on (argparse accepts a unique prefix), and `short`
    (`-s a` or `-sa`). Values follow the option up to the next token that starts with '-'."""
    values: list[str] = []
    taking = False
    for tok in argv:
        if tok.startswith("-"):
            opt, eq, val = tok.partition("=")
            taking = len(opt) >= len(shortest) and option.startswith(opt)
            if taking and eq:
                values.append(val)
                taking = False
            elif short is not None and not tok.startswith("--") and tok.startswith(short):
                taking = tok == short
                if not taking:
                    values.append(tok[len(short) :])
        elif taking:
            values.append(tok)
    return values


def configfiles_in(argv: Sequence[str]) -> list[str]:
    """The files a Snakemake command line names with --configfile / --configfiles (or an abbreviation of them, as
    argparse accepts them, and the `--configfile=x` form)."""
    return option_values(argv, "--configfiles", shortest="--configf")


def snakefile_of(argv: Sequence[str], cwd: Path | str = ".") -> Path | None:
    """The Snakefile a Snakemake command line runs, as Snakemake resolves it (relative to the working directory
    the command starts in: -d/--directory does not move it): the last -s/--snakefile, else the first of Snakemake's
    default places that exists; None when there is none, or it is a URL."""
    given = option_values(argv, "--snakefile", shortest="--sn", short="-s")
    if given:
        return None if "://" in given[-1] else Path(cwd, given[-1])
    from snakemake.common import SNAKEFILE_CHOICES  # Snakemake's own list: Snakefile, workflow/Snakefile, ...

    return next((Path(cwd, p) for p in SNAKEFILE_CHOICES if Path(cwd, p).exists()), None)


def is_fingrav_snakefile(path: Path) -> bool:
    """Whether `path` is fingrav's Snakefile: a line of its first `MARK_WITHIN_BYTES` starts with `SNAKEFILE_MARK`
    (False for a file that cannot be read)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(MARK_WITHIN_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return False
    return any(line.startswith(SNAKEFILE_MARK) for line in head.splitlines())


def is_fingrav_command(argv: Sequence[str], cwd: Path | str | None = None) -> bool:
    """Whether a Snakemake command line (without the program name), started in `cwd` (this process's by default),
    runs fingrav's workflow."""
    snakefile = snakefile_of(argv, os.getcwd() if cwd is None else cwd)
    return snakefile is not None and is_fingrav_snakefile(snakefile)
