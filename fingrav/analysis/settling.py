"""Is the SSP tail in steady state? A trend test on the statistic itself, and the bias it implies.

The SSP is the mean reading over the SSP tail of golden SSP runs. If the power the kernel draws still
changes across the tail (the clock still ramping, the limiter still pulling power down), the sensor's reading
lags it by the sensor's group delay (boxcar window / 2 + lag; the dead time is corrected), so the mean
reading is off the true tail power by about slope x group delay. The test compares the mean reading of the
tail's first half with its second half (whole executions each, so a kernel's own power shape cancels), per
golden run, with the same cluster bootstrap as every other statistic:

* `trend_z` = difference / its bootstrap standard error;
* `bias_bound_mw` = sqrt(slope² − se²) x group delay (the part of the slope beyond its own noise), slope =
  difference / distance between the halves' centres; it widens the SSP CI (and, relatively, the energy CI): the
  systematic part the run-to-run scatter misses (the parts' sum, in quadrature with each side of the bootstrap
  interval: `fingrav.analysis.profiles.ssp_systematic`);
* `residual_transient_mw`: what the sensor still shows of the level before the main segment (idle or the
  predecessor) during the SSP tail, from the calibrated step response (the start-up transient that leaks into
  an SSP taken when the reading is "within 1 %"); in the CI too;
* `unsettled` when the trend is significant (|z| > `TREND_Z`, a 0.1 % two-sided test) and the change across
  the tail exceeds the SSP CI's half-width: the tail is not steady state and the number is not the SSP.

A tail of one execution is compared with the execution right before it (in SSP runs every execution is
stamped); without one, nothing is tested (`tested` false).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import polars as pl

from fingrav.contracts.plan import Plan
from fingrav.contracts.roles import MAIN, SSP
from fingrav.contracts.sensor import SensorModel
from fingrav.contracts.units import NS_PER_MS
from fingrav.sensorfit import step_response

logger = logging.getLogger(__name__)

TREND_Z = 3.29  # two-sided 0.1 %


@dataclass(frozen=True)
class TailTrend:
    """The SSP tail's trend on one channel (mW, ns)."""

    tested: bool
    first_half_mw: float | None = None
    second_half_mw: float | None = None
    difference_mw: float | None = None
    difference_se_mw: float | None = None
    trend_z: float | None = None
    slope_mw_per_ms: float | None = None
    change_over_tail_mw: float | None = None
    bias_bound_mw: float = 0.0
    significant: bool = False

    def to_summary(self) -> dict[str, float | bool | None]:
        return dict(self.__dict__)


def _tail_window(plan: Plan, has_phase: bool) -> tuple[int, int, int, int, pl.Expr] | None:
    """(half, first index, split, last index, the LOIs' filter) of the trend test: the tail's first half vs its
    second half, or for a one-execution tail the execution before it vs it (needs the `phase` column); None when
    neither applies."""
    half = plan.tail // 2
    if half >= 1:
        return (
            half,
            plan.ssp_index,
            plan.ssp_index + half,
            plan.ssp_index + 2 * half - 1,
            pl.col("role") == SSP,
        )
    if plan.ssp_index >= 1 and has_phase:
        return 1, plan.ssp_index - 1, plan.ssp_index, plan.ssp_index, pl.col("phase") == SSP
    return None


def _half_sums(sub: pl.DataFrame, run_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per golden run (in `run_ids`' order): the sum of power (mW) and the LOI count of the early half, then of
    the late half (`sub`: run, late, power_mw); LOIs of other runs are left out."""
    lut = {int(r): i for i, r in enumerate(run_ids)}
    pos = np.array([lut.get(int(r), -1) for r in sub["run"].to_numpy()], dtype=np.int64)
    ok = pos >= 0
    late = sub["late"].to_numpy()[ok]
    power = sub["power_mw"].to_numpy()[ok]
    pos = pos[ok]
    n = len(run_ids)
    s1 = np.bincount(pos[~late], weights=power[~late], minlength=n)
    n1 = np.bincount(pos[~late], minlength=n).astype(np.float64)
    s2 = np.bincount(pos[late], weights=power[late], minlength=n)
    n2 = np.bincount(pos[late], minlength=n).astype(np.float64)
    return s1, n1, s2, n2


def trend_bounds(
    difference_mw: float, se_mw: float, half: int, tail: int, cycle_ns: float, group_delay_ns: float
) -> tuple[float, float]:
    """(change across the tail, bias bound), mW, of a tail whose second half reads `difference_mw` above its first
    (standard error `se_mw`; halves `half` executions of `cycle_ns` apart, a tail of `tail` executions): the slope
    times the tail's length, and the slope beyond its own noise (sqrt(slope^2 - se^2)) times the group delay: a flat
    tail's noisy slope adds nothing, a real trend about |slope| x group delay. Non-finite se: |slope| x delay."""
    distance_ns = half * float(cycle_ns)
    slope = difference_mw / distance_ns
    change = abs(slope) * tail * float(cycle_ns)
    if not np.isfinite(se_mw):
        return change, abs(slope) * float(group_delay_ns)
    return change, float(np.sqrt(max(0.0, slope**2 - (se_mw / distance_ns) ** 2))) * float(group_delay_ns)


def tail_trend(
    lois: pl.DataFrame,
    channel: str,
    run_ids: np.ndarray,
    plan: Plan,
    boot: object,
    cycle_ns: float | None,
    group_delay_ns: float,
) -> TailTrend:
    """The trend of `channel`'s SSP readings over the tail (module docstring). run_ids: the golden runs in the
    bootstrap's order; boot: the `profiles.ClusterBootstrap` every statistic shares; cycle_ns: the SSP cycle."""
    window = _tail_window(plan, "phase" in lois.columns)
    if not cycle_ns or window is None:
        return TailTrend(tested=False)
    half, first_lo, split, hi, in_window = window
    sub = (
        lois.lazy()
        .filter(
            pl.col("golden")
            & (pl.col("channel") == channel)
            & in_window
            & (pl.col("segment") == MAIN)
            & pl.col("exec_index").is_between(first_lo, hi)
        )
        .select("run", (pl.col("exec_index") >= split).alias("late"), "power_mw")
        .collect()
    )
    s1, n1, s2, n2 = _half_sums(sub, run_ids)
    if n1.sum() < 3 or n2.sum() < 3:
        return TailTrend(tested=False)
    m1, m2 = float(s1.sum() / n1.sum()), float(s2.sum() / n2.sum())
    rep = boot.ratio(s2, n2) - boot.ratio(s1, n1)  # type: ignore[attr-defined]
    rep = rep[np.isfinite(rep)]
    diff = m2 - m1
    se = float(rep.std(ddof=1)) if rep.size > 2 else float("nan")
    z = diff / se if se > 0 else (0.0 if diff == 0 else float("inf"))
    slope = diff / (half * float(cycle_ns))  # mW per ns
    change, bias = trend_bounds(diff, se, half, plan.tail, float(cycle_ns), float(group_delay_ns))
    return TailTrend(
        tested=True,
        first_half_mw=m1,
        second_half_mw=m2,
        difference_mw=diff,
        difference_se_mw=se,
        trend_z=float(z),
        slope_mw_per_ms=slope * 1e6,
        change_over_tail_mw=change,
        bias_bound_mw=bias,
        significant=bool(abs(z) > TREND_Z),
    )


def residual_transient_mw(
    sensor: SensorModel, t_from_ns: float, t_to_ns: float, step_mw: float, n_grid: int = 64
) -> float:
    """The part of an earlier level still in the (delay-corrected) readings between t_from_ns and t_to_ns after
    the main segment started: mean over that span of (1 - step response) x |step|, from the calibrated sensor
    model (dead time, window, lag + 2 standard errors: conservative). 0 when the model is unknown."""
    if sensor.delay_ns is None or sensor.window_ns is None or t_to_ns <= t_from_ns or step_mw == 0:
        return 0.0
    lag_ns = float(sensor.lag_ns or 0.0) + 2.0 * float(sensor.lag_se_ns or 0.0)
    d_ms = float(sensor.delay_ns) / NS_PER_MS
    t_ms = np.linspace(t_from_ns, t_to_ns, n_grid) / NS_PER_MS + d_ms  # raw sample time = corrected + delay
    s = step_response(t_ms, d_ms, float(sensor.window_ns) / NS_PER_MS, lag_ns / NS_PER_MS)
    return float(np.mean(1.0 - np.clip(s, 0.0, 1.0))) * abs(step_mw)


def rounding_bias_bound_mw(quantization_mw: float, noise_mw: float) -> float:
    """How far a mean of readings rounded to the step q (mW) can sit from the mean of the same readings unrounded,
    when each carries independent Gaussian noise of sd σ (mW) before the rounding (whatever else varies from
    reading to reading only shrinks it): the rounding error's Fourier series bounded term by term,
    Σ_k (q / (π k)) exp(-2 π² k² σ² / q²), and never more than q / 2 (σ = 0: a constant level rounds by up to
    q / 2). mW; 0 without a step. Negligible once σ ≳ q / 2; from σ = q / 4 on, its first term,
    (q / π) exp(-2 π² σ² / q²), is all of it but ≤ 1.3 %."""
    q = float(quantization_mw or 0.0)
    if q <= 0:
        return 0.0
    r = max(float(noise_mw or 0.0), 0.0) / q
    k = np.arange(1, 201, dtype=np.float64)
    series = float(np.sum(q / (np.pi * k) * np.exp(-2.0 * np.pi**2 * k**2 * r**2)))
    return min(q / 2.0, series)


def quantization_bias_mw(sensor: SensorModel) -> float:
    """The SSP's quantization term (mW): `rounding_bias_bound_mw` with the calibrated noise_mw as σ. The
    calibrated noise is the scatter of the *rounded* samples, so where σ ≲ q / 2 it overstates σ and this
    understates the bias (the reading CIs use `reading_quantization_bias_mw`)."""
    return rounding_bias_bound_mw(float(sensor.quantization_mw or 0.0), float(sensor.noise_mw or 0.0))


def noise_floor_mw(sensor: SensorModel) -> float:
    """The least Gaussian noise σ (mW, before the sensor rounds to its step q) that the calibration allows:
    sqrt(max(0, noise_mw² - q² / 4)); noise_mw itself without a step; 0 when unknown.

    The calibration's noise_mw is the scatter of the *rounded* samples around their level's mean
    (`fingrav.sensorfit`), so it holds the rounding error too, by how much depends on where each level sits
    between two steps, which the calibration does not know: a level half-way between two steps with σ ≪ q
    scatters by q / 2 (its samples split between the two), a level on a step by nothing. Rounding adds at most
    q² / 4 to a Gaussian level's variance (the level half-way; verified over phase and σ in the tests), hence the
    floor; a sensor whose noise_mw is below q / 2 cannot tell its noise from none (floor 0)."""
    s = float(sensor.noise_mw or 0.0)
    q = float(sensor.quantization_mw or 0.0)
    return float(np.sqrt(max(0.0, s * s - q * q / 4.0))) if q > 0 else s


def reading_quantization_bias_mw(sensor: SensorModel) -> float:
    """The quantization term of a reading's CI (mW; the SSE and the interleaved reading): how far the mean of
    the rounded readings can sit from the mean of the unrounded ones (`rounding_bias_bound_mw`) at the least
    noise the calibration allows (`noise_floor_mw`). q / 2 where the calibrated noise_mw is below q / 2 (the
    sensor reads a near-constant level with a rounding offset no bootstrap over runs sees); 0 without a step,
    and negligible where noise_mw ≳ q."""
    return rounding_bias_bound_mw(float(sensor.quantization_mw or 0.0), noise_floor_mw(sensor))
