"""Non-physical power samples: found and set aside before any statistic sees them.

A sample is non-physical when its power is not a finite number, exceeds `MAX_PLAUSIBLE_MW` (no single GPU
board draws that much; the all-ones "not available" patterns such as 0xFFFFFFFF mW fall here), or, on the
total channel, is zero or negative (a powered GPU never reads 0 W: 0 is a driver's "no value"; component
channels near 0 W may read at or below 0 through sensor noise, which is kept so that their means stay
unbiased). Samples of one channel
that share a timestamp with different values contradict each other: all of them are set aside (identical
copies keep one). Timestamps that go backwards in the file's order are counted (the file is written sorted,
so a backwards step means the writer or the sampler misbehaved). The counts travel into summary.json and
the `nonphysical_samples` flag; the kept samples are what every statistic uses, so one bad sample cannot
move a number.
"""

from __future__ import annotations

import logging

import polars as pl

from fingrav.contracts.flags import MAX_PLAUSIBLE_MW
from fingrav.contracts.roles import TOTAL

logger = logging.getLogger(__name__)


def screen_samples(samples: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """(the physical samples in file order, counts {nonfinite, nonpositive, implausible, conflicting_duplicates,
    identical_duplicates, time_backwards, rejected})."""
    p = pl.col("power_mw")
    nonpositive = p.is_finite() & (p <= 0) & (pl.col("channel").cast(pl.String) == TOTAL)
    marked = samples.with_row_index("_i").with_columns(
        _bad_value=~p.is_finite() | nonpositive | (p > MAX_PLAUSIBLE_MW),
        _n_dup=pl.len().over("t_ns", "channel"),
        _n_val=p.n_unique().over("t_ns", "channel"),
        _back=(pl.col("t_ns").diff().over("channel") < 0).fill_null(False),
    )
    counts = marked.select(
        nonfinite=(~p.is_finite()).sum(),
        nonpositive=nonpositive.sum(),
        implausible=(p.is_finite() & (p > MAX_PLAUSIBLE_MW)).sum(),
        conflicting_duplicates=((pl.col("_n_dup") > 1) & (pl.col("_n_val") > 1)).sum(),
        time_backwards=pl.col("_back").sum(),
    ).row(0, named=True)
    keep = marked.filter(~pl.col("_bad_value") & (pl.col("_n_val") == 1))
    before_dedup = keep.height
    keep = keep.unique(["t_ns", "channel"], keep="first", maintain_order=True)
    out = {k: int(v or 0) for k, v in counts.items()}
    out["identical_duplicates"] = before_dedup - keep.height
    out["rejected"] = samples.height - keep.height
    if out["rejected"] or out["time_backwards"]:
        logger.warning("samples: %d of %d set aside (%s)", out["rejected"], samples.height, out)
    return keep.drop("_i", "_bad_value", "_n_dup", "_n_val", "_back"), out
