rule calibrate:
    output:
        json=calibration_jsons(),
    params:
        json=lambda wc: stage_params(
            root=wc.root,
            device=device_params(UNITS[wc.root]),
            calibration=CFG.calibration.model_dump(mode="json"),
            seed=CFG.seed,
        ),
    log:
        p(U.log("calibrate")),
    resources:
        **GPU_RESOURCES,
    shell:
        stage("calibrate")
