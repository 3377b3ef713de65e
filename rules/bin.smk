rule bin:
    input:
        raw=lambda wc: raw_files(wc.scenario),
    output:
        f"{RESULTS}/binned/{{scenario}}.parquet",
    params:
        margin=CFG.run_policy.margin,
    log:
        f"{RESULTS}/logs/bin/{{scenario}}.log",
    run:
        from fingrav.analysis.stages import run_bin
        from fingrav.provenance import provenance

        with logging_to(log[0]):
            run_bin(
                f"{RESULTS}/raw/{wildcards.scenario}",
                f"{RESULTS}/raw/{wildcards.scenario}/plan.json",
                output[0],
                params.margin,
                provenance(stage="bin", config_hash=config_hash({"margin": params.margin})),
            )
