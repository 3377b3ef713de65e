"""experiments/fidelity_matrix.py's draw of late sample stamps: from a generator of its own, in about 30 % of the
sweeps, within its ranges, every other draw as without it."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.testing.experiments import load_experiment

LATE_KEYS = ("sensor_late_every", "sensor_late_ms", "sensor_late_spread_ms", "sensor_late_far_share")


def test_late_stamps_are_drawn_apart_from_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    fm = load_experiment("fidelity_matrix")
    draws = [fm._draw_late_stamps(i, 20.0) for i in range(400)]
    late = [d for d in draws if d]
    assert len(late) / len(draws) == pytest.approx(0.3, abs=0.06)
    for d in late:
        assert set(d) == set(LATE_KEYS) and isinstance(d["sensor_late_every"], int)
        assert 3 <= d["sensor_late_every"] <= 8 and 0.5 <= d["sensor_late_ms"] <= 5.0  # 2.5-25 % of the 20 ms period
        assert 0 <= d["sensor_late_spread_ms"] <= 0.6 * d["sensor_late_ms"] + 1e-4
        assert 0 <= d["sensor_late_far_share"] <= 0.02
    with_late = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(6)]
    monkeypatch.setattr(fm, "_draw_late_stamps", lambda index, period_ms: {})
    without = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(6)]
    for a, b, d in zip(with_late, without, draws[:6], strict=True):
        ov = a["device"]["sim"]["overrides"]
        assert {k: v for k, v in ov.items() if k not in LATE_KEYS} == b["device"]["sim"]["overrides"]
        same = ("sensor_late_every", "sensor_late_far_share")  # not scaled with the drawn period
        assert {k: ov[k] for k in same if k in ov} == {k: d[k] for k in same if k in d}
        if d:  # the lateness: the same share of the sweep's own period
            share = d["sensor_late_ms"] / 20.0
            assert ov["sensor_late_ms"] / ov["sensor_period_ms"] == pytest.approx(share, rel=0.01, abs=1e-3)
        a["device"]["sim"].pop("overrides"), b["device"]["sim"].pop("overrides")
        assert a == b


def test_acquire_jitter_is_drawn_apart_from_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The acquisition jitter (`_draw_acquire_jitter`): in about 30 % of the sweeps, 0.5-5 % of the drawn period, from
    a generator of its own (every other draw as without it)."""
    fm = load_experiment("fidelity_matrix")
    draws = [fm._draw_acquire_jitter(i, 20.0) for i in range(400)]
    drawn = [d["sensor_acquire_jitter_ms"] for d in draws if d]
    assert len(drawn) / len(draws) == pytest.approx(0.3, abs=0.06)
    assert min(drawn) >= 0.1 - 1e-4 and max(drawn) <= 1.0 + 1e-4 and np.std(drawn) > 0.15
    with_j = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(8)]
    monkeypatch.setattr(fm, "_draw_acquire_jitter", lambda index, period_ms: {})
    without = [fm.draw_sweep(np.random.default_rng(5), i, 2) for i in range(8)]
    for a, b in zip(with_j, without, strict=True):
        ov = dict(a["device"]["sim"]["overrides"])
        ov.pop("sensor_acquire_jitter_ms", None)
        assert ov == b["device"]["sim"]["overrides"]
        a["device"]["sim"].pop("overrides"), b["device"]["sim"].pop("overrides")
        assert a == b
