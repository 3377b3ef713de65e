"""Shared test fixtures: the repository root, a tiny simulated sweep config and a Snakemake runner."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = ROOT / "Snakefile"
_SESSION_ENV = dict(os.environ)  # the zygote's environment: the session's, whatever a test sets later


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Test files with a `waits` test first, then those with a `slow` test, then the rest (the order within a file
    and within each of the three kept): the suite runs two files at a time (pytest-xdist, `--dist loadfile
    --no-loadscope-reorder` in pyproject.toml), and a slow file collected last (the SLURM run, whose module sorts
    after tests/stages/) would otherwise end the run alone on one worker; a file that mostly waits on other
    processes goes first, so that the other worker runs the CPU-bound files meanwhile. Every worker collects the
    same order (xdist checks it)."""
    waits = {item.path for item in items if item.get_closest_marker("waits") is not None}
    slow = {item.path for item in items if item.get_closest_marker("slow") is not None}
    items.sort(key=lambda item: (item.path not in waits, item.path not in slow))


def drain_until(drain: Callable[[], Any], instants: int, deadline_s: float = 60.0) -> Any:
    """Call a running power sampler's `drain` every 20 ms until `instants` sample instants (rows of its "total"
    channel) have come; return the drains as one PowerSamples. A count with a generous deadline rather than a
    fixed sleep: the test holds on a loaded machine (two tests at a time, other jobs) and still fails on a sampler
    that stalls."""
    from fingrav.device.base import PowerSamples

    parts: list[PowerSamples] = []
    end = time.monotonic() + deadline_s
    while sum(int((p.channel == "total").sum()) for p in parts) < instants:
        assert time.monotonic() < end, f"fewer than {instants} samples in {deadline_s:.0f} s: {parts}"
        time.sleep(0.02)
        parts.append(drain())
    return PowerSamples.concat(parts)


@pytest.fixture
def repo_root() -> Path:
    return ROOT


def tiny_config(sweep: str = "tiny", preset: str = "mi300x", analysis: dict | None = None, **policy: object) -> dict:
    """A sweep small enough for a full pipeline run in tests (seconds). `policy`: run_policy fields;
    `analysis`: analysis fields (e.g. {"margin": 0.03}: the binning margin is an analysis parameter). A tiny
    sweep's CIs are wide: rows stay valid up to +-5 % (analysis.max_ci_pct) unless the test says otherwise."""
    return {
        "sweep": sweep,
        "seed": 3,
        "device": {"backend": "sim", "sim": {"preset": preset}},
        "calibration": {"steps": 12, "clock_bursts": 4, "clock_reads_per_burst": 20},
        "run_policy": {"mode": "auto", "max_runs": 600, "min_lois": 15, "probe_ms": 200.0, **policy},
        "analysis": {"bootstrap_reps": 200, "max_ci_pct": 5.0, **(analysis or {})},
        "scenarios": [
            {"name": "cb-2k", "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048}},
            {"name": "cb-8k", "kernel": {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192}},
            {
                "name": "cb-2k-after-mb-4k",
                "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048},
                "predecessor": {"count": 40, "kernel": {"kind": "gemv", "m": 4096, "k": 4096}},
            },
        ],
    }


def snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run the pipeline (the repository's Snakefile) with `workdir` as its working directory: results go to
    workdir/results/<sweep>/. check: raise AssertionError with the output's tail when Snakemake fails."""
    proc = run_snakemake(["-s", str(SNAKEFILE), "-d", str(workdir), *args])
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc


def run_snakemake(
    argv: list[str], cwd: Path | None = None, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`python -m snakemake argv` in `cwd` (this process's by default) with `env` (this process's environment by
    default), its output captured: forked from the session's Snakemake zygote (tests/snakemake_zygote.py: Snakemake
    imported once, not once per command), or as a subprocess when the zygote cannot serve it (another PYTHONPATH)
    or is not there."""
    env = dict(os.environ if env is None else env)
    zygote = _Zygote.get()
    if zygote is not None and env.get("PYTHONPATH", "") == zygote.pythonpath:
        proc = zygote.run(argv, cwd or Path.cwd(), timeout, env)
        if proc is not None:
            return proc
    cmd = [sys.executable, "-m", "snakemake", *argv]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


class _Zygote:
    """The session's Snakemake zygote (started on first use, ended with the session: its stdin closes)."""

    _one: _Zygote | None = None
    _failed = False

    def __init__(self) -> None:
        self.pythonpath = _SESSION_ENV.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("snakemake_zygote.py"))],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            bufsize=0,
            cwd=ROOT,
            env=_SESSION_ENV,
        )
        if self._reply(120.0).get("ready") is not True:
            raise OSError("the Snakemake zygote did not start")

    @classmethod
    def get(cls) -> _Zygote | None:
        """The zygote; None when FINGRAV_TEST_NO_ZYGOTE is set (every command a subprocess) or it cannot start."""
        if cls._one is None and not cls._failed and not _SESSION_ENV.get("FINGRAV_TEST_NO_ZYGOTE"):
            try:
                cls._one = cls()
            except (OSError, ValueError):
                cls._failed = True
        return cls._one

    def _reply(self, timeout: float) -> dict:
        """The zygote's next reply line (read unbuffered, so that select sees what is not yet read)."""
        line = b""
        fd = self.proc.stdout.fileno()
        while not line.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                raise TimeoutError("no reply from the Snakemake zygote")
            chunk = os.read(fd, 1)
            if not chunk:
                raise OSError("the Snakemake zygote has gone")
            line += chunk
        return json.loads(line)

    def run(
        self, argv: list[str], cwd: Path, timeout: float, env: dict[str, str]
    ) -> subprocess.CompletedProcess | None:
        """One command through the zygote; None when the zygote has gone (the caller runs a subprocess)."""
        with tempfile.TemporaryDirectory(prefix="smk-") as tmp:
            out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
            req = {"argv": list(argv), "cwd": str(cwd), "env": env, "stdout": str(out), "stderr": str(err)}
            try:
                self.proc.stdin.write(json.dumps(req).encode() + b"\n")
                pid = self._reply(60.0)["pid"]
            except (OSError, ValueError, KeyError):
                type(self)._one, type(self)._failed = None, True
                return None
            try:
                rc = self._reply(timeout)["rc"]
            except TimeoutError:  # as subprocess.run's timeout: the command is killed, TimeoutExpired raised
                os.killpg(pid, signal.SIGKILL)
                self._reply(60.0)
                raise subprocess.TimeoutExpired(["snakemake", *argv], timeout) from None
            return subprocess.CompletedProcess(["snakemake", *argv], rc, out.read_text(), err.read_text())
