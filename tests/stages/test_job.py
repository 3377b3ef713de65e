"""`fingrav.stages.job`: a stage job from its command line; a known problem is one logged message and status 1, a
bug its traceback in the stage's log and status 1, success status 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav.errors import DataError
from fingrav.stages import STAGES
from fingrav.stages.job import parser, run_stage


def test_parser_knows_every_stage() -> None:
    args = parser().parse_args(["bin", "--log", "x.log", "--params", "{}"])
    assert (args.stage, args.log, args.params) == ("bin", "x.log", "{}")
    with pytest.raises(SystemExit):
        parser().parse_args(["nonsense", "--log", "x", "--params", "{}"])
    assert {"calibrate", "collect", "bin", "differentiate", "report"} <= set(STAGES)


def _run(monkeypatch, tmp_path: Path, behaviour) -> tuple[int, str]:
    import fingrav.stages.bin as stage

    monkeypatch.setattr(stage, "from_params", behaviour)
    log = tmp_path / "bin.log"
    status = run_stage(["bin", "--log", str(log), "--params", json.dumps({"x": 1})])
    return status, log.read_text()


def test_success_failure_and_bug(monkeypatch, tmp_path: Path) -> None:
    seen = []
    status, _ = _run(monkeypatch, tmp_path, seen.append)
    assert status == 0 and seen == [{"x": 1}]

    def known(p):
        raise DataError("the raw file is damaged")

    status, text = _run(monkeypatch, tmp_path, known)
    assert status == 1 and "bin: the raw file is damaged" in text and "Traceback" not in text

    def bug(p):
        raise KeyError("oops")

    status, text = _run(monkeypatch, tmp_path, bug)
    assert status == 1 and "bin failed" in text and "Traceback" in text and "KeyError" in text
