"""Analysis stages (polars): bin (execution-time binning) and differentiate (LOIs, profiles, flags,
validation). Pure functions over frames; `stages` reads and writes the files."""

from fingrav.analysis.binning import bin_runs, golden_window
from fingrav.analysis.loi import LOIS_SCHEMA, assign_lois, host_executions, lois_frame
from fingrav.analysis.reference import reference_stats
from fingrav.analysis.stages import run_bin, run_differentiate
from fingrav.analysis.summarize import differentiate, summary_table

__all__ = [
    "LOIS_SCHEMA",
    "assign_lois",
    "bin_runs",
    "differentiate",
    "golden_window",
    "host_executions",
    "lois_frame",
    "reference_stats",
    "run_bin",
    "run_differentiate",
    "summary_table",
]
