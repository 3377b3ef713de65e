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
        file=lambda wc: params_file(differentiate_params(wc)),
    log:
        p(U.log("differentiate", "{scenario}", "{rank}")),
    shell:
        stage("differentiate")
