rule differentiate:
    input:
        collected=lambda wc: collected(wc.scenario, wc.rank, unit(wc)),
        binned=p(U.binned("{scenario}", "{rank}")),
        calibration=p(U.calibration_json("{rank}")),
        truth=lambda wc: truth_files(wc.scenario, [wc.rank], unit(wc)),
    output:
        lois=p(U.lois("{scenario}", "{rank}")),
        summary=p(U.summary_json("{scenario}", "{rank}")),
    params:
        digest=lambda wc: digest(differentiate_params(wc)),
    log:
        p(U.log("differentiate", "{scenario}", "{rank}")),
    run:
        run_stage("differentiate", differentiate_params(wildcards), log[0])
