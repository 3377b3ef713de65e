rule report:
    input:
        profiles=[f for s in SCENARIOS for f in profile_files(s)],
        binned=[p(L.binned(s, k)) for s in SCENARIOS for k in RANKS],
        calibration=calibration_jsons(),
        combined=combined_outputs(),
    output:
        csv=p(L.summary_csv),
        html=p(L.report_html),
    params:
        json=stage_params(root=ROOT, scenarios=SCENARIOS, meta=sweep_meta(), world_size=len(RANKS)),
    log:
        p(L.log("report")),
    shell:
        stage("report")
