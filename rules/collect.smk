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
        policy=collect_policy_params,
        seed=CFG.seed,
    log:
        f"{RESULTS}/logs/collect/{{scenario}}.log",
    run:
        collect_job(input, output, params, wildcards, log)
