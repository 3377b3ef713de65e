rule collect:
    input:
        calibration=calibration_jsons(),
    output:
        collected=all_collected("{scenario}"),
        truth=truth_files("{scenario}"),
    params:
        digest=lambda wc: digest(collect_params(wc)),
    log:
        p(U.log("collect", "{scenario}")),
    resources:
        **GPU_RESOURCES,
    run:
        run_stage("collect", collect_params(wildcards), log[0])
