"""What the GPU's own telemetry says about each kind of run (raw telemetry.parquet, `contracts.tables`): clocks
before and after, how many runs ended with a power / thermal clock-event reason active, and how long the
limiter counters ran during the runs (NVML violation counters, ns; amdsmi accumulators in their own unit)."""

from __future__ import annotations

import json
import logging

import polars as pl

from fingrav.contracts.profile import PhaseTelemetry

logger = logging.getLogger(__name__)


def telemetry_summary(telemetry: pl.DataFrame) -> dict[str, PhaseTelemetry]:
    """{phase: {runs, sm_mhz_before_median, sm_mhz_after_median, mem_mhz_after_median, runs_ending_with_reason:
    {name: count}, counters_during: {counter: total increase over the phase's runs}, counter_unit, read_ns_median}}."""
    out: dict[str, PhaseTelemetry] = {}
    for phase in sorted(telemetry["phase"].unique().to_list()):
        sub = telemetry.filter(pl.col("phase") == phase)
        before = sub.filter(pl.col("when") == "before").sort("run")
        after = sub.filter(pl.col("when") == "after").sort("run")
        reasons: dict[str, int] = {}
        for names in after["reason_names"].to_list():
            for n in filter(None, (names or "").split(";")):
                reasons[n] = reasons.get(n, 0) + 1
        during: dict[str, int] = {}
        pairs = before.join(after, on="run", suffix="_after")
        for b, a in zip(pairs["violation_json"].to_list(), pairs["violation_json_after"].to_list(), strict=True):
            vb, va = json.loads(b or "{}"), json.loads(a or "{}")
            for k, v in va.items():
                if k in vb:
                    during[k] = during.get(k, 0) + int(v) - int(vb[k])
        out[phase] = PhaseTelemetry(
            runs=int(after.height),
            sm_mhz_before_median=before["sm_mhz"].median(),
            sm_mhz_after_median=after["sm_mhz"].median(),
            mem_mhz_after_median=after["mem_mhz"].median(),
            runs_ending_with_reason=reasons,
            counters_during=during,
            counter_unit=after["violation_unit"][0] if after.height else None,
            read_ns_median=sub["read_ns"].median(),
        )
    return out
