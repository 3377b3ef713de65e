"""Shared test fixtures: the repository root, a tiny simulated sweep config and a Snakemake runner."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SNAKEFILE = ROOT / "Snakefile"


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
    cmd = [sys.executable, "-m", "snakemake", "-s", str(SNAKEFILE), "-d", str(workdir), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc
