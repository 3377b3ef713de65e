rule calibrate:
    output:
        json=calibration_jsons(),
        raw=calibration_raw(),
    params:
        json=stage_params(
            root=ROOT,
            device=CFG.device.model_dump(mode="json"),
            calibration=CFG.calibration.model_dump(mode="json"),
            seed=CFG.seed,
        ),
    log:
        p(L.log("calibrate")),
    shell:
        stage("calibrate")
