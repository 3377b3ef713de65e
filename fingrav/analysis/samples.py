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

import numpy as np
import polars as pl

from fingrav.contracts.flags import MAX_PLAUSIBLE_MW
from fingrav.contracts.roles import TOTAL

logger = logging.getLogger(__name__)


def screen_samples(samples: pl.DataFrame) -> tuple[pl.DataFrame, dict[str, int]]:
    """(the physical samples in file order, counts {nonfinite, nonpositive, implausible, conflicting_duplicates,
    identical_duplicates, time_backwards, rejected}). numpy per channel: ~0.3 s for 1e7 samples."""
    n = samples.height
    power = samples["power_mw"].to_numpy().astype(np.float64, copy=False)
    t = samples["t_ns"].to_numpy().astype(np.int64, copy=False)
    channel = samples["channel"].cast(pl.String)
    finite = np.isfinite(power)
    is_total = (channel == TOTAL).to_numpy()
    nonpositive = finite & (power <= 0) & is_total
    implausible = finite & (power > MAX_PLAUSIBLE_MW)
    keep = finite & ~nonpositive & ~implausible
    counts = {
        "nonfinite": int((~finite).sum()),
        "nonpositive": int(nonpositive.sum()),
        "implausible": int(implausible.sum()),
        "conflicting_duplicates": 0,
        "identical_duplicates": 0,
        "time_backwards": 0,
    }
    for name in channel.unique().to_list():
        idx = np.flatnonzero((channel == name).to_numpy())
        ti = t[idx]
        backwards = int(np.count_nonzero(np.diff(ti) < 0))
        counts["time_backwards"] += backwards
        if backwards:  # duplicates are neighbours only in time order
            order = np.argsort(ti, kind="stable")
            ts, ps, js = ti[order], power[idx][order], idx[order]
        else:
            ts, ps, js = ti, power[idx], idx
        same = np.flatnonzero(ts[1:] == ts[:-1])  # sample same+1 repeats the timestamp of sample same
        if same.size == 0:
            continue
        # runs of one timestamp: conflicting when their values differ (all set aside), else keep the first
        start = np.ones(ts.size, dtype=bool)
        start[same + 1] = False
        run_id = np.cumsum(start) - 1
        dup_runs = np.unique(run_id[same])
        for r in dup_runs:
            members = js[run_id == r]
            vals = ps[run_id == r]
            if np.unique(vals[np.isfinite(vals)]).size > 1:
                counts["conflicting_duplicates"] += members.size
                keep[members] = False
            else:
                counts["identical_duplicates"] += members.size - 1
                keep[members[1:]] = False
    counts["rejected"] = int(n - keep.sum())
    if counts["rejected"] or counts["time_backwards"]:
        logger.warning("samples: %d of %d set aside (%s)", counts["rejected"], n, counts)
    return (samples if counts["rejected"] == 0 else samples.filter(pl.Series(keep))), counts
