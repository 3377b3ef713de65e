"""Snakemake script of rule differentiate: LOIs, profiles, energy, flags of one scenario
(fingrav.analysis.stages.run_differentiate)."""

from fingrav.analysis.stages import run_differentiate
from fingrav.config import config_hash
from fingrav.provenance import provenance
from fingrav.stages import logging_to

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    sm = snakemake  # noqa: F821 - injected by Snakemake
    with logging_to(sm.log[0]):
        run_differentiate(
            sm.params.raw_dir,
            sm.input.binned,
            sm.input.calibration,
            sm.input.truth[0] if sm.input.truth else None,
            sm.params.analysis,
            sm.params.out_dir,
            provenance(stage="differentiate", config_hash=config_hash(sm.params.analysis)),
        )
