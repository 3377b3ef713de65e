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
        json=lambda wc: stage_params(
            root=wc.root,
            scenario=wc.scenario,
            rank=int(wc.rank),
            analysis=ANALYSIS,
            max_clock_residual_us=CFG.calibration.max_clock_residual_us,
            with_truth=IS_SIM,
        ),
    log:
        p(U.log("differentiate", "{scenario}", "{rank}")),
    shell:
        stage("differentiate")
