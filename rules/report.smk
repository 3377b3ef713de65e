rule report:
    input:
        summaries=expand(f"{RESULTS}/profiles/{{scenario}}/summary.json", scenario=SCENARIOS),
        lois=expand(f"{RESULTS}/profiles/{{scenario}}/lois.parquet", scenario=SCENARIOS),
        calibration=f"{RESULTS}/calibration.json",
        binned=expand(f"{RESULTS}/binned/{{scenario}}.parquet", scenario=SCENARIOS),
        combined=combined_outputs(),  # device.world_size > 1 (rules/ranks.smk)
    output:
        csv=f"{RESULTS}/summary.csv",
        html=f"{RESULTS}/report/index.html",
    params:
        results=lambda wc, output: os.path.dirname(output.csv),
        meta=sweep_meta(),
        scenarios=SCENARIOS,
    log:
        f"{RESULTS}/logs/report.log",
    script:
        "scripts/report.py"
