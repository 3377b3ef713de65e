rule calibrate:
    output:
        json=calibration_jsons(),
    params:
        file=lambda wc: params_file(calibrate_params(wc)),
    log:
        p(U.log("calibrate")),
    resources:
        **GPU_RESOURCES,
    shell:
        stage("calibrate")
