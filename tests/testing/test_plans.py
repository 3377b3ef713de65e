"""`fingrav.testing.plans`: a small valid Plan from a few fields, and the simulated preset's calibration."""

from __future__ import annotations

from fingrav.device.sim.presets import PRESETS
from fingrav.testing.plans import make_plan, sim_calibration


def test_make_plan_fills_what_is_not_given() -> None:
    p = make_plan()
    assert p.executions_per_run == p.ssp_index + p.tail + p.trailing and p.sse_executions_per_run == p.sse_index + 1
    q = make_plan(executions_per_run=10, ssp_index=4, tail=3)
    assert q.trailing == 3 and q.executions_per_run == 10


def test_sim_calibration_is_the_presets_sensor() -> None:
    for name, preset in PRESETS.items():
        cal = sim_calibration(name)
        s = preset.sensors[0]
        assert cal.channels == ["total"]
        assert (cal.total.period_ns, cal.total.window_ns, cal.total.lag_ns) == (s.period_ns, s.window_ns, s.lag_ns)
        assert cal.total.settle_ns >= s.window_ns
