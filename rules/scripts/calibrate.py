"""Snakemake script of rule calibrate: clock sync + sensor characterization (fingrav.stages.run_calibrate)."""

from fingrav.stages import logging_to, run_calibrate

# Guarded: multi-GPU collection spawns processes that re-import this script as __mp_main__.
if __name__ == "__main__":
    sm = snakemake  # noqa: F821 - injected by Snakemake
    with logging_to(sm.log[0]):
        run_calibrate(sm.params.device, sm.params.calibration, sm.params.seed, sm.output.json, sm.params.raw_dir)
