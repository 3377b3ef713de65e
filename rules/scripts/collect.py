"""Snakemake script of rule collect: one scenario's raw data (fingrav.stages.run_collect)."""

from fingrav.stages import logging_to, run_collect

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    sm = snakemake  # noqa: F821 - injected by Snakemake
    with logging_to(sm.log[0]):
        run_collect(
            sm.params.device,
            sm.params.scenario,
            sm.params.policy,
            sm.params.seed,
            sm.input.calibration,
            sm.params.raw_dir,
            sm.output.truth[0] if sm.output.truth else None,
        )
