rule collect:
    input:
        calibration=f"{RESULTS}/calibration.json",
        rank_calibrations=rank_calibration_jsons(),
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
        ranks=all_rank_raw_files("{scenario}"),  # device.world_size > 1: ranks k >= 1 (rules/ranks.smk)
        rank_truth=all_rank_truth_files("{scenario}"),
    params:
        raw_dir=lambda wc: f"{RESULTS}/raw/{wc.scenario}",
        device=device_params(),
        scenario=scenario_params,
        policy=collect_policy_params,
        seed=CFG.seed,
    log:
        f"{RESULTS}/logs/collect/{{scenario}}.log",
    script:
        "scripts/collect.py"
