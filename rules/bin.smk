rule bin:
    input:
        collected=lambda wc: collected(wc.scenario, wc.rank, unit(wc)),
    output:
        p(U.binned("{scenario}", "{rank}")),
    params:
        file=lambda wc: params_file(bin_params(wc)),
    log:
        p(U.log("bin", "{scenario}", "{rank}")),
    shell:
        stage("bin")
