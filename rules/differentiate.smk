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
        raw_dir=lambda wc: f"{RESULTS}/raw/{wc.scenario}",
        out_dir=lambda wc: f"{RESULTS}/profiles/{wc.scenario}",
        analysis=analysis_params(),
    log:
        f"{RESULTS}/logs/differentiate/{{scenario}}.log",
    script:
        "scripts/differentiate.py"
