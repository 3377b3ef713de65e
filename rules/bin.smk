rule bin:
    input:
        raw=lambda wc: raw_files(wc.scenario),
    output:
        f"{RESULTS}/binned/{{scenario}}.parquet",
    params:
        raw_dir=lambda wc: f"{RESULTS}/raw/{wc.scenario}",
        margin=margin_param,
    log:
        f"{RESULTS}/logs/bin/{{scenario}}.log",
    script:
        "scripts/bin.py"
