"""Snakemake script of rule report: summary.csv, figures and index.html (fingrav.report.build_report)."""

from pathlib import Path

from fingrav.provenance import provenance
from fingrav.report import build_report
from fingrav.stages import logging_to

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    sm = snakemake  # noqa: F821 - injected by Snakemake
    with logging_to(sm.log[0]):
        meta = {**sm.params.meta, "provenance": provenance(stage="report", config_hash=sm.params.meta["config_hash"])}
        build_report(Path(sm.params.results), sm.params.scenarios, meta, Path(sm.params.results) / "report")
