"""fingrav's Snakemake logger plugin: its import screens the config files of a Snakemake command that runs
fingrav's workflow, before Snakemake reads any of them, whatever profile is named.

Snakemake renders a YAML config file that sets `__use_yte__` as a YTE template, evaluating the Python in it while
it loads the file, even for a dry run, and before any code of the Snakefile runs. Snakemake imports every installed
logger plugin (a top-level package named `snakemake_logger_plugin_*`, found by `pkgutil.iter_modules`) when it
builds its argument parser, which is the first thing `snakemake` does: before it reads the profiles (the workflow
profile, `--workflow-profile none`, `--profile`, a user's own) and the config files. So importing this package
runs `fingrav.preflight.screen_snakemake_command_line` over the command line (the config files it names and those
its profiles name): a refused file stops Snakemake with one line, no traceback. Only for fingrav's workflow
(`fingrav.snakemake_argv.is_fingrav_command`: the Snakefile that the command runs carries `# fingrav-workflow`);
any other workflow in the environment keeps Snakemake's YTE. The screen reads `sys.argv`:
`snakemake.cli.main(argv)` called from Python with another argv is not screened (the Snakefile still refuses a
YTE file, after Snakemake has rendered it).

It is a complete logger plugin too (snakemake-interface-logger-plugins 2.x): `snakemake --logger fingrav` writes
Snakemake's console lines to stderr as plain text, without colors.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from logging import LogRecord

from snakemake_interface_logger_plugins.base import LogHandlerBase


def screen_command_line(argv: Sequence[str] | None = None) -> None:
    """Screen the config files of a Snakemake command line (`sys.argv[1:]` by default) when it runs fingrav's
    workflow; SystemExit with one line when one is refused."""
    from fingrav.snakemake_argv import is_fingrav_command

    args = list(sys.argv[1:] if argv is None else argv)
    if is_fingrav_command(args):
        from fingrav.preflight import screen_snakemake_command_line

        screen_snakemake_command_line(args)


class LogHandler(LogHandlerBase):
    """`--logger fingrav`: each of Snakemake's log lines (its default filter and formatter) on stderr, uncolored."""

    def emit(self, record: LogRecord) -> None:
        try:
            line = self.format(record)
            if line and line != "None":  # Snakemake's formatter gives nothing for records it does not show
                sys.stderr.write(line + "\n")
                sys.stderr.flush()
        except Exception:  # as logging.StreamHandler: a failing record is reported, never raised
            self.handleError(record)

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return False

    @property
    def has_formatter(self) -> bool:
        return False

    @property
    def needs_rulegraph(self) -> bool:
        return False


screen_command_line()  # on import: Snakemake's plugin registry imports this before it reads any config file
