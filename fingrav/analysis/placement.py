"""The placement term of the execution time (issue 22): where a kernel's inputs sit in memory moves its execution
time, and a CI over the runs of one preparation does not see it.

On an H200 a memory-bound kernel's execution time repeats within 0.01-0.05 % inside one preparation and differs by
0.3-0.6 % (sd), up to 1.2 %, from one preparation to the next (results/h200-card-state): the placement of its
inputs. Torch devices therefore rotate every kernel through several separately allocated input sets
(`fingrav.device.base.PLACEMENT_SETS`; execution j of a run uses set j mod sets), so the execution time averages
as many placements, and the analysis measures their spread from the same data: the SSP tail's executions, each
less its run's mean (the run's own state cancels), grouped by input set. Set j's effect e_j is the mean of its
executions; its noise variance v_j their variance over their count. The spread of one placement beyond that noise
is s_p^2 = max(0, var(e) - mean(v)) (sample variance over the sets), and the mean over `sets` placements is off the
mean over all placements (what another preparation, or a user's allocation, gives on average) by a term with
half-width t(level, sets - 1) x s_p / sqrt(sets), which the execution time's CI carries in quadrature. With one
input set (older data, callables that own their inputs) nothing is measured and the CI is as before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from fingrav.analysis.tdist import t_critical

#: executions of one set at least, for its mean to count
MIN_PER_SET = 2

PLACEMENT_METHOD = "placement term: t(sets - 1) x the spread of the input sets' mean times beyond noise / sqrt(sets)"


@dataclass(frozen=True)
class PlacementTerm:
    """What the input sets' execution times say about placement: `sets` sets, each one's effect on the mean
    time (% of the mean over the sets, in set order), the spread of one placement beyond noise (`sd_pct`, % of
    the mean time) and the CI half-width it adds to the mean over the sets (`half_pct`, %, at the CI level)."""

    sets: int
    effects_pct: tuple[float, ...]
    sd_pct: float
    half_pct: float


def placement_term(execs: pl.DataFrame, sets: int, level: float = 0.95, value: str = "dur_ns") -> PlacementTerm | None:
    """The placement term (module docstring) of executions `execs` (columns run, exec_index and `value`, ns: the
    golden SSP tail of one scenario, its durations or its cycles) rotated through `sets` input sets; None with fewer
    than 2 sets, or fewer than 2 sets with `MIN_PER_SET` executions each."""
    if sets < 2 or execs.height == 0:
        return None
    d = execs.select(
        (pl.col("exec_index") % sets).alias("set"),
        (pl.col(value) - pl.col(value).mean().over("run")).cast(pl.Float64).alias("d"),
        pl.col(value).cast(pl.Float64).alias("x"),
    )
    mean_ns = float(d["x"].mean())  # type: ignore[arg-type]
    per = (
        d.group_by("set")
        .agg(e=pl.col("d").mean(), v=pl.col("d").var(ddof=1) / pl.len(), n=pl.len())
        .filter(pl.col("n") >= MIN_PER_SET)
        .sort("set")
    )
    if per.height < 2 or mean_ns <= 0:
        return None
    e = per["e"].to_numpy()
    v = np.nan_to_num(per["v"].to_numpy(), nan=0.0)
    between = max(0.0, float(np.var(e, ddof=1)) - float(np.mean(v)))
    k = per.height
    sd = math.sqrt(between)
    half = t_critical(level, k - 1) * sd / math.sqrt(k)
    effects = tuple(float(x) / mean_ns * 100.0 for x in e)
    return PlacementTerm(sets=k, effects_pct=effects, sd_pct=sd / mean_ns * 100.0, half_pct=half / mean_ns * 100.0)
