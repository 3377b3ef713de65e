"""The report stage (polars, altair, vl-convert): `results/<sweep>/summary.csv` and a self-contained
`results/<sweep>/report/index.html` with one PNG per figure.

Public API: `build_report`; `summary_table` / `build_summary_table` (the summary.csv frame).
"""

from fingrav.report.build import build_report
from fingrav.report.table import build_summary_table, summary_table

__all__ = ["build_report", "build_summary_table", "summary_table"]
