rule differentiate:
    input:
        raw=lambda wc: raw_files(wc.scenario),
        binned=f"{RESULTS}/binned/{{scenario}}.parquet",
        calibration=f"{RESULTS}/calibration.json",
        truth=truth_file("{scenario}"),
    output:
        lois=f"{RESULTS}/profiles/{{scenario}}/lois.parquet",
        summary=f"{RESULTS}/profiles/{{scenario}}/summary.json",
    params:
        analysis=analysis_params(),
    log:
        f"{RESULTS}/logs/differentiate/{{scenario}}.log",
    run:
        differentiate_job(input, params, wildcards, log)
