rule collect:
    input:
        calibration=calibration_jsons(),
    output:
        raw=all_raw_files("{scenario}"),
        truth=truth_files("{scenario}"),
    params:
        json=collect_params,
    log:
        p(L.log("collect", "{scenario}")),
    shell:
        stage("collect")
