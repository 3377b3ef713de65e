# Several GPUs (device.world_size > 1) only: report_outputs() asks for combined files then.
rule combine:
    input:
        profiles=lambda wc: profile_files(wc.scenario),
    output:
        p(L.combined("{scenario}")),
    params:
        file=lambda wc: params_file(combine_params(wc)),
    log:
        p(L.log("combine", "{scenario}")),
    shell:
        stage("combine")
