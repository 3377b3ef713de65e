rule bin:
    input:
        raw=lambda wc: raw_files(wc.scenario, wc.rank),
    output:
        p(L.binned("{scenario}", "{rank}")),
    params:
        json=lambda wc: stage_params(root=ROOT, scenario=wc.scenario, rank=int(wc.rank), analysis=ANALYSIS),
    log:
        p(L.log("bin", "{scenario}", "{rank}")),
    shell:
        stage("bin")
