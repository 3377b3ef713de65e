"""What a Snakemake command line names, read before Snakemake parses it (fingrav/snakemake_argv.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fingrav.snakemake_argv import (
    SNAKEFILE_MARK,
    config_files_of,
    configfiles_in,
    is_fingrav_command,
    is_fingrav_snakefile,
    profile_configfiles,
    profile_files,
    snakefile_of,
)

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("argv", "files"),
    [
        (["-n", "--configfile", "a.yaml", "--cores", "1"], ["a.yaml"]),
        (["--configfiles", "a.yaml", "b.yaml", "-n"], ["a.yaml", "b.yaml"]),
        (["--configfile=a.yaml", "-n"], ["a.yaml"]),
        (["--configfiles=a.yaml", "t"], ["a.yaml"]),
        (["--configfil", "a.yaml"], ["a.yaml"]),  # an abbreviation (argparse calls it ambiguous): screened anyway
        (["--config", "sweep=x", "-n"], []),  # values, not files
        (["-s", "Snakefile", "x.yaml"], []),  # a target, not a config file
        (["--configfile", "a.yaml", "-s", "S", "t"], ["a.yaml"]),
    ],
)
def test_config_files_on_a_snakemake_command_line(argv: list[str], files: list[str]) -> None:
    assert configfiles_in(argv) == files


@pytest.mark.parametrize(
    ("argv", "snakefile"),
    [
        (["-s", "w/Snakefile", "-n"], "w/Snakefile"),
        (["-sw/Snakefile"], "w/Snakefile"),
        (["--snakefile=w/Snakefile"], "w/Snakefile"),
        (["--snakef", "w/Snakefile"], "w/Snakefile"),  # an abbreviation argparse accepts
        (["-s", "a", "-n", "--snakefile", "w/Snakefile"], "w/Snakefile"),  # the last one counts, as for argparse
        (["-s", "w/Snakefile", "target"], "w/Snakefile"),  # one value: then a target
        (["-n", "--configfile", "c.yaml"], "workflow/Snakefile"),  # none given: Snakemake's default places
    ],
)
def test_the_snakefile_of_a_command_line(tmp_path: Path, argv: list[str], snakefile: str) -> None:
    (tmp_path / "workflow").mkdir()
    (tmp_path / "workflow" / "Snakefile").write_text("rule all:\n")
    assert snakefile_of(argv, tmp_path) == tmp_path / snakefile


def test_no_snakefile_or_a_remote_one_is_not_fingrav(tmp_path: Path) -> None:
    assert snakefile_of(["-n"], tmp_path) is None
    assert snakefile_of(["-s", "https://example.org/Snakefile"], tmp_path) is None
    assert not is_fingrav_command(["-n"], tmp_path)
    assert not is_fingrav_command(["-s", "missing/Snakefile"], tmp_path)


def test_fingrav_workflow_is_known_by_its_snakefile_mark(tmp_path: Path) -> None:
    """fingrav's Snakefile (and a copy of it) carries the mark; another workflow does not."""
    assert is_fingrav_snakefile(ROOT / "Snakefile")
    assert is_fingrav_command(["-s", str(ROOT / "Snakefile")], tmp_path)
    assert is_fingrav_command([], ROOT)  # the Snakefile of the folder the command starts in
    (tmp_path / "Snakefile").write_text("rule all:\n    input: 'fingrav.txt'\n")
    assert not is_fingrav_command([], tmp_path)
    (tmp_path / "Snakefile").write_text(f"# my copy\n{SNAKEFILE_MARK}: copied\nrule all:\n")
    assert is_fingrav_command([], tmp_path)


@pytest.fixture
def workflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder to start Snakemake in, with a copy of fingrav's Snakefile, its profiles/default, and a profile of
    the user's own (own/) that names a config file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SNAKEMAKE_PROFILE", raising=False)
    (tmp_path / "Snakefile").write_text((ROOT / "Snakefile").read_text())
    (tmp_path / "profiles" / "default").mkdir(parents=True)
    (tmp_path / "profiles" / "default" / "config.yaml").write_text("cores: 1\n")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "config.yaml").write_text("cores: 2\nconfigfile: mine.yaml\n")
    (tmp_path / "own" / "mine.yaml").write_text("sweep: s\n")
    return tmp_path


def test_the_profiles_snakemake_reads(workflow: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As snakemake.cli.parse_args: --profile (or $SNAKEMAKE_PROFILE), then the workflow profile (profiles/default
    unless another or `none` is named)."""
    default = Path("profiles/default/config.yaml")
    own = Path("own/config.yaml")
    assert profile_files(["-n"]) == [default]
    assert profile_files(["-n", "--workflow-profile", "none"]) == []
    assert profile_files(["--profile", "own", "-n"]) == [own, default]
    assert profile_files(["--workflow-profile", "own"]) == [own]
    assert profile_files(["--profile", "none", "--workflow-profile", "none"]) == []
    monkeypatch.setenv("SNAKEMAKE_PROFILE", "own")
    assert profile_files(["--workflow-profile=none"]) == [own]
    assert profile_files(["--profile", "none", "--workflow-profile=none"]) == []  # the command line wins


def test_config_files_named_by_a_profile(workflow: Path) -> None:
    """A profile's configfile is relative to the profile's folder when it is there (as Snakemake takes it); a
    profile that is itself a YTE template names nothing that can be known before Snakemake runs it."""
    assert profile_configfiles(Path("own/config.yaml")) == ["own/mine.yaml"]
    assert config_files_of(["--profile", "own", "--configfile", "c.yaml"]) == ["c.yaml", "own/mine.yaml"]
    (workflow / "own" / "config.yaml").write_text("configfiles: [a.yaml, b.yaml]\nconfigfile: $HOME/c.yaml\n")
    assert profile_configfiles(Path("own/config.yaml")) == [str(Path.home() / "c.yaml"), "a.yaml", "b.yaml"]
    (workflow / "own" / "config.yaml").write_text("__use_yte__: true\nconfigfile: ?'x.yaml'\n")
    assert profile_configfiles(Path("own/config.yaml")) == []
    (workflow / "own" / "config.yaml").write_text("a: [\n")
    assert profile_configfiles(Path("own/config.yaml")) == []
