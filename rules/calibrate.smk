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
        from fingrav.stages import run_calibrate

        with logging_to(log[0]):
            run_calibrate(
                params.device, params.calibration, params.seed, output.json, f"{RESULTS}/raw/calibration"
            )
