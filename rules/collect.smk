rule collect:
    input:
        calibration=calibration_jsons(),
    output:
        collected=all_collected("{scenario}"),
        truth=truth_files("{scenario}"),
    params:
        file=lambda wc: params_file(collect_params(wc)),
    log:
        p(U.log("collect", "{scenario}")),
    resources:
        **GPU_RESOURCES,
    shell:
        stage("collect")
