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
        from fingrav.analysis.stages import run_differentiate
        from fingrav.provenance import provenance

        with logging_to(log[0]):
            run_differentiate(
                f"{RESULTS}/raw/{wildcards.scenario}",
                input.binned,
                input.calibration,
                input.truth[0] if input.truth else None,
                params.analysis,
                f"{RESULTS}/profiles/{wildcards.scenario}",
                provenance(stage="differentiate", config_hash=config_hash(params.analysis)),
            )
