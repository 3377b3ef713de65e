rule calibrate:
    output:
        json=f"{RESULTS}/calibration.json",
        raw=multiext(f"{RESULTS}/raw/calibration/", "clock.parquet", "steps.parquet", "samples.parquet"),
        ranks=rank_calibration_jsons(),  # device.world_size > 1: ranks k >= 1 (rules/ranks.smk)
        ranks_raw=rank_calibration_raw(),
    params:
        raw_dir=lambda wc, output: os.path.dirname(output.raw[0]),
        device=device_params(),
        calibration=CFG.calibration.model_dump(mode="json"),
        seed=CFG.seed,
    log:
        f"{RESULTS}/logs/calibrate.log",
    script:
        "scripts/calibrate.py"
