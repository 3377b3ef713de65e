"""Shared test fixtures: the repository root and a tiny simulated sweep config."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo_root() -> Path:
    return ROOT


def tiny_config(sweep: str = "tiny", preset: str = "mi300x", **policy: object) -> dict:
    """A sweep small enough for a full pipeline run in tests (seconds)."""
    return {
        "sweep": sweep,
        "seed": 3,
        "device": {"backend": "sim", "sim": {"preset": preset}},
        "calibration": {"steps": 12, "clock_bursts": 4, "clock_reads_per_burst": 20},
        "run_policy": {"mode": "auto", "max_runs": 600, "min_lois": 15, "probe_ms": 200.0, **policy},
        "analysis": {"bootstrap_reps": 200},
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
