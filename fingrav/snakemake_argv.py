"""What a Snakemake command line names, read before Snakemake's own parser has run: its config files, its Snakefile,
and whether that Snakefile is fingrav's.

Imported by fingrav's Snakemake logger plugin (`snakemake_logger_plugin_fingrav`) for every Snakemake command in an
environment where fingrav is installed, so it stays light: the standard library, and Snakemake's own list of the
default Snakefile places. fingrav's heavier modules, PyYAML and Snakemake's profile lookup load only for a fingrav
workflow.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

# A line of fingrav's Snakefile (and of a copy of it): a command that runs it has its config files screened by
# `fingrav.preflight.screen_snakemake_command_line` before Snakemake reads them (snakemake_logger_plugin_fingrav)
SNAKEFILE_MARK = "# fingrav-workflow"
MARK_WITHIN_BYTES = 4096  # the mark is looked for in the Snakefile's first 4 KiB


def option_values(
    argv: Sequence[str], option: str, shortest: str, short: str | None = None, many: bool = False
) -> list[str]:
    """The values a command line gives to `option`, a long option, each time it is given: `--option a`,
    `--option=a`, an abbreviation of it from `shortest` on (argparse accepts a unique prefix), and `short`
    (`-s a` or `-sa`). `many`: the option takes several values (nargs='+'), up to the next token that starts with
    '-'; otherwise one (what follows is a target)."""
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
            taking = many
    return values


def configfiles_in(argv: Sequence[str]) -> list[str]:
    """The files a Snakemake command line names with --configfile / --configfiles (or an abbreviation of them, as
    argparse accepts them, and the `--configfile=x` form)."""
    return option_values(argv, "--configfiles", shortest="--configf", many=True)


def profile_files(argv: Sequence[str]) -> list[Path]:
    """The profile files Snakemake reads for a command line started in this process's working directory, found as
    `snakemake.cli.parse_args` and `get_profile_dir` find them: each --profile (else $SNAKEMAKE_PROFILE; `none`:
    none), then the workflow profile (--workflow-profile, else `default`: as given, in profiles/ of the starting
    folder or in profiles/ beside the Snakefile; `none`: none)."""
    from snakemake.cli import get_profile_dir  # Snakemake's lookup: a path, or a name in its config folders

    profiles = option_values(argv, "--profile", shortest="--pro")
    if not profiles and os.environ.get("SNAKEMAKE_PROFILE"):
        profiles = [os.environ["SNAKEMAKE_PROFILE"]]
    names = [n for n in profiles if n != "none"]
    given = option_values(argv, "--workflow-profile", shortest="--wo")
    workflow = given[-1] if given else None
    snakefile = snakefile_of(argv)
    if workflow != "none" and snakefile is not None and (workflow is None or not Path(workflow).is_file()):
        wanted = Path(workflow or "default")
        places = (wanted, Path("profiles") / wanted, snakefile.parent / "profiles" / wanted)
        workflow = next((str(p) for p in places if p.exists()), None)
    if workflow not in (None, "none"):
        names.append(workflow)
    return [entry[1] for entry in map(get_profile_dir, names) if entry is not None]


def profile_configfiles(profile_file: Path) -> list[str]:
    """The config files a profile names (its `configfile` / `configfiles` keys) as Snakemake takes them
    (`snakemake.profiles.ProfileConfigFileParser`: one path with `~` and `$VARS` expanded, relative to the profile's
    folder when it is there; a list as written). None for a profile that is not plain YAML or that is a YTE template
    itself (Snakemake runs its Python to compute its values: what it names is known only then)."""
    import yaml

    try:
        data = yaml.safe_load(profile_file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return []
    if not isinstance(data, dict) or "__use_yte__" in data:
        return []
    files: list[str] = []
    for key in ("configfile", "configfiles"):
        value = data.get(key)
        if isinstance(value, list):
            files.extend(str(v) for v in value)
        elif value is not None:
            path = os.path.expanduser(os.path.expandvars(str(value)))
            files.append(str(profile_file.parent / path) if (profile_file.parent / path).exists() else path)
    return files


def config_files_of(argv: Sequence[str]) -> list[str]:
    """The config files a Snakemake command line has Snakemake read before any code of the Snakefile runs: those it
    names (--configfile) and those its profiles name (`profile_files`, `profile_configfiles`)."""
    files = configfiles_in(argv)
    for profile in profile_files(argv):
        files.extend(f for f in profile_configfiles(profile) if f not in files)
    return files


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
