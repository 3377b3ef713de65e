"""`fingrav.stages.worker`: the message framing with passed file descriptors, the source stamp, and a job run in a
worker end to end (the worker it starts exits by itself after `IDLE_S` seconds without a job)."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from fingrav.stages import worker


def test_messages_and_file_descriptors_cross_the_socket(tmp_path: Path) -> None:
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    f = tmp_path / "x.txt"
    f.write_text("hello")
    with a, b, open(f) as fh:
        worker._send(a, {"argv": ["bin"], "n": 1}, [fh.fileno()])
        msg, fds = worker._recv(b, with_fds=1)
        assert msg == {"argv": ["bin"], "n": 1} and len(fds) == 1
        with os.fdopen(fds[0]) as got:
            assert got.read() == "hello"
        worker._send(a, {"big": "y" * 200_000})  # longer than one recv
        assert worker._recv(b)[0] == {"big": "y" * 200_000}
        a.shutdown(socket.SHUT_WR)
        assert worker._recv(b) == (None, [])  # the peer went away


def test_source_stamp_and_socket_path(tmp_path: Path) -> None:
    s = worker.source_stamp()
    assert s == worker.source_stamp() and len(s) == 16 and int(s, 16) >= 0
    assert worker.socket_path(str(tmp_path)).parent == tmp_path / ".snakemake"


def test_no_worker_when_turned_off(monkeypatch) -> None:
    monkeypatch.setenv("FINGRAV_NO_WORKER", "1")
    assert worker.run_via_worker(["bin", "--log", "x", "--params", "{}"]) is None


def test_a_job_runs_in_a_worker_and_reports_its_status(tmp_path: Path, monkeypatch) -> None:
    if not hasattr(socket, "AF_UNIX"):
        pytest.skip("no UNIX sockets here")
    monkeypatch.delenv("FINGRAV_NO_WORKER", raising=False)
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "logs" / "bin.log"
    params = {"root": str(tmp_path / "results" / "x"), "scenario": "nope", "rank": 0, "analysis": {}}
    status = worker.run_via_worker(["bin", "--log", str(log), "--params", json.dumps(params)])
    assert status == 1  # the stage failed: no raw data
    assert "bin:" in log.read_text() and "nope" in log.read_text()
    assert worker.socket_path().exists()  # the worker listens until it has been idle for IDLE_S


@pytest.mark.parametrize("worker_on", [True, False])
def test_the_analysis_rules_client_starts_without_site_packages(tmp_path: Path, worker_on: bool) -> None:
    """The analysis rules' shell line (`fingrav.stages.rule_command`: `python -S`) runs the stage through the
    worker, and in its own process (site-packages loaded then) when there is no worker; a GPU stage's line is
    `python -m fingrav.stages` as before."""
    import shlex
    import subprocess
    import sys

    from fingrav.stages import rule_command

    assert rule_command("collect", sys.executable).startswith(f"{shlex.quote(sys.executable)} -m fingrav.stages ")
    line = rule_command("bin", sys.executable)
    assert " -S -c " in line
    log, params = tmp_path / "logs" / "bin.log", tmp_path / "params.json"
    job = {"root": str(tmp_path / "results" / "x"), "scenario": "nope", "rank": 0, "analysis": {}}
    params.write_text(json.dumps(job))
    line = line.replace("{log:q}", shlex.quote(str(log))).replace("{params.file:q}", shlex.quote(str(params)))
    env = {k: v for k, v in os.environ.items() if k != "FINGRAV_NO_WORKER"}
    if not worker_on:
        env["FINGRAV_NO_WORKER"] = "1"
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr  # the stage ran and failed: no raw data
    assert "bin:" in log.read_text() and "nope" in log.read_text()
    assert worker.socket_path(str(tmp_path)).exists() == worker_on
