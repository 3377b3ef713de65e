rule bin:
    input:
        collected=lambda wc: collected(wc.scenario, wc.rank, unit(wc)),
    output:
        p(U.binned("{scenario}", "{rank}")),
    params:
        digest=lambda wc: digest(bin_params(wc)),
    log:
        p(U.log("bin", "{scenario}", "{rank}")),
    run:
        run_stage("bin", bin_params(wildcards), log[0])
