"""`fingrav gpu-sweep` resumes where it stopped and never deletes an earlier measurement."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import tiny_config

from fingrav.cli import main


@pytest.mark.slow
def test_gpu_sweep_resumes_and_archives(tmp_path: Path) -> None:
    data = tiny_config(sweep="cli", max_runs=60)
    data["scenarios"] = data["scenarios"][:2]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    raw = out / "raw" / "gpu0"
    stamps = {p: p.stat().st_mtime_ns for p in raw.rglob("*.parquet")}
    # a rerun keeps everything: calibration and both scenarios are complete and by this config
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    assert {p: p.stat().st_mtime_ns for p in raw.rglob("*.parquet")} == stamps
    assert not (out / "archive").exists()
    # an interrupted (damaged) collection is moved aside and measured again
    victim = raw / "cb-8k" / "samples.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    archived = list((out / "archive").glob("cb-8k-*"))
    assert len(archived) == 1 and (archived[0] / "samples.parquet").stat().st_size == 100
    assert (raw / "cb-8k" / "MANIFEST.json").exists() and victim.stat().st_size > 100
    assert (raw / "cb-2k" / "samples.parquet").stat().st_mtime_ns == stamps[raw / "cb-2k" / "samples.parquet"]
    # a changed collection parameter re-measures, and the earlier raw data is kept in the archive
    data["run_policy"]["max_runs"] = 50
    cfg.write_text(yaml.safe_dump(data))
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    assert len(list((out / "archive").glob("cb-2k-*"))) == 1 and len(list((out / "archive").glob("cb-8k-*"))) == 2


def test_version_and_one_argument_style(capsys) -> None:
    """`fingrav --version`; every subcommand that reads a sweep config takes it as --config."""
    from fingrav.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("fingrav ")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    for name in ("validate", "calibrate", "collect", "gpu-sweep", "export"):
        opts = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert "--config" in opts, name
    assert main(["validate", "--config", "config/config.yaml"]) == 0
