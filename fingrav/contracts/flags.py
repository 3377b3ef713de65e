"""The flag registry: every quality flag a summary row can carry, defined once.

The analysis (`fingrav.analysis.flags`) decides which flags fire using the thresholds here; the report
shows `Flag.meaning` and whether the flag invalidates the row; docs/ARCHITECTURE.md lists the same table
(generated from `REGISTRY`, checked by a test).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

METHOD_MINIMUM_NS: Final = 25_000  # METHOD.md: the method covers kernels of 25 µs and longer
GAP_FACTOR: Final = 3.0  # a detected gap: consecutive samples further apart than this × the median interval
MIN_GOLDEN_FRACTION: Final = 0.5
MAX_BLOCK_SPREAD_PCT: Final = 5.0  # power_limit_cycling: spread of the reference run's 200 ms block means
BLOCK_NS: Final = 200_000_000  # the reference run's blocks
MAX_SSP_VS_REFERENCE_PCT: Final = 2.0
KS_CRITICAL: Final = 1.95  # Kolmogorov-Smirnov: D > 1.95 / sqrt(n) rejects uniformity at the 0.1 % level
MIN_PHASE_RUNS: Final = 30
MIN_SETTLED_REFERENCE_SAMPLES: Final = 10
#: ssp_inconsistent: differences between the estimator's power from the SSP index on and the method SSP below this (%
#: of the SSP)
#: are within the deconvolution's numerical resolution (piece edges, the step response on a grid: ~0.01 % on exact
#: data) and never fire, however narrow both CIs are
CONSISTENCY_FLOOR_PCT: Final = 0.05
MAX_PLAUSIBLE_MW: Final = 5_000_000.0  # 5 kW: above any single GPU board; all-ones sentinels land above it


@dataclass(frozen=True)
class Flag:
    """One flag: its name, whether it makes the row invalid, what it means, the threshold that fires it."""

    name: str
    invalidates: bool
    meaning: str
    threshold: str


REGISTRY: Final[tuple[Flag, ...]] = (
    Flag(
        "too_few_lois",
        True,
        "fewer SSP LOIs than analysis.min_lois: the SSP numbers are not trustworthy",
        "SSP LOIs < analysis.min_lois",
    ),
    Flag(
        "imprecise",
        True,
        "the 95 % CI of the headline power (power_w) or of the energy per execution is wider than "
        "±analysis.max_ci_pct of the value: the number is honest but too uncertain to cite; collect more runs "
        "(run_policy.runs, max_runs); the method SSP's own precision is in ssp_valid",
        "CI half-width > analysis.max_ci_pct (1 %) of power_w or energy_per_exec_mj",
    ),
    Flag(
        "too_few_lois_sse",
        False,
        "fewer SSE LOIs than analysis.min_lois: the SSE numbers are not measurable",
        "SSE LOIs < analysis.min_lois",
    ),
    Flag(
        "sse_skipped",
        False,
        "the plan skipped the SSE runs: on this sensor they could not reach the SSE LOIs the analysis needs within "
        "the run budget (run_policy.sse 'auto'; plan.json sse_decision says what they would cost), or "
        "run_policy.sse is 'never'; the SSE columns are empty; run_policy.sse: always measures them",
        "plan.sse_decision.skipped",
    ),
    Flag(
        "kernel_shorter_than_window",
        False,
        "the kernel is shorter than the sensor's averaging window + lag: the TOI profile's shape is smoothed "
        "out; the SSP mean is still the kernel's steady-state power, but SSE and interleaved numbers are what "
        "the sensor reads, not what the kernel draws",
        "execution time < sensor window + lag",
    ),
    Flag(
        "below_method_minimum",
        False,
        "the kernel runs < 25 µs, below what the method was shown for",
        f"execution time < {METHOD_MINIMUM_NS // 1000} µs",
    ),
    Flag(
        "sample_gaps",
        True,
        "the power logger lost samples during the golden runs",
        f"a known gap, or consecutive samples > {GAP_FACTOR:g} × the median interval apart, in a golden run",
    ),
    Flag(
        "clock_drift",
        False,
        "the GPU clock drifts against the host clock by more than analysis.max_drift_ppm (corrected, but worth "
        "knowing)",
        "abs(drift) > analysis.max_drift_ppm",
    ),
    Flag(
        "clock_residual",
        True,
        "the clock fit's residual exceeds calibration.max_clock_residual_us: LOIs may be assigned to the wrong "
        "TOI or execution",
        "clock-fit residual > calibration.max_clock_residual_us",
    ),
    Flag(
        "unsettled",
        True,
        "the power was not steady over the SSP: the stability probe never settled, or the SSP tail's readings "
        "still trend (first vs second half, 0.1 % test) by more than the SSP's CI: the number is not the SSP",
        "probe not settled, or SSP-tail trend |z| > 3.29 and its change over the tail > the CI half-width",
    ),
    Flag(
        "low_golden_fraction",
        False,
        "fewer than 50 % of the SSP runs or of the SSE runs fell in their golden execution-time bin",
        f"golden / total < {MIN_GOLDEN_FRACTION:g} for SSP or SSE runs",
    ),
    Flag(
        "reference_unsettled",
        False,
        "the reference run has fewer than 10 power samples after the settling time: its settled power is "
        "missing or has no CI",
        f"< {MIN_SETTLED_REFERENCE_SAMPLES} settled reference samples",
    ),
    Flag(
        "burst_too_few_lois",
        False,
        "the headline is sustained (the reference run), but the method SSP (ssp_power_w, the short stamped runs "
        "after idle) has fewer SSP LOIs than analysis.min_lois: ssp_power_w and what is compared with it "
        "(ssp_vs_power_pct, ssp_vs_unstamped_burst_pct) are not trustworthy (ssp_valid false)",
        "power_source sustained and SSP LOIs < analysis.min_lois",
    ),
    Flag(
        "burst_unsettled",
        False,
        "the headline is sustained (the reference run), but the power was not steady over the method SSP: the "
        "stability probe never settled (often: the limiter already clamps it) or the SSP tail still trends; "
        "ssp_power_w is not a settled SSP (ssp_valid false)",
        "power_source sustained and (probe not settled, or SSP-tail trend |z| > 3.29 beyond the CI)",
    ),
    Flag(
        "burst_only",
        False,
        "no sustained reference run (run_policy.reference_ms 0, or it did not settle): the headline power_w and "
        "energy_per_exec_mj are the method SSP of short stamped runs after idle (power_source burst), not what the "
        "kernel draws launched back to back without stamps in sustained use; the stamps' gaps lower it on short "
        "kernels and a power limiter may clamp sustained use below it",
        "power_source = burst",
    ),
    Flag(
        "reference_drifting",
        False,
        "the reference run's power still drifts over its last half (the die warming; sustained_drift_pct) even at "
        "run_policy.reference_max_ms: the headline is the mean of that last half, its CI and half the drift beyond "
        "its noise in quadrature; a longer run reads the warmer state",
        "change over the last half > run_policy.reference_ci_pct / 2 + 2 standard errors",
    ),
    Flag(
        "ssp_inconsistent",
        False,
        "the sensor-model estimator's power of the executions at and after the SSP index (ssp_steady_kernel_power_w: "
        "every sample of the SSP runs deconvolved, idle and warm-ups included) differs from the method SSP "
        "(ssp_power_w) by more than their combined 95 % CI (ssp_steady_kernel_power_vs_ssp_pct): the sensor model, "
        "the estimator or the SSP's steady state does not hold. A note, not a verdict on the SSP: on the simulator "
        "the method SSP is right (within its CI of the truth) in the rows where today's estimator fails the check "
        "(experiments/RESULTS.md, issue 22)",
        "0 outside the CI of ssp_steady_kernel_power_vs_ssp_pct (the two CIs in quadrature) and "
        f"abs(ssp_steady_kernel_power_vs_ssp_pct) > {CONSISTENCY_FLOOR_PCT:g} %",
    ),
    Flag(
        "power_limit_cycling",
        False,
        "sustained back-to-back power still swings by > 5 % between 200 ms blocks after settling: a power limiter "
        "clamps the card in cycles; the headline power_w is then the reference run's mean over whole limit cycles "
        "(limit_cycle_* columns), and short runs after idle draw the burst level (the method SSP, ssp_power_w)",
        f"spread of 200 ms block means > {MAX_BLOCK_SPREAD_PCT:g} %",
    ),
    Flag(
        "ssp_reference_mismatch",
        False,
        "the headline is the method SSP (power_source burst: the reference run did not settle) but it and the "
        "reference run's settled power differ by more than 2 % and their CIs do not overlap: the kernel draws "
        "differently in bursts after idle than in sustained use (limiter, clocks, the stamps' cost); where the "
        "headline is the reference run the difference is ssp_vs_power_pct, not a flag",
        f"power_source burst and abs(ssp_vs_reference_pct) > {MAX_SSP_VS_REFERENCE_PCT:g} % and disjoint CIs",
    ),
    Flag(
        "sample_phase_nonuniform",
        False,
        "the first power sample after each run's start is not uniformly spread over a sensor period (the random "
        "delay did not randomize the sampling phase): means stay right in steady state, but some TOIs, and the "
        "SSE, get fewer LOIs",
        f"Kolmogorov-Smirnov D > {KS_CRITICAL:g} / sqrt(n), n ≥ {MIN_PHASE_RUNS} runs (0.1 % level)",
    ),
    Flag(
        "nonphysical_samples",
        False,
        "the power logger returned samples that cannot be real (not finite, above 5 kW, ≤ 0 W total power, or two "
        "different values at one timestamp): they were set aside before any statistic (counts in summary.json "
        '"samples"), so the numbers rest on the remaining samples',
        "any sample set aside",
    ),
)
BY_NAME: Final[dict[str, Flag]] = {f.name: f for f in REGISTRY}
ORDER: Final[tuple[str, ...]] = tuple(f.name for f in REGISTRY)
INVALIDATING: Final = frozenset(f.name for f in REGISTRY if f.invalidates)


def flag(name: str) -> Flag:
    """The registry entry of a flag; a flag the registry does not know is a programming error."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown flag {name!r}: add it to fingrav.contracts.flags.REGISTRY") from None


def markdown_table() -> str:
    """The registry as the markdown table docs/ARCHITECTURE.md shows (a test keeps the two equal)."""
    lines = ["| flag | invalidates | fires when | meaning |", "|---|---|---|---|"]
    lines += [f"| `{f.name}` | {'yes' if f.invalidates else 'no'} | {f.threshold} | {f.meaning} |" for f in REGISTRY]
    return "\n".join(lines)
