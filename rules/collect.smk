rule collect:
    input:
        calibration=calibration_jsons(),
    output:
        raw=all_raw_files("{scenario}"),
        truth=truth_files("{scenario}"),
    params:
        root=ROOT,
        device=CFG.device.model_dump(mode="json"),
        scenario=scenario_params,
        policy=policy_params,
        seed=CFG.seed,
    log:
        p(L.log("collect", "{scenario}")),
    script:
        STAGE_SCRIPT
