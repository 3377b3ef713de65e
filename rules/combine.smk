# Several GPUs (device.world_size > 1) only: report_outputs() asks for combined files then.
rule combine:
    input:
        profiles=lambda wc: profile_files(wc.scenario),
    output:
        p(L.combined("{scenario}")),
    params:
        json=lambda wc: stage_params(root=ROOT, scenario=wc.scenario, world_size=len(RANKS), analysis=ANALYSIS),
    log:
        p(L.log("combine", "{scenario}")),
    shell:
        stage("combine")
