rule calibrate:
    output:
        json=calibration_jsons(),
    params:
        digest=lambda wc: digest(calibrate_params(wc)),
    log:
        p(U.log("calibrate")),
    resources:
        **GPU_RESOURCES,
    run:
        run_stage("calibrate", calibrate_params(wildcards), log[0])
