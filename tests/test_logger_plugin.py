"""fingrav's Snakemake logger plugin (snakemake_logger_plugin_fingrav): Snakemake finds it in this environment (as
installed by the README: `pip install -e .`) and imports it before it reads any profile or config file, so a config
file that would have Snakemake evaluate Python (YTE) is refused whatever profile is named, and whether the command
line or a profile names it; other workflows keep Snakemake's YTE. Each command here is a fresh `python -m snakemake`
process (not the tests' zygote): the plugin is imported as a real command imports it."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
REFUSAL = "fingrav refuses the config file before Snakemake reads it: "


def fresh(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """A command in a new interpreter, with this session's environment, started in `cwd`."""
    return subprocess.run(
        [sys.executable, *argv], cwd=cwd, env=dict(os.environ), capture_output=True, text=True, timeout=300
    )


def yte_config(folder: Path) -> tuple[Path, Path]:
    """A sweep config whose YTE code would create a marker file: (config, marker)."""
    marker = folder / "evaluated"
    path = folder / "yte.yaml"
    path.write_text(
        "__use_yte__: true\nsweep: s\n"
        f"seed: ?__import__('pathlib').Path({str(marker)!r}).touch() or 1\n"
        "scenarios:\n  - {name: a, kernel: {kind: gemm, m: 64, n: 64, k: 64}}\n"
    )
    return path, marker


def test_snakemake_finds_the_plugin_in_this_environment(tmp_path: Path) -> None:
    """Snakemake's registry lists top-level packages with pkgutil.iter_modules (not import hooks) and validates
    them: the plugin must be found from any folder, not only from the repository."""
    code = (
        "from snakemake_interface_logger_plugins.registry import LoggerPluginRegistry as R\n"
        "import snakemake_logger_plugin_fingrav as p\n"
        "assert R().plugins['fingrav'].log_handler is p.LogHandler, R().plugins\n"
        "print(p.__file__)\n"
    )
    proc = fresh(["-c", code], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert Path(proc.stdout.strip()).parent.parent == ROOT


@pytest.mark.slow
@pytest.mark.parametrize(
    "profile",
    [
        [],  # the workflow's own (profiles/default)
        ["--workflow-profile", "none"],
        ["--workflow-profile", str(ROOT / "profiles" / "slurm")],
        ["--workflow-profile", "{own}"],
    ],
)
def test_a_yte_config_is_refused_whatever_profile_is_named(tmp_path: Path, profile: list[str]) -> None:
    own = tmp_path / "own"  # a profile of the user's own
    own.mkdir()
    (own / "config.yaml").write_text("cores: 1\nprintshellcmds: true\n")
    config, marker = yte_config(tmp_path)
    argv = ["-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n"]
    proc = fresh([*argv, *(p.format(own=own) for p in profile), "--configfile", config.name], tmp_path)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1, out
    assert out.splitlines()[-1].startswith(REFUSAL) and "YTE templates are not allowed" in out, out
    assert str(config.name) in out.splitlines()[-1]
    assert "Traceback" not in out and "Building DAG" not in out, out
    assert not marker.exists(), "Snakemake evaluated the config file's Python"
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
@pytest.mark.parametrize("option", ["--profile", "--workflow-profile"])
def test_a_yte_config_named_by_a_profile_is_refused(tmp_path: Path, option: str) -> None:
    """A profile of the user's own that names the config file (`configfile:`, relative to the profile's folder)."""
    own = tmp_path / "own"
    own.mkdir()
    config, marker = yte_config(own)
    (own / "config.yaml").write_text(f"cores: 1\nconfigfile: {config.name}\n")
    argv = ["-m", "snakemake", "-s", str(ROOT / "Snakefile"), "-d", str(tmp_path), "-n", option, "own"]
    proc = fresh(argv, tmp_path)
    out = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 1 and out.splitlines()[-1].startswith(REFUSAL + "own/yte.yaml: "), out
    assert not marker.exists()


@pytest.mark.slow
def test_the_workflow_of_the_starting_folder_is_screened(tmp_path: Path) -> None:
    """No -s: Snakemake runs the Snakefile of the folder the command starts in (here fingrav's, linked)."""
    (tmp_path / "Snakefile").symlink_to(ROOT / "Snakefile")
    config, marker = yte_config(tmp_path)
    proc = fresh(["-m", "snakemake", "-n", "--workflow-profile", "none", "--configfile", str(config)], tmp_path)
    assert proc.returncode == 1 and (proc.stdout + proc.stderr).strip().splitlines()[-1].startswith(REFUSAL)
    assert not marker.exists()


@pytest.mark.slow
def test_another_workflow_keeps_snakemakes_yte(tmp_path: Path) -> None:
    """The plugin is imported for every Snakemake command in the environment: it leaves other workflows alone."""
    (tmp_path / "Snakefile").write_text(
        'rule all:\n    output: "out.txt"\n    run:\n        open(output[0], "w").write(str(config["x"]))\n'
    )
    marker = tmp_path / "evaluated"
    yte = f"x: ?__import__('pathlib').Path({str(marker)!r}).touch() or 42\n"
    (tmp_path / "c.yaml").write_text(f"__use_yte__: true\n{yte}")
    proc = fresh(["-m", "snakemake", "-n", "--cores", "1", "--configfile", "c.yaml"], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert marker.exists(), "the config file was not rendered by YTE"  # while Snakemake loaded it, for a dry run


def test_the_plugin_is_a_plain_console_logger(capsys: pytest.CaptureFixture[str]) -> None:
    """`snakemake --logger fingrav`: Snakemake's lines (its formatter) on stderr, uncolored; none for an empty one."""
    from snakemake_logger_plugin_fingrav import LogHandler

    handler = LogHandler(SimpleNamespace(), None)
    handler.setFormatter(logging.Formatter("%(message)s"))
    assert handler.writes_to_stream and not handler.writes_to_file and not handler.needs_rulegraph
    for msg in ("Building DAG of jobs...", ""):
        handler.emit(logging.LogRecord("snakemake", logging.INFO, __file__, 1, msg, None, None))
    assert capsys.readouterr().err == "Building DAG of jobs...\n"
