# Several GPUs (device.world_size > 1): bin and differentiate ranks k >= 1 (rank 0 uses bin / differentiate),
# then combine every rank of a scenario into profiles/<scenario>/combined.json. Helpers: rules/common_ranks.smk.


rule bin_rank:
    input:
        raw=lambda wc: rank_raw_files(wc.scenario, wc.rank),
    output:
        f"{RESULTS}/binned/rank{{rank}}/{{scenario}}.parquet",
    params:
        margin=margin_param,
    log:
        f"{RESULTS}/logs/bin/rank{{rank}}/{{scenario}}.log",
    run:
        bin_rank_job(output, params, wildcards, log)


rule differentiate_rank:
    input:
        raw=lambda wc: rank_raw_files(wc.scenario, wc.rank),
        binned=f"{RESULTS}/binned/rank{{rank}}/{{scenario}}.parquet",
        calibration=f"{RESULTS}/calibration.rank{{rank}}.json",
        truth=lambda wc: rank_truth_file(wc.scenario, wc.rank),
    output:
        lois=f"{RESULTS}/profiles/{{scenario}}/rank{{rank}}/lois.parquet",
        summary=f"{RESULTS}/profiles/{{scenario}}/rank{{rank}}/summary.json",
    params:
        analysis=analysis_params(),
    log:
        f"{RESULTS}/logs/differentiate/rank{{rank}}/{{scenario}}.log",
    run:
        differentiate_rank_job(input, output, params, wildcards, log)


rule combine:
    input:
        lambda wc: rank_profile_files(wc.scenario),
    output:
        f"{RESULTS}/profiles/{{scenario}}/combined.json",
    params:
        analysis=analysis_params(),
        world_size=WORLD_SIZE,
    log:
        f"{RESULTS}/logs/combine/{{scenario}}.log",
    run:
        combine_job(output, params, wildcards, log)
