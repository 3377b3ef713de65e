"""The bin stage's record of how it chose the golden runs (binned.parquet's metadata, copied into summary.json's
`binning`): the margin and, per kind of measure run, the execution-time bin and what was dropped and why.

Written by the bin stage (`fingrav.analysis.binning.bin_runs`), read by differentiate and the report. Times in ns
(inclusive bounds), the margin a fraction (0.02 = 2 %).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class KindBin(BaseModel):
    """The bin of one kind of measure run ("ssp" | "sse"): its bounds (None without golden runs), how many runs
    there were, how many are golden, and why the others were dropped ({reason: runs})."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bin_low_ns: int | None = None
    bin_high_ns: int | None = None
    runs_total: int = 0
    runs_golden: int = 0
    reasons: dict[str, int] = {}


class BinningSummary(KindBin):
    """The whole binning: the SSP kind's bin at the top level (as before SSE runs existed), every kind's in
    `bins`, the margin and where it came from ("analysis.margin" | "guidance table"; set by the stage)."""

    format_version: int | None = None  # the parquet record's own version (`fingrav.rawio.write_arrow`)
    margin: float
    margin_source: str | None = None
    bins: dict[str, KindBin] = {}
