rule collect:
    input:
        calibration=calibration_jsons(),
    output:
        collected=all_collected("{scenario}"),
        truth=truth_files("{scenario}"),
    params:
        json=collect_params,
    log:
        p(U.log("collect", "{scenario}")),
    resources:
        **GPU_RESOURCES,
    shell:
        stage("collect")
