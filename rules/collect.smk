rule collect:
    input:
        calibration=f"{RESULTS}/calibration.json",
    output:
        raw=multiext(
            f"{RESULTS}/raw/{{scenario}}/",
            "executions.parquet",
            "runs.parquet",
            "clock.parquet",
            "samples.parquet",
            "plan.json",
        ),
        truth=truth_file("{scenario}"),
    params:
        device=device_params(),
        scenario=scenario_params,
        policy=collect_policy_params(),
        seed=CFG.seed,
    log:
        f"{RESULTS}/logs/collect/{{scenario}}.log",
    run:
        from fingrav.stages import run_collect

        with logging_to(log[0]):
            run_collect(
                params.device,
                params.scenario,
                params.policy,
                params.seed,
                input.calibration,
                f"{RESULTS}/raw/{wildcards.scenario}",
                output.truth[0] if output.truth else None,
            )
