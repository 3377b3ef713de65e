rule bin:
    input:
        collected=lambda wc: collected(wc.scenario, wc.rank, unit(wc)),
    output:
        p(U.binned("{scenario}", "{rank}")),
    params:
        json=lambda wc: stage_params(root=wc.root, scenario=wc.scenario, rank=int(wc.rank), analysis=ANALYSIS),
    log:
        p(U.log("bin", "{scenario}", "{rank}")),
    shell:
        stage("bin")
