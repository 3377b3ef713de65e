"""A fixed-seed slice of experiments/fidelity_matrix.py: randomly drawn simulated GPUs through the real stages,
held to the same acceptance criteria as the full matrix (experiments/RESULTS.md)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fingrav.testing.experiments import load_experiment

ROOT = Path(__file__).resolve().parents[2]


def _matrix():
    return load_experiment("fidelity_matrix")


@pytest.mark.slow
def test_fidelity_slice() -> None:
    fm = _matrix()
    rng = np.random.default_rng(20261201)
    rows = [r for i in range(3) for r in fm.run_sweep(fm.draw_sweep(rng, i, 2))]
    assert not [r for r in rows if "error" in r]
    s = fm.summarize(rows)
    assert s["silently_wrong"] == 0
    for r in rows:
        if r["valid"]:
            assert abs(r["power_vs_truth_pct"]) <= 2.0, r
            assert abs(r["energy_per_exec_vs_truth_pct"]) <= 2.0, r
