"""Small `Plan`s for tests: every required field at a small default, the given ones on top."""

from __future__ import annotations

from typing import Any

from fingrav.contracts.calibration import Calibration
from fingrav.contracts.plan import Plan
from fingrav.contracts.sensor import PlanSensor, SensorModel


def make_plan(**kw: Any) -> Plan:
    """A Plan with the given fields, the rest at small defaults (trailing: what executions_per_run leaves)."""
    f: dict[str, Any] = {
        "exec_time_ns": 100_000,
        "cycle_ns": 100_000,
        "warmups": 1,
        "sse_index": 1,
        "ssp_index": 2,
        "tail": 1,
        "runs": 1,
        "sse_runs": 0,
        "idle_ns": 1_000_000,
        "delay_max_ns": 1_000_000,
        "lois_wanted": 30,
        "sensor": PlanSensor(period_ns=20_000, delay_ns=0, window_ns=1_000, lag_ns=0, settle_ns=0),
        **kw,
    }
    f.setdefault("sse_executions_per_run", f["sse_index"] + 1)
    if "executions_per_run" in f:
        f.setdefault("trailing", f["executions_per_run"] - f["ssp_index"] - f["tail"])
    f.setdefault("trailing", 0)
    f.setdefault("executions_per_run", f["ssp_index"] + f["tail"] + f["trailing"])
    return Plan(**f)


def sim_calibration(preset: str = "mi300x") -> Calibration:
    """A calibration with a simulated preset's true total sensor (no fit): for collect tests that skip calibrate."""
    from fingrav.device.sim.presets import PRESETS

    ms = 1_000_000.0
    s = PRESETS[preset].sensors[0]
    total = SensorModel(
        period_ns=s.period_ns,
        delay_ns=s.delay_ns,
        window_ns=s.window_ns,
        lag_ns=s.lag_ns,
        settle_ns=s.window_ns + 5 * s.lag_ns + 0.3 * ms,
        noise_mw=s.noise_mw,
    )
    return Calibration(clock={"offset_ns": 0.0, "gpu_ref_ns": 0}, sensor={"total": total}, channels=["total"], steps={})
