rule bin:
    input:
        raw=lambda wc: raw_files(wc.scenario, wc.rank),
    output:
        p(L.binned("{scenario}", "{rank}")),
    params:
        root=ROOT,
        analysis=analysis_params(),
    log:
        p(L.log("bin", "{scenario}", "{rank}")),
    script:
        STAGE_SCRIPT
