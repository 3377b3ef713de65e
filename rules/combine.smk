# Several GPUs (device.world_size > 1) only: report_outputs() asks for combined files then.
rule combine:
    input:
        profiles=lambda wc: profile_files(wc.scenario),
    output:
        p(L.combined("{scenario}")),
    params:
        root=ROOT,
        world_size=len(RANKS),
        analysis=analysis_params(),
    log:
        p(L.log("combine", "{scenario}")),
    script:
        STAGE_SCRIPT
