"""Snakemake script of rule bin: golden runs of one scenario (fingrav.analysis.stages.run_bin)."""

from fingrav.analysis.stages import run_bin
from fingrav.config import config_hash
from fingrav.provenance import provenance
from fingrav.stages import logging_to

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    sm = snakemake  # noqa: F821 - injected by Snakemake
    with logging_to(sm.log[0]):
        prov = provenance(stage="bin", config_hash=config_hash({"margin": sm.params.margin}))
        run_bin(sm.params.raw_dir, f"{sm.params.raw_dir}/plan.json", sm.output[0], sm.params.margin, prov)
