"""Small `Plan`s for tests: every required field at a small default, the given ones on top."""

from __future__ import annotations

from typing import Any

from fingrav.contracts.plan import Plan
from fingrav.contracts.sensor import PlanSensor


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
