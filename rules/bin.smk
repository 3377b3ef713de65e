rule bin:
    input:
        raw=lambda wc: raw_files(wc.scenario),
    output:
        f"{RESULTS}/binned/{{scenario}}.parquet",
    params:
        margin=margin_param,
    log:
        f"{RESULTS}/logs/bin/{{scenario}}.log",
    run:
        bin_job(output, params, wildcards, log)
