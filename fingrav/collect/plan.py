"""The collection plan: how many runs, executions per run and idle time, from METHOD.md's guidance
table, the measured sensor (calibration) and the stability probe.

GPU-side module (numpy + stdlib). All times in ns.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

METHOD_MIN_EXEC_NS = 25_000

# (upper bound of kernel time ns, runs, LOI spacing ns, margin): METHOD.md's guidance table
GUIDANCE: tuple[tuple[float, int, int, float], ...] = (
    (50_000, 400, 5_000, 0.05),
    (200_000, 200, 10_000, 0.05),
    (1_000_000, 200, 10_000, 0.02),
    (math.inf, 200, 10_000, 0.02),
)


def guidance(exec_time_ns: float) -> tuple[int, int, float]:
    """(runs, LOI spacing in ns, binning margin) for a kernel of `exec_time_ns` (METHOD.md table).
    Kernels shorter than 25 us use the first row (and are flagged by the analysis)."""
    for upper, runs, spacing, margin in GUIDANCE:
        if exec_time_ns < upper:
            return runs, spacing, margin
    raise AssertionError("unreachable")


@dataclass
class ProbeResult:
    """What the stability probe saw on the "total" channel (host clock, relative to the busy start).

    t_stable_ns: first time after which the sensor output stays within the tolerance of its final level;
    t_recover_ns: time after the busy end until the output is back within tolerance of idle;
    settled: whether the output was stable over the last part of the probe."""

    busy_ns: int
    executions: int
    idle_level_mw: float
    level_mw: float
    peak_mw: float
    tol_mw: float
    t_stable_ns: int
    t_recover_ns: int
    settled: bool
    samples: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def analyze_probe(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    busy_start_ns: int,
    busy_end_ns: int,
    executions: int,
    tol_pct: float,
    noise_mw: float = 0.0,
    cycle_ns: int = 0,
) -> ProbeResult:
    """Find when the sensor output of a long back-to-back run stops changing, and how long it takes to
    return to idle after the run (METHOD.md step 4: the execution count after which power is stable).

    A fast sensor resolves the power shape inside each execution; the output is therefore smoothed with
    a moving mean over at least eight execution cycles (and >= 3 samples) before judging stability."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    order = np.argsort(t)
    t, p = t[order], p[order]
    before = p[t < busy_start_ns]
    busy = (t >= busy_start_ns) & (t <= busy_end_ns)
    after = t > busy_end_ns
    tb, pb = t[busy] - busy_start_ns, p[busy]
    if len(pb) < 4:
        raise ValueError(f"stability probe has only {len(pb)} samples inside its busy time; make probe_ms longer")
    idle_level = float(np.median(before)) if len(before) else float(np.min(p))
    period = float(np.median(np.diff(t))) if len(t) > 2 else 1.0
    k = max(3, int(np.ceil(8 * cycle_ns / max(period, 1.0))))
    k = min(k, max(3, len(pb) // 4))
    smooth = _moving_mean(pb, k)
    tail = smooth[int(len(pb) * 0.75) :]
    level = float(np.median(tail))
    # tolerance: the configured fraction of the level, but never below the sensor's own scatter
    scatter = float(np.median(np.abs(tail - level))) * 1.4826 if len(tail) > 2 else 0.0
    tol = max(level * tol_pct / 100.0, 3.0 * noise_mw, 3.0 * scatter)
    outside = np.abs(smooth - level) > tol
    # stable from the first sample after which at most 5 % of the (smoothed) samples stray outside the
    # tolerance, so that one noisy sample near the end does not void a settled run
    frac_after = np.cumsum(outside[::-1])[::-1] / np.arange(len(outside), 0, -1)
    ok = (frac_after <= 0.05) & ~outside
    first_ok = int(np.argmax(ok)) if ok.any() else len(pb) - 1
    t_stable = int(tb[first_ok])
    # settled: the level was reached before the last quarter and does not drift over the second half
    q = len(pb) // 4
    drift = abs(float(np.mean(smooth[-q:])) - float(np.mean(smooth[-2 * q : -q]))) if q >= 1 else 0.0
    settled = ok.any() and first_ok < len(pb) - max(2, q) and drift <= tol
    ta, pa = t[after] - busy_end_ns, p[after]
    t_recover = int(ta[-1]) if len(ta) else 0
    if len(pa):
        idle_tol = max(abs(level - idle_level) * tol_pct / 100.0, 3.0 * noise_mw, 3.0 * scatter)
        away = np.abs(_moving_mean(pa, k) - idle_level) > idle_tol
        if away.any():
            last = int(np.nonzero(away)[0][-1])
            t_recover = int(ta[min(last + 1, len(ta) - 1)])
        else:
            t_recover = int(ta[0])
    return ProbeResult(
        busy_ns=int(busy_end_ns - busy_start_ns),
        executions=executions,
        idle_level_mw=idle_level,
        level_mw=level,
        peak_mw=float(pb.max()),
        tol_mw=tol,
        t_stable_ns=t_stable,
        t_recover_ns=t_recover,
        settled=bool(settled),
        samples=int(len(pb)),
    )


def _moving_mean(x: np.ndarray, k: int) -> np.ndarray:
    """Centered moving mean over k samples (edges padded with the edge value)."""
    if len(x) < k or k <= 1:
        return x.astype(np.float64, copy=True)
    left, right = (k - 1) // 2, k // 2
    xp = np.pad(x.astype(np.float64), (left, right), mode="edge")
    c = np.concatenate(([0.0], np.cumsum(xp)))
    return (c[k:] - c[:-k]) / k


@dataclass
class CollectionPlan:
    """Everything the analysis needs to know about how runs were built (see docs/ARCHITECTURE.md)."""

    exec_time_ns: int
    cycle_ns: int
    warmups: int
    sse_index: int
    ssp_index: int
    tail: int
    trailing: int
    executions_per_run: int
    runs: int
    sse_runs: int
    sse_executions_per_run: int
    reference_executions: int
    reference_ms: float
    margin: float
    predecessor_count: int
    idle_ns: int
    delay_max_ns: int
    lois_wanted: int
    sensor: dict[str, int]
    probe: dict[str, Any] = field(default_factory=dict)
    mode: str = "auto"
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def make_plan(
    exec_time_ns: int,
    cycle_ns: int,
    sensor: dict[str, int],
    probe: ProbeResult | None,
    policy: Any,
    predecessor_count: int = 0,
) -> CollectionPlan:
    """Choose runs, executions per run, idle and delay (METHOD.md steps 1, 3, 4, 5, 8).

    sensor: {"period_ns", "delay_ns", "window_ns", "lag_ns", "settle_ns"} from the calibration.
    policy: a `fingrav.config.RunPolicy`. Explicit values in it override the automatic choice.
    """
    notes: list[str] = []
    g_runs, spacing_ns, g_margin = guidance(exec_time_ns)
    period = max(int(sensor["period_ns"]), 1)
    settle = int(sensor["settle_ns"])
    warmups = int(policy.warmups)
    sse_index = warmups
    # LOIs wanted: ~1 per `spacing` of kernel time (guidance table), at least policy.min_lois
    lois_wanted = max(int(policy.min_lois), math.ceil(exec_time_ns / spacing_ns))

    # SSP: power must have stopped changing - the sensor's settling and the device's own transient
    need_ns = settle
    if probe is not None:
        need_ns = max(need_ns, probe.t_stable_ns)
        if not probe.settled:
            notes.append("stability probe did not settle: SSP taken at the end of the probe length")
    ssp_count = max(math.ceil(need_ns / max(cycle_ns, 1)), warmups + 2)
    ssp_index = ssp_count - 1

    # SSP runs: the guidance table. SSE runs (warm-ups + 1 executions each, METHOD.md step 3): as many as
    # the SSE profile needs for min_lois LOIs (METHOD.md step 8), at least the guidance table
    runs = g_runs
    lois_per_run_sse = min(1.0, exec_time_ns / period)
    sse_runs = max(g_runs, math.ceil(policy.min_lois / max(lois_per_run_sse, 1e-9)))
    if sse_runs > policy.max_runs:
        notes.append(
            f"{sse_runs} SSE runs wanted for {policy.min_lois} SSE LOIs; "
            f"capped at run_policy.max_runs={policy.max_runs}"
        )
        sse_runs = int(policy.max_runs)
    runs = min(runs, int(policy.max_runs))
    if policy.sse_runs is not None:
        sse_runs = int(policy.sse_runs)
    # SSP tail: enough steady-state executions per run to collect lois_wanted SSP LOIs over all runs
    tail = max(1, math.ceil(lois_wanted * period / (runs * max(exec_time_ns, 1))))
    max_tail = max(1, math.ceil(4 * period / max(cycle_ns, 1)))
    if tail > max_tail:
        notes.append(f"SSP tail capped at {max_tail} executions (4 sensor periods)")
        tail = max_tail
    # one trailing execution after the SSP tail, so that every SSP execution has a successor and its
    # steady-state cycle (execution + launch gap) is complete; the trailing execution is never profiled
    trailing = 1
    margin = g_margin
    mode = policy.mode
    if policy.runs is not None:
        runs = int(policy.runs)
    if policy.executions_per_run is not None:
        epr = int(policy.executions_per_run)
        trailing = 1 if epr >= sse_index + 3 else 0
        ssp_index = max(min(ssp_index, epr - 1 - trailing), min(sse_index + 1, epr - 1))
        tail = epr - trailing - ssp_index
        if ssp_index <= sse_index:
            notes.append("explicit executions_per_run leaves no execution after the SSE: SSP == last execution")
    executions_per_run = ssp_index + tail + trailing
    if policy.margin is not None:
        margin = float(policy.margin)
    # idle before each run: the sensor and the device must be back at idle (probe recovery)
    recover = probe.t_recover_ns if probe is not None else settle
    idle_ns = int(1.2 * max(settle, recover)) + period
    return CollectionPlan(
        exec_time_ns=int(exec_time_ns),
        cycle_ns=int(cycle_ns),
        warmups=warmups,
        sse_index=sse_index,
        ssp_index=int(ssp_index),
        tail=int(tail),
        trailing=int(trailing),
        executions_per_run=int(executions_per_run),
        runs=int(runs),
        sse_runs=int(sse_runs),
        sse_executions_per_run=sse_index + 1,
        reference_executions=math.ceil(policy.reference_ms * 1e6 / max(cycle_ns, 1)) if policy.reference_ms else 0,
        reference_ms=float(policy.reference_ms),
        margin=float(margin),
        predecessor_count=int(predecessor_count),
        idle_ns=idle_ns,
        delay_max_ns=period,
        lois_wanted=int(lois_wanted),
        sensor={k: int(v) for k, v in sensor.items()},
        probe=probe.to_dict() if probe is not None else {},
        mode=mode,
        notes=notes,
    )
