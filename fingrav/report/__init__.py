"""The report stage (polars, altair, vl-convert): `summary.csv` and a self-contained `report/index.html` with
one PNG per figure, under a sweep's `fingrav.layout.SweepLayout`.

Public API: `build_report`; `summary_frame` (the summary.csv frame, built from `fingrav.contracts.summary`).
"""

from fingrav.report.build import build_report
from fingrav.report.table import summary_frame

__all__ = ["build_report", "summary_frame"]
