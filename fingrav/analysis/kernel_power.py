"""Kernel power of one execution through the sensor model: what the SSE (or the interleaved execution) draws,
as opposed to what the sensor reads during it.

A sensor whose window + lag is longer than an execution reads, during that execution, mostly what came
before it (idle, warm-ups, predecessors). The mean LOI reading of the SSE is then a *sensor reading* (what
naive profiling sees, the paper's SSE numbers), not the SSE's *kernel power*. This module estimates the kernel
power from the calibrated sensor model (`fingrav.contracts.sensor.SensorModel`: boxcar window, first-order lag;
the dead time is already corrected) by linear deconvolution:

    reading(t) = P_idle + sum_j (P_j - P_idle) * A_j(t),    A_j(t) = H(t - start_j) - H(t - end_j)

where H is the sensor's step response and the segments j of each golden run are equal pieces of constant
power: of the span before the target (warm-ups, predecessors) and of the target execution itself, about one
per half of the sensor's resolution (window + 2 x lag; `_pieces`). The kernel power is the mean of the
target's pieces (time-weighted): the interleaved execution's over its cycle (its start to the next execution's
start, the launch gap included, like the SSP); the SSE's over the execution itself (in an SSE run it is the last, so
its cycle is itself; in an SSP run the gap to the next execution is not the SSE's). The samples used run from
settled idle before each run to window + 4 x lag after the target's end; what follows the target (idle after an SSE
run, more executions in an SSP run) gets pieces of its own per run kind, so the target's last piece is seen whole.
The levels are the least-squares solution over the samples of all golden runs; the CI is the cluster bootstrap over runs
(the same resampling as every other statistic; its percentile interval widened about the estimate by
`profiles.small_sample_factor` of the fewest runs a stratum the target rests on has, as the readings' CIs are:
golden SSE runs are few where the execution time scatters) widened by two systematic parts:

* `model_mw`: the largest change when every piece is split in two or merged in pairs: what the piecewise-constant
  assumption may cost. Pieces seen by fewer than `min_seen` readings' worth of samples are merged first
  (`identified`): a piece the data do not see would be set by the least-squares prior, not measured;
* `sensor_model_mw`: the largest change when the window, the lag or the dead time moves by 1.96 of its
  calibrated standard error.

**The joint estimator** (an execution that makes up less than half of every reading, `MIN_SHARE`: shorter than
about half the sensor's window + lag; on an H200, anything under ~6 ms). Pieces of the sensor's resolution cannot
place its power, but every sample of every golden run still weighs it by a known amount (its exact position on
the run's timeline through the calibrated dead time, window and lag), so the fit is over all runs with one piece
per *execution role*: one per execution before the target (`_role_pieces`: the warm-ups, or the predecessor's
span in pieces of the target's cycle), one for the target, what follows per run kind as above. Adjacent
executions are told apart only through the sensor's shape, so the fit is regularized: a prior that the burst's
power is smooth from execution to execution (second differences, `_penalty`, sd CURVATURE x the calibrated step
against the sensor noise; a straight line costs nothing). The CI is the cluster bootstrap root-sum-squared with
three independent systematic parts: `model_mw` (the larger change when the executions before the target are
merged in pairs or the prior is made twice as loose: what the prior decides), and `sensor_model_mw`, each sensor
parameter moved by 1.96 of its standard error *along what the calibration pins* (`_joint_variants`: the group
delay, and window and lag each with the dead time moved to keep the group delay), root-sum-squared.

**Base runs** (`Plan.base_runs`: the SSE run without its SSE execution, the warm-ups alone after the same idle). The
joint estimator then fits the SSE runs and the base runs together, their warm-ups and what follows the last
execution sharing the same pieces, the SSE's piece only in the SSE runs: the SSE's power is the difference it makes,
and no prior is needed (none is used). On a 20 ms sensor with 0.5 ms of sampling jitter the smooth-burst prior
extrapolates the warm-ups' ramp (+3-6 % on the simulated H200); the difference does not (experiments/RESULTS.md).
The base runs are resampled as a stratum of their own; the systematic parts are as above, less the prior's.

Either way the estimate is reported only when its CI half-width is within `analysis.kernel_power_max_ci_pct` of
the value; otherwise the number is "not measurable" and the reason (the CI it would have) is given. Powers in
mW, times in ns.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
import polars as pl

from fingrav.analysis.binning import golden_window
from fingrav.analysis.profiles import ClusterBootstrap, small_sample_factor, widened_about
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.profile import KernelPower
from fingrav.contracts.result import Estimate
from fingrav.contracts.roles import BASE, MAIN, PRED, SSE, TOTAL
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import NS_PER_MS
from fingrav.sample_grid import fit_grid
from fingrav.sensorfit import step_response

logger = logging.getLogger(__name__)

METHOD = "sensor-model deconvolution: cluster bootstrap over runs + piecewise-model and sensor-model systematic parts"
METHOD_JOINT = (
    "joint sensor-model estimator (one piece per execution, smooth-burst prior): cluster bootstrap over runs, "
    "root-sum-squared with the prior's, the piecewise model's and the sensor model's (group delay) systematic parts"
)
METHOD_BASE = (
    "joint sensor-model estimator over the SSE runs and their base runs (the SSE's power is the difference it makes; "
    "no prior): cluster bootstrap over runs, root-sum-squared with the piecewise model's and the sensor model's "
    "(group delay) systematic parts"
)
#: z of the two-sided 95 % interval, for the sensor-model standard errors
Z95 = 1.96
#: idle samples used before each run, in sensor periods
IDLE_PERIODS = 4
#: most pieces of constant power before the target and in it (the finer check model has twice as many)
MAX_BEFORE_PIECES = 16
MAX_TARGET_PIECES = 8
MAX_AFTER_PIECES = 4
#: below this largest share of one reading, the target is not resolved (the fit's prior, not the data, decides)
MIN_SHARE = 0.5
#: the base runs' bootstrap stream (`with_base_runs`), apart from the scenario's own
BASE_SEED = 0xBA5E


def _not(target: str, reason: str, **kw: object) -> KernelPower:
    return KernelPower(target=target, measurable=False, reason=reason, **kw)  # type: ignore[arg-type]


def _resolution_ns(sensor: SensorModel) -> float:
    """How finely (ns) the sensor can place power in time: half its window + 2 x lag (at least 0.5 µs)."""
    return max(float(sensor.window_ns or 0.0) + 2.0 * float(sensor.lag_ns or 0.0), 1_000.0) / 2.0


def _post_ns(sensor: SensorModel) -> float:
    """How long after the target's end (ns) a reading still sees it: window + 4 x lag (the lag's tail to 2 %)."""
    return float(sensor.window_ns or 0.0) + 4.0 * float(sensor.lag_ns or 0.0)


def _pieces(frame: pl.DataFrame, sensor: SensorModel, refine: int) -> tuple[int, int, int]:
    """(pieces before the target, pieces of the target, pieces after it): about one per `_resolution_ns`, at
    least one each (none before when no run has executions before the target; none after when the sensor has
    no memory), at most MAX_BEFORE_PIECES / MAX_TARGET_PIECES / MAX_AFTER_PIECES, times `refine` (the finer model
    of the systematic check)."""
    res = _resolution_ns(sensor)
    before = float((frame["t_start_ns"] - frame["run_start_ns"]).median() or 0.0)
    target = float((frame["t_end_ns"] - frame["t_start_ns"]).median() or 0.0)
    n_b = 0 if before <= 0 else min(MAX_BEFORE_PIECES, max(1, math.ceil(before / res))) * refine
    n_t = min(MAX_TARGET_PIECES, max(1, math.ceil(target / res))) * refine
    post = _post_ns(sensor)
    n_a = 0 if post <= 0 else min(MAX_AFTER_PIECES, max(1, math.ceil(post / res))) * refine
    return n_b, n_t, n_a


def _role_pieces(frame: pl.DataFrame, sensor: SensorModel) -> tuple[int, int, int, int]:
    """The pieces of the joint estimator (a target shorter than the sensor resolves), one per execution role:
    (pieces of the predecessor's span: about one per cycle of the target (SSP runs': not the run's last), at most
    MAX_BEFORE_PIECES; one per execution of the measured kernel before the target (`target_index`: the warm-ups),
    at most MAX_BEFORE_PIECES; 1: the target; what follows it as in `_pieces`)."""
    inner = frame.filter(~pl.col("sse_run"))
    cycle = float(
        ((inner if inner.height else frame)["t_end_ns"] - (inner if inner.height else frame)["t_start_ns"]).median()
        or 0.0
    )
    span = float((frame["main_start_ns"] - frame["run_start_ns"]).median() or 0.0)
    n_p = 0 if span <= 0 or cycle <= 0 else min(MAX_BEFORE_PIECES, max(1, round(span / cycle)))
    n_w = min(MAX_BEFORE_PIECES, int(frame["target_index"].max() or 0)) if frame.height else 0
    return n_p, n_w, 1, _pieces(frame, sensor, 1)[2]


#: the joint estimator's prior links the warm-ups' cycles to the SSE's own time: not when launch gaps make them unlike
MAX_GAP_SHARE = 0.02


def _gap_share(frame: pl.DataFrame, n_warm: int) -> float:
    """The launch gaps' share of the warm-ups' cycles (`warm_gap` of `target_samples`, median over the runs); 0
    without warm-ups."""
    if n_warm <= 0 or frame.height == 0:
        return 0.0
    return float(frame.unique("run")["warm_gap"].median() or 0.0)


def _joint_segments(
    frame: pl.DataFrame, pieces: tuple[int, int, int, int], post_ns: float
) -> list[tuple[np.ndarray, np.ndarray]]:
    """`_segments` of the joint estimator's roles (`_role_pieces`): equal pieces of the predecessor's span, of
    the warm-ups' span, the target, then what follows (per run kind); the same column order as `_segments`."""
    n_p, n_w, _, n_a = pieces
    segs: list[tuple[np.ndarray, np.ndarray]] = []
    rs, ms, ts, te = (
        frame[c].to_numpy().astype(np.float64) for c in ("run_start_ns", "main_start_ns", "t_start_ns", "t_end_ns")
    )
    for a, b, n in ((rs, ms, n_p), (ms, ts, n_w), (ts, te, 1)):
        for j in range(n):
            segs.append((a + (b - a) * j / n, a + (b - a) * (j + 1) / n))
    return segs + _segments(frame, 0, 0, n_a, post_ns)


def _variants(sensor: SensorModel) -> list[tuple[float, float, float]]:
    """(window, lag, time shift) in ns of the sensor-model check: each of window, lag and dead time moved by 1.96
    of its calibrated standard error, the others kept."""
    window, lag = float(sensor.window_ns or 0.0), float(sensor.lag_ns or 0.0)
    return [
        (window + Z95 * float(sensor.window_se_ns or 0.0), lag, 0.0),
        (max(window - Z95 * float(sensor.window_se_ns or 0.0), 1.0), lag, 0.0),
        (window, lag + Z95 * float(sensor.lag_se_ns or 0.0), 0.0),
        (window, max(lag - Z95 * float(sensor.lag_se_ns or 0.0), 0.0), 0.0),
        (window, lag, Z95 * float(sensor.delay_se_ns or 0.0)),
        (window, lag, -Z95 * float(sensor.delay_se_ns or 0.0)),
    ]


def _joint_variants(sensor: SensorModel) -> list[tuple[float, float, float]]:
    """The sensor-model check of the joint estimator: what the calibration pins is the group delay (dead time +
    window / 2 + lag, `group_delay_se_ns`), while the dead time trades against the window and the lag (their
    own standard errors are each with the others free). So: the group delay moved by 1.96 of its standard error,
    and the window and the lag each moved by 1.96 of theirs with the dead time moved the other way (the group
    delay kept). Without a group-delay standard error, `_variants`."""
    if sensor.group_delay_se_ns is None:
        return _variants(sensor)
    window, lag = float(sensor.window_ns or 0.0), float(sensor.lag_ns or 0.0)
    gd = Z95 * float(sensor.group_delay_se_ns)
    dw = min(Z95 * float(sensor.window_se_ns or 0.0), window - 1.0)
    dl = min(Z95 * float(sensor.lag_se_ns or 0.0), lag)
    # a later dead time is a sample time read earlier: t + shift with shift = -(change of the dead time)
    return [
        (window, lag, gd),
        (window, lag, -gd),
        (window + dw, lag, dw / 2.0),
        (window - dw, lag, -dw / 2.0),
        (window, lag + dl, dl),
        (window, lag - dl, -dl),
    ]


#: the joint estimator's prior: executions of one burst differ from a straight line by about this fraction of the
#: sensor's calibrated step (second differences of the per-execution levels)
CURVATURE = 0.05


def _penalty(pieces: tuple[int, int, int, int], sensor: SensorModel) -> np.ndarray:
    """The quadratic penalty (k x k, unitless like the design's Gram matrix) on the second differences of the
    levels of one kernel's consecutive pieces: the warm-ups and the target (one chain: the same kernel, back to
    back) and, apart, the predecessor's pieces; never across the change of kernel. A prior that a kernel's
    power is smooth from execution to execution (a straight line costs nothing), with a standard deviation of
    CURVATURE x the calibrated step per second difference against the sensor's noise."""
    n_p, n_w, n_t, n_a = pieces
    k = 1 + n_p + n_w + n_t + 2 * n_a
    rows = []
    for first, m in ((1, n_p), (1 + n_p, n_w + n_t)):
        for i in range(m - 2):
            r = np.zeros(k)
            r[first + i : first + i + 3] = (1.0, -2.0, 1.0)
            rows.append(r)
    if not rows:
        return np.zeros((k, k))
    d = np.array(rows)
    noise = float(sensor.noise_mw or sensor.fit_rms_mw or 1.0)
    step = abs(float(sensor.step_mw or 0.0)) or 1.0
    return (noise / (CURVATURE * step)) ** 2 * (d.T @ d)


def _segments(
    frame: pl.DataFrame, n_before: int, n_target: int, n_after: int = 0, post_ns: float = 0.0
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The piece edges (start_ns, end_ns arrays, one value per sample) in design-column order: `n_before` equal
    pieces of each run's span before the target, `n_target` equal pieces of the target execution, then
    `n_after` equal pieces of the `post_ns` after it, once for SSE runs and once for SSP runs (what follows the
    target differs between the two kinds: a piece of one kind is empty, start = end, for the other)."""
    segs: list[tuple[np.ndarray, np.ndarray]] = []
    rs, ts, te = (frame[c].to_numpy().astype(np.float64) for c in ("run_start_ns", "t_start_ns", "t_end_ns"))
    for a, b, n in ((rs, ts, n_before), (ts, te, n_target)):
        for j in range(n):
            segs.append((a + (b - a) * j / n, a + (b - a) * (j + 1) / n))
    if n_after:
        sse_run = frame["sse_run"].to_numpy()
        for kind in (True, False):
            mine = sse_run == kind
            for j in range(n_after):
                a = te + post_ns * j / n_after
                b = te + post_ns * (j + 1) / n_after
                segs.append((np.where(mine, a, 0.0), np.where(mine, b, 0.0)))
    return segs


def _design(t: np.ndarray, segs: list[tuple[np.ndarray, np.ndarray]], window_ns: float, lag_ns: float) -> np.ndarray:
    """Columns [1 - sum A_j, A_1, ..., A_k] at delay-corrected sample times t (ns)."""
    w, tau = window_ns / NS_PER_MS, lag_ns / NS_PER_MS
    cols = [
        step_response((t - a) / NS_PER_MS, 0.0, w, tau) - step_response((t - b) / NS_PER_MS, 0.0, w, tau)
        for a, b in segs
    ]
    a = np.column_stack(cols) if cols else np.zeros((t.size, 0))
    return np.column_stack([1.0 - a.sum(axis=1), a])


#: a Gram matrix (its exactly-zero rows and columns left out) better conditioned than this is solved by LU: within
#: ~cond x 1e-16 of the pseudo-inverse's answer; worse ones (and singular ones) by the pseudo-inverse
SOLVE_MAX_COND = 1e6


def _solve(gram: np.ndarray, rhs: np.ndarray, penalty: np.ndarray | None = None) -> np.ndarray:
    """Least-squares levels from (stacked) normal equations (+ a quadratic `penalty`); nan where singular.

    The pseudo-inverse's answer (rcond 1e-12): pieces no sample sees leave exactly-zero rows and columns, whose
    levels it sets to 0; for the bootstrap's stacked matrices, where the rest of every one is well conditioned
    (`SOLVE_MAX_COND`), that rest is solved by LU (an SVD per matrix costs several times more), else (and for a
    single matrix: the point estimates) by the pseudo-inverse."""
    if penalty is not None:
        gram = gram + penalty
    with np.errstate(all="ignore"):
        theta = _solve_conditioned(gram, rhs) if gram.ndim > 2 else None  # one matrix: its SVD is cheap
        if theta is None:
            theta = np.einsum("...ij,...j->...i", np.linalg.pinv(gram, rcond=1e-12), rhs)
    return theta


def _solve_conditioned(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """`_solve` by LU on the rows and columns that are not exactly zero, when they are the same in every stacked
    matrix and what they leave is finite and better conditioned than SOLVE_MAX_COND; else None."""
    zero = np.all(gram == 0.0, axis=-1).reshape(-1, gram.shape[-1])
    if zero.shape[0] == 0 or not (zero == zero[0]).all() or zero[0].all():
        return None
    keep = ~zero[0]
    g = gram[..., keep, :][..., :, keep]
    if not np.isfinite(g).all() or not np.isfinite(rhs).all():
        return None
    eig = np.linalg.eigvalsh(g)  # symmetric: cond = largest / smallest eigenvalue (ascending)
    if not (eig[..., 0] > eig[..., -1] / SOLVE_MAX_COND).all():
        return None
    theta = np.zeros(np.broadcast_shapes(rhs.shape, gram.shape[:-1]))
    theta[..., keep] = np.linalg.solve(g, rhs[..., keep][..., None])[..., 0]
    return theta


def _kernel_level(theta: np.ndarray, pieces: tuple[int, int, int]) -> np.ndarray:
    """The target's time-weighted level: the mean of its equal pieces (design columns after idle and before)."""
    n_b, n_t, _ = pieces
    return theta[..., 1 + n_b : 1 + n_b + n_t].mean(axis=-1)


#: the columns of `target_samples`' frame (its docstring says what each is)
TARGET_COLUMNS = (
    "run",
    "t_ns",
    "power_mw",
    "run_start_ns",
    "main_start_ns",
    "t_start_ns",
    "t_end_ns",
    "sse_run",
    "target_index",
    "warm_gap",
    "base_run",
)


def target_samples(
    samples: pl.DataFrame,
    host_execs: pl.DataFrame,
    runs: pl.DataFrame,
    plan: Plan,
    sensor: SensorModel,
    delay_ns: int,
    target: str,
) -> pl.DataFrame:
    """The samples of the golden runs that enter the fit for `target` ("sse": main execution sse_index; "first":
    main execution 0 after a predecessor), from settled idle before each run to `_post_ns` after the target's
    end: run, t_ns (delay-corrected), power_mw, run_start_ns, main_start_ns (the first execution of the measured
    kernel: after the predecessor's), t_start_ns, t_end_ns (host clock; the SSE's own end; the interleaved
    execution's *cycle*: the next execution's start), sse_run, target_index
    (main executions before the target), warm_gap (the launch gaps' share of the warm-ups' cycles), base_run (false:
    `base_samples` gives the base runs' rows)."""
    index = plan.sse_index if target == "sse" else 0
    gold = host_execs.filter(pl.col("golden"))
    warm = (pl.col("segment") == MAIN) & (pl.col("exec_index") < index)
    starts = gold.group_by("run").agg(
        run_start_ns=pl.col("exec_start_ns").min(),
        main_start_ns=pl.col("exec_start_ns").filter(pl.col("segment") == MAIN).min(),
        # the launch gaps' share of the warm-ups' cycles (0 without warm-ups)
        warm_gap=((pl.col("cycle_end_ns") - pl.col("exec_end_ns")).filter(warm).sum().cast(pl.Float64))
        / pl.max_horizontal(pl.lit(1.0), (pl.col("cycle_end_ns") - pl.col("exec_start_ns")).filter(warm).sum()),
    )
    # the interleaved execution over its cycle (to the next start, as the SSP and its truth); the SSE over itself:
    # in an SSE run it is the last execution (its cycle is itself), and in an SSP run the launch gap to the next
    # execution is not the SSE's (`validation._sse_kernel_truth`): it goes to what follows
    end = "exec_end_ns" if target == "sse" else "cycle_end_ns"
    tgt = gold.filter((pl.col("segment") == MAIN) & (pl.col("exec_index") == index)).select(
        "run",
        t_start_ns="exec_start_ns",
        t_end_ns=end,
        sse_run=pl.col("phase") == SSE,
        target_index=pl.lit(index, pl.Int32),
        base_run=pl.lit(False),
    )
    return window_samples(samples, tgt, starts, runs, sensor, delay_ns)


def base_samples(
    samples: pl.DataFrame,
    executions: pl.DataFrame,
    runs: pl.DataFrame,
    plan: Plan,
    clock: ClockMap,
    sensor: SensorModel,
    delay_ns: int,
    sse: pl.DataFrame,
    margin: float,
) -> pl.DataFrame:
    """The rows of the base runs (`Plan.base_runs`) for the SSE's fit, in `target_samples`' frame (`sse`: the SSE's,
    golden runs): the complete base runs of `_base_runs_table`, binned as the SSE runs are (the golden window of
    `fingrav.analysis.binning.golden_window` with the binning's `margin`, on the execution that ends them; a run
    slowed throughout is as rare among them as among the golden SSE runs) and within the SSE runs' warm-up spans;
    each with its target empty (t_start_ns = t_end_ns) where its SSE would have started, one launch gap after its
    last execution, so that its warm-ups' span is an SSE run's (a gap counted in one kind and not the other would be
    read as the SSE's: -14 % for a 0.5 ms SSE after 90 us gaps); sse_run true (what follows is an SSE run's idle),
    base_run true. Empty without base runs."""
    empty = pl.DataFrame(schema=sse.schema)
    base = runs.filter(pl.col("phase") == BASE).select(pl.col("run").cast(pl.Int32))
    sse_runs = sse.filter(pl.col("sse_run")).unique("run")
    spans = sse_runs.select(span=pl.col("t_start_ns") - pl.col("main_start_ns"))["span"]
    if base.height == 0 or spans.is_empty():
        return empty
    # the SSE runs' mean launch gap (their warm-ups' gaps' share of their span, per warm-up): for a single warm-up
    sse_gap = float((sse_runs["warm_gap"] * spans).median() or 0.0) / max(plan.sse_index, 1)
    per = _base_runs_table(executions.join(base, on="run"), plan, clock, sse_gap)
    per = per.filter((pl.col("t_start_ns") - pl.col("main_start_ns")).is_between(int(spans.min()), int(spans.max())))  # type: ignore[arg-type]
    low, high, _ = golden_window(per["last_ns"].to_numpy(), margin)
    per = per.filter(pl.col("last_ns").is_between(low, high))
    if per.height == 0:
        return empty
    tgt = per.select(
        "run",
        "t_start_ns",
        t_end_ns="t_start_ns",
        sse_run=pl.lit(True),
        target_index=pl.lit(plan.sse_index, pl.Int32),
        base_run=pl.lit(True),
    )
    starts = per.select("run", "run_start_ns", "main_start_ns", "warm_gap")
    return window_samples(samples, tgt, starts, runs, sensor, delay_ns).cast(sse.schema)


def _base_runs_table(executions: pl.DataFrame, plan: Plan, clock: ClockMap, sse_gap: float) -> pl.DataFrame:
    """Per complete base run (sse_index main executions, each once, and the predecessor's) among `executions` (raw,
    GPU clock; base runs only), on the host clock: run, run_start_ns, main_start_ns, last_ns (its last execution's
    duration), t_start_ns (that execution's end + its mean launch gap between executions, `sse_gap` with a single
    one: where its SSE would have started), warm_gap (the gaps' share of the warm-ups' cycles, as in
    `target_samples`)."""
    index = plan.sse_index
    main, last = pl.col("segment") == MAIN, pl.col("exec_index") == index - 1
    inner = main & (pl.col("exec_index") < index - 1)  # the warm-ups followed by another one: their gaps
    gap = (pl.col("c") - pl.col("e")).filter(inner).sum().cast(pl.Float64) / (index - 1) if index > 1 else None
    span = pl.col("last_end_ns") + pl.col("gap_ns") - pl.col("main_start_ns")
    return (
        executions.lazy()
        .select(
            pl.col("run").cast(pl.Int32),
            pl.col("segment").cast(pl.String),
            pl.col("exec_index").cast(pl.Int32),
            s=clock.host_expr("gpu_start_ns"),
            e=clock.host_expr("gpu_end_ns"),
        )  # fmt: skip
        .sort("run", "s")
        .with_columns(c=pl.when(pl.col("run").shift(-1) == pl.col("run")).then(pl.col("s").shift(-1)).otherwise("e"))
        .group_by("run")
        .agg(
            n_main=main.sum(),
            n_unique=pl.col("exec_index").filter(main).n_unique(),
            n_pred=(pl.col("segment") == PRED).sum(),
            run_start_ns=pl.col("s").min(),
            main_start_ns=pl.col("s").filter(main).min(),
            last_end_ns=pl.col("e").filter(main & last).first(),
            last_ns=(pl.col("e") - pl.col("s")).filter(main & last).first(),
            gap_ns=pl.max_horizontal(pl.lit(0.0), gap if gap is not None else pl.lit(sse_gap)),
        )
        .filter(
            (pl.col("n_main") == index)
            & (pl.col("n_unique") == index)
            & (pl.col("n_pred") == plan.predecessor_count)
            & pl.col("last_end_ns").is_not_null()
        )
        .with_columns(
            t_start_ns=(pl.col("last_end_ns") + pl.col("gap_ns")).round().cast(pl.Int64),
            warm_gap=pl.col("gap_ns") * index / pl.max_horizontal(pl.lit(1.0), span),
        )
        .collect()
    )


def with_base_runs(
    frame: pl.DataFrame, base: pl.DataFrame, run_ids: np.ndarray, counts: np.ndarray, level: float, seed: int
) -> tuple[pl.DataFrame, np.ndarray, np.ndarray]:
    """(frame, run_ids, counts) of `estimate_kernel_power` with the base runs' rows (`base_samples`) added: their
    runs after the golden runs, resampled as a stratum of their own (`profiles.ClusterBootstrap`, as many
    replicates as `counts` has; `seed`: the scenario's). Unchanged without base rows."""
    if base.height == 0:
        return frame, run_ids, counts
    ids = np.unique(base["run"].to_numpy()).astype(np.int64)
    boot = ClusterBootstrap(ids.size, counts.shape[0], level, seed=[BASE_SEED, int(seed)])  # type: ignore[arg-type]
    return (
        pl.concat([frame, base]),
        np.concatenate([np.asarray(run_ids, dtype=np.int64), ids]),
        np.hstack([counts, boot.counts]),
    )


class GridView(NamedTuple):
    """What the estimators here read (`grid_view`): the samples, the total channel's sensor model and the delay
    correction (ns)."""

    samples: pl.DataFrame
    sensor: SensorModel
    delay_ns: int


def grid_view(samples: pl.DataFrame, sensor: SensorModel, delay_ns: int) -> GridView:
    """(samples, sensor, delay_ns) as the estimators here read them: where the calibration found the sensor's sampling
    grid (`SensorModel.grid`), the total channel's samples at their grid times (`fingrav.sample_grid`; those it
    cannot place left out) with the timing fitted on the grid times (the delay correction likewise, unless the
    analysis applies none: `delay_ns` 0); else (no grid calibrated, or none in these samples) all three unchanged.
    An execution shorter than the sensor's resolution is seen only through each sample's exact time: on an H200 a
    late stamp (one sample in five, ~2.8 ms) moves a sample on a burst's decay by ~25 % of the burst's excess."""
    if sensor.grid is None:
        return GridView(samples, sensor, delay_ns)
    tot = samples.filter(pl.col("channel") == TOTAL)
    times = fit_grid(tot["t_ns"].to_numpy())
    if times.grid is None:  # this scenario's stamps show no grid (too few samples): the stamps and their model
        return GridView(samples, sensor, delay_ns)
    on_grid = sensor.on_grid()
    tot = tot.with_columns(t_ns=pl.Series(np.round(times.t_ns).astype(np.int64))).filter(pl.Series(times.placed))
    rest = samples.filter(pl.col("channel") != TOTAL)
    delay = int(round(float(on_grid.delay_ns or 0.0))) if delay_ns else 0
    return GridView(pl.concat([tot.cast(samples.schema), rest]).sort("t_ns"), on_grid, delay)


def settled_idle(runs: pl.DataFrame, sensor: SensorModel) -> pl.DataFrame:
    """run, pre_ns: how much of each run's idle before it (ns) is settled (past the sensor's settle time), at most
    IDLE_PERIODS sensor periods: the idle level the fit sees before each run."""
    period = float(sensor.period_ns or 0.0)
    settle = float(sensor.settle_ns or 0.0)
    return runs.select(
        pl.col("run").cast(pl.Int32),
        pre_ns=pl.min_horizontal(
            pl.lit(IDLE_PERIODS * period),
            pl.max_horizontal(pl.lit(0.0), (pl.col("idle_ns") + pl.col("delay_ns")).cast(pl.Float64) - settle),
        ),
    )


def window_samples(
    samples: pl.DataFrame,
    tgt: pl.DataFrame,
    starts: pl.DataFrame,
    runs: pl.DataFrame,
    sensor: SensorModel,
    delay_ns: int,
) -> pl.DataFrame:
    """The "total" samples (t_ns delay-corrected) from settled idle before each run (`settled_idle`) to `_post_ns`
    after its window's end, each with its run's window: `tgt` (run, t_start_ns, t_end_ns, sse_run, target_index,
    ...) and `starts` (run, run_start_ns, main_start_ns, ...) per run; the frame of `TARGET_COLUMNS`."""
    win = (
        tgt.join(starts, on="run")
        .join(settled_idle(runs, sensor), on="run", how="left")
        .with_columns(lo_ns=(pl.col("run_start_ns") - pl.col("pre_ns").fill_null(0.0)).cast(pl.Int64))
        .sort("lo_ns")
    )
    post = int(round(_post_ns(sensor)))
    smp = (
        samples.lazy()
        .filter(pl.col("channel") == TOTAL)
        .select((pl.col("t_ns").cast(pl.Int64) - int(delay_ns)).alias("t_ns"), "power_mw")
        .collect()
    )
    if win.height and smp.height:  # only the samples inside some window enter the sort and the join (same result)
        lo = win["lo_ns"].to_numpy().astype(np.int64)
        hi = np.maximum.accumulate(win["t_end_ns"].to_numpy().astype(np.int64) + post)  # lo is sorted: the union
        t = smp["t_ns"].to_numpy().astype(np.int64)
        j = np.searchsorted(lo, t, side="right") - 1
        smp = smp.filter(pl.Series((j >= 0) & (hi[np.maximum(j, 0)] >= t)))
    smp = smp.sort("t_ns")
    joined = smp.join_asof(win, left_on="t_ns", right_on="lo_ns", strategy="backward")
    return joined.filter(pl.col("run").is_not_null() & (pl.col("t_ns") <= pl.col("t_end_ns") + post)).select(
        TARGET_COLUMNS
    )


def _joint_unfit(frame: pl.DataFrame, pieces: tuple[int, ...], share: float, prior: bool = True) -> str | None:
    """Why the joint estimator's prior does not fit these runs (None: it does): launch gaps (> MAX_GAP_SHARE of
    the warm-ups' cycle) make the warm-ups' cycles unlike the SSE's own time, which the smooth prior links (not
    asked without the prior, `prior` false: with base runs); or no execution of the target's own kernel precedes it
    (the interleaved execution, right after another kernel: no prior to lean on, and the sensor's shape alone does
    not tell two adjacent kernels apart here)."""
    if pieces[1] == 0:
        return (
            f"not resolved by the sensor: the execution is at most {100 * share:.3g} % of any reading "
            f"(< {100 * MIN_SHARE:g} %: shorter than about half the sensor's window + lag)"
        )
    gap = _gap_share(frame, pieces[1])
    if gap <= MAX_GAP_SHARE or not prior:
        return None
    return (
        f"not identified by the sensor: the execution is at most {100 * share:.3g} % of any reading, and launch "
        f"gaps ({100 * gap:.3g} % of the warm-ups' cycle) make the warm-ups unlike it, which the joint estimator's "
        "smooth-burst prior would assume alike"
    )


def _interval(
    point: float,
    lo_b: float,
    hi_b: float,
    pieces: tuple[int, ...],
    alternatives: list[tuple[int, ...]],
    joint: bool,
    sensor: SensorModel,
    point_of: Callable[..., float],
) -> tuple[float, float, float, float]:
    """(CI low, CI high, model_mw, sensor_model_mw) around `point` from the bootstrap quantiles (lo_b, hi_b) and
    the systematic parts (module docstring): added linearly for the resolved estimator, root-sum-squared for the
    joint one. `point_of(pieces, window, lag, shift, prior=...)`: the point estimate of a variant."""
    window, lag = float(sensor.window_ns or 0.0), float(sensor.lag_ns or 0.0)
    # the model's own error: the estimate with every piece split in two and with pieces merged in pairs
    model = 0.0
    for alt in alternatives:
        if alt == pieces:
            continue
        v = point_of(alt, window, lag)
        model = max(model, abs(v - point) if math.isfinite(v) else math.inf)
    if joint:  # what the smoothness prior decides: the estimate under a prior twice as loose
        v = point_of(pieces, window, lag, prior=0.25)
        model = max(model, abs(v - point) if math.isfinite(v) else math.inf)
    sens = 0.0
    if joint:  # independent parts: each sensor parameter's larger change, root-sum-squared, then with the rest
        moved = [point_of(pieces, w, tau, shift) for w, tau, shift in _joint_variants(sensor)]
        per = [max(abs(moved[i] - point), abs(moved[i + 1] - point)) for i in range(0, len(moved), 2)]
        sens = math.sqrt(sum(d * d for d in per)) if all(math.isfinite(d) for d in per) else math.inf
        sys2 = model * model + sens * sens
        return (
            point - math.sqrt(max(point - lo_b, 0.0) ** 2 + sys2),
            point + math.sqrt(max(hi_b - point, 0.0) ** 2 + sys2),
            model,
            sens,
        )
    for w, tau, shift in _variants(sensor):
        if (w, tau, shift) == (window, lag, 0.0):
            continue
        v = point_of(pieces, w, tau, shift)
        sens = max(sens, abs(v - point) if math.isfinite(v) else math.inf)
    sys_mw = model + sens
    return lo_b - sys_mw, hi_b + sys_mw, model, sens


def _bootstrap_interval(point: float, reps: np.ndarray, level: float, n_runs: int) -> tuple[float, float]:
    """The bootstrap part of the CI (mW): the replicates' percentile interval at `level`, widened about `point` by
    `profiles.small_sample_factor` of `n_runs`: a percentile interval over few runs is too narrow (the readings'
    CIs are widened alike, `profiles.widen_single_execution_cis`; golden SSE runs are few where the execution time
    scatters)."""
    a = (1.0 - level) / 2.0
    lo_q, hi_q = (float(v) for v in np.quantile(reps, [a, 1.0 - a]))
    lo, hi = widened_about(point, lo_q, hi_q, small_sample_factor(n_runs, level))
    # a point outside its replicates' interval keeps it on the interval's side (never a bound past the point)
    return min(lo, point), max(hi, point)


def _fewest_clusters(frame: pl.DataFrame) -> int:
    """The runs the bootstrap's smallest informative stratum has (`small_sample_factor`'s n): the SSE runs where
    the frame has some (the target's own executions, whose level the fit reads; else every run: the interleaved
    execution's), and the base runs where there are some (the other side of the difference)."""
    runs = frame.select("run", "sse_run", "base_run").unique("run")
    base = runs.filter(pl.col("base_run"))
    own = runs.filter(~pl.col("base_run"))
    sse = own.filter(pl.col("sse_run"))
    n = sse.height if sse.height else own.height
    return min(n, base.height) if base.height else n


def _run_positions(frame: pl.DataFrame, run_ids: np.ndarray) -> np.ndarray:
    """Per row of `frame`: its run's position in `run_ids` (the bootstrap's order), -1 where it is not there."""
    ids = np.asarray(run_ids, dtype=np.int64)
    runs_of = frame["run"].to_numpy().astype(np.int64)
    if not ids.size:
        return np.full(runs_of.size, -1)
    by_id = np.argsort(ids, kind="stable")
    at = np.clip(np.searchsorted(ids[by_id], runs_of), 0, ids.size - 1)
    return np.where(ids[by_id][at] == runs_of, by_id[at], -1)


def _base_rows_wanted(frame: pl.DataFrame, t: np.ndarray, window: float, lag: float) -> np.ndarray:
    """Per row: false for a base run's row where the target is resolved piece by piece (the base runs serve the joint
    estimator only), else true."""
    if "base_run" not in frame.columns or not frame["base_run"].any():
        return np.ones(frame.height, dtype=bool)
    a = _design(t, _segments(frame, 0, 1), window, lag)[:, -1]
    resolved = bool(a.size) and float(a.max()) >= MIN_SHARE
    return ~frame["base_run"].to_numpy() if resolved else np.ones(frame.height, dtype=bool)


def estimate_kernel_power(
    frame: pl.DataFrame,
    sensor: SensorModel,
    run_ids: np.ndarray,
    counts: np.ndarray,
    level: float,
    target: str,
    max_ci_pct: float,
    min_seen: float = 10.0,
) -> KernelPower:
    """The kernel power of `target` from `target_samples` output (module docstring).

    run_ids: the golden runs in the bootstrap's order; counts: the bootstrap's resampling counts (reps x runs,
    `profiles.ClusterBootstrap.counts`); level: the CI level; max_ci_pct: largest CI half-width (% of the value)
    for the estimate to count as measured; min_seen: readings' worth of data each piece of constant power needs
    (analysis.min_lois), else the pieces are merged (`identified`)."""
    if sensor.window_ns is None:
        return _not(target, "the sensor's window is unknown")
    if frame.height == 0:
        return _not(target, "no samples during the golden runs")
    window = float(sensor.window_ns)
    lag = float(sensor.lag_ns or 0.0)
    t = frame["t_ns"].to_numpy().astype(np.float64)
    y = frame["power_mw"].to_numpy().astype(np.float64)
    pos = _run_positions(frame, run_ids)
    keep = (pos >= 0) & _base_rows_wanted(frame, t, window, lag)
    t, y, pos, frame = t[keep], y[keep], pos[keep], frame.filter(pl.Series(keep))
    n_runs = len(run_ids)
    with_base = bool(frame["base_run"].any()) if "base_run" in frame.columns else False

    post = _post_ns(sensor)

    def seen_by(n: tuple[int, int, int]) -> np.ndarray:
        """Per design column (idle first): how many samples' worth of reading it makes up (sum of its weights)."""
        return _design(t, _segments(frame, *n, post_ns=post), window, lag).sum(axis=0)

    def identified(n: tuple[int, int, int]) -> tuple[int, int, int] | None:
        """The finest piece counts <= n whose every piece is seen by >= min_seen samples' worth of readings (a
        piece seen by fewer is fixed by the fit's prior, not by data): halve a group's count until it is; None
        when even one piece of the target (or of what precedes it) is not seen enough."""
        n_b, n_t, n_a = n
        while True:
            w = seen_by((n_b, n_t, n_a))
            groups = {"b": w[1 : 1 + n_b], "t": w[1 + n_b : 1 + n_b + n_t], "a": w[1 + n_b + n_t :]}
            counts = {"b": n_b, "t": n_t, "a": n_a}
            # what follows the target is a nuisance: one piece of it may be thinly seen (two, one per run kind)
            short = [g for g, v in groups.items() if v.size and v.min() < min_seen and not (g == "a" and n_a == 1)]
            if not short:
                return n_b, n_t, n_a
            for g in short:
                if counts[g] == 1:
                    return None
                counts[g] = max(1, counts[g] // 2)
            n_b, n_t, n_a = counts["b"], counts["t"], counts["a"]

    # the samples of one run are contiguous (runs do not overlap in time): per-run sums by reduceat, not add.at
    order = np.argsort(pos, kind="stable")
    t, y, pos, frame = t[order], y[order], pos[order], frame[order]
    run_starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
    run_pos = pos[run_starts]

    def pen(n: tuple[int, ...]) -> np.ndarray | None:
        """The joint estimator's smoothness penalty over the executions (`_penalty`); none otherwise, and none with
        base runs (the SSE is the difference it makes)."""
        return _penalty(n, sensor) if len(n) == 4 and not with_base else None  # type: ignore[arg-type]

    def lay(n: tuple[int, ...]) -> list[tuple[np.ndarray, np.ndarray]]:
        """The pieces' edges: the joint estimator's roles (4 counts, `_joint_segments`) or `_segments`."""
        return _joint_segments(frame, n, post) if len(n) == 4 else _segments(frame, *n, post_ns=post)  # type: ignore

    def target_level(theta: np.ndarray, n: tuple[int, ...]) -> np.ndarray:
        """The target's level: its one piece (joint) or the mean of its pieces (`_kernel_level`)."""
        return theta[..., 1 + n[0] + n[1]] if len(n) == 4 else _kernel_level(theta, n)  # type: ignore[arg-type]

    def fit(n: tuple[int, ...], w: float, tau: float, shift_ns: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        """Per-run normal equations (runs x k x k, runs x k) of the piece model."""
        x = _design(t + shift_ns, lay(n), w, tau)
        k = x.shape[1]
        outer = (x[:, :, None] * x[:, None, :]).reshape(t.size, k * k)
        gram_r = np.zeros((n_runs, k * k))
        rhs_r = np.zeros((n_runs, k))
        gram_r[run_pos] = np.add.reduceat(outer, run_starts, axis=0)
        rhs_r[run_pos] = np.add.reduceat(x * y[:, None], run_starts, axis=0)
        return gram_r.reshape(n_runs, k, k), rhs_r

    def point_of(n: tuple[int, ...], w: float, tau: float, shift_ns: float = 0.0, prior: float = 1.0) -> float:
        """The point estimate of a model: its pooled normal equations only (one matrix product)."""
        x = _design(t + shift_ns, lay(n), w, tau)
        p = pen(n)
        return float(target_level(_solve(x.T @ x, x.T @ y, None if p is None else prior * p), n))

    a_target = _design(t, _segments(frame, 0, 1), window, lag)[:, -1]
    seen = int((a_target > 0).sum())
    share = float(a_target.max()) if a_target.size else 0.0
    n_base = int(frame.filter(pl.col("base_run"))["run"].n_unique()) if with_base else 0
    base = {"samples": seen, "runs": int(np.unique(pos).size) - n_base, "max_share": share, "base_runs": n_base}
    if seen == 0:
        return _not(target, "no sample sees the execution", **base)
    joint = share < MIN_SHARE
    pieces: tuple[int, ...] | None
    if joint:  # shorter than the sensor resolves piece by piece: one piece per execution role (`_role_pieces`)
        pieces = _role_pieces(frame, sensor)
        alternatives: list[tuple[int, ...]] = [(math.ceil(pieces[0] / 2), math.ceil(pieces[1] / 2), 1, pieces[3])]
        if (why := _joint_unfit(frame, pieces, share, prior=not with_base)) is not None:
            return _not(target, why, **base)
    else:
        pieces = identified(_pieces(frame, sensor, 1))
        if pieces is None:
            return _not(target, f"too few samples see the execution (fewer than {min_seen:g} readings' worth)", **base)
        alternatives = [(2 * pieces[0], 2 * pieces[1], 2 * pieces[2]), tuple((k + 1) // 2 for k in pieces)]
    gram_r, rhs_r = fit(pieces, window, lag)
    point = float(target_level(_solve(gram_r.sum(axis=0), rhs_r.sum(axis=0), pen(pieces)), pieces))
    k = rhs_r.shape[1]  # the replicates' normal equations: counts (reps x runs) times the per-run ones (BLAS)
    gram_b = (counts @ gram_r.reshape(n_runs, k * k)).reshape(-1, k, k)
    reps = target_level(_solve(gram_b, counts @ rhs_r, pen(pieces)), pieces)
    reps = reps[np.isfinite(reps)]
    if not math.isfinite(point) or reps.size < 2:
        return _not(target, "the fit is singular", **base)
    lo_b, hi_b = _bootstrap_interval(point, reps, level, _fewest_clusters(frame))
    lo, hi, model, sens = _interval(point, lo_b, hi_b, pieces, alternatives, joint, sensor, point_of)
    comps = {
        "bootstrap_low_mw": lo_b,
        "bootstrap_high_mw": hi_b,
        "model_mw": model,
        "sensor_model_mw": sens,
    }
    half_pct = 50.0 * (hi - lo) / abs(point) if point else math.inf
    if not math.isfinite(half_pct) or half_pct > max_ci_pct:
        shown = "unbounded" if not math.isfinite(half_pct) else f"±{half_pct:.3g} %"
        return _not(
            target,
            f"not identified by the sensor: CI {shown} > ±{max_ci_pct:g} % (the execution contributes at most "
            f"{100 * share:.3g} % of any reading)",
            components=comps,
            **base,
        )
    return KernelPower(
        target=target,
        measurable=True,
        power=Estimate.of(point, lo, hi, "mW", (METHOD_BASE if with_base else METHOD_JOINT) if joint else METHOD),
        components=comps,
        **base,
    )
