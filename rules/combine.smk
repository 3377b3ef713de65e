# Several GPUs (device.world_size > 1) only: report_outputs() asks for combined files then.
rule combine:
    input:
        profiles=lambda wc: profile_files(wc.scenario),
    output:
        p(L.combined("{scenario}")),
    params:
        digest=lambda wc: digest(combine_params(wc)),
    log:
        p(L.log("combine", "{scenario}")),
    run:
        run_stage("combine", combine_params(wildcards), log[0])
