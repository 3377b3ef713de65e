rule differentiate:
    input:
        raw=lambda wc: raw_files(wc.scenario, wc.rank),
        binned=p(L.binned("{scenario}", "{rank}")),
        calibration=p(L.calibration_json("{rank}")),
        truth=lambda wc: truth_files(wc.scenario, [wc.rank]),
    output:
        lois=p(L.lois("{scenario}", "{rank}")),
        summary=p(L.summary_json("{scenario}", "{rank}")),
    params:
        json=lambda wc: stage_params(
            root=ROOT,
            scenario=wc.scenario,
            rank=int(wc.rank),
            analysis=ANALYSIS,
            max_clock_residual_us=CFG.calibration.max_clock_residual_us,
            with_truth=IS_SIM,
        ),
    log:
        p(L.log("differentiate", "{scenario}", "{rank}")),
    shell:
        stage("differentiate")
