"""experiments/fidelity_matrix.py's draw of late sample stamps: from a generator of its own, in about 30 % of the
sweeps, within its ranges, every other draw as without it."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.testing.experiments import load_experiment

LATE_KEYS = ("sensor_late_every", "sensor_late_ms", "sensor_late_spread_ms", "sensor_late_far_share")


def test_late_stamps_are_drawn_apart_from_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    fm = load_experiment("fidelity_matrix")
    draws = [fm._draw_late_stamps(i) for i in range(400)]
    late = [d for d in draws if d]
    assert len(late) / len(draws) == pytest.approx(0.3, abs=0.06)
    for d in late:
        assert set(d) == set(LATE_KEYS) and isinstance(d["sensor_late_every"], int)
        assert 3 <= d["sensor_late_every"] <= 8 and 0.5 <= d["sensor_late_ms"] <= 5.0
        assert 0 <= d["sensor_late_spread_ms"] <= 0.6 * d["sensor_late_ms"] + 1e-4
        assert 0 <= d["sensor_late_far_share"] <= 0.02
    with_late = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(6)]
    monkeypatch.setattr(fm, "_draw_late_stamps", lambda index: {})
    without = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(6)]
    for a, b, d in zip(with_late, without, draws[:6], strict=True):
        ov = a["device"]["sim"]["overrides"]
        assert {k: v for k, v in ov.items() if k not in LATE_KEYS} == b["device"]["sim"]["overrides"]
        assert {k: ov[k] for k in LATE_KEYS if k in ov} == d
        a["device"]["sim"].pop("overrides"), b["device"]["sim"].pop("overrides")
        assert a == b
