rule calibrate:
    output:
        json=f"{RESULTS}/calibration.json",
        raw=multiext(f"{RESULTS}/raw/calibration/", "clock.parquet", "steps.parquet", "samples.parquet"),
    params:
        device=device_params(),
        calibration=CFG.calibration.model_dump(mode="json"),
        seed=CFG.seed,
    log:
        f"{RESULTS}/logs/calibrate.log",
    run:
        calibrate_job(output, params, log)
