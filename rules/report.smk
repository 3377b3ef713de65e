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
        root=ROOT,
        meta=sweep_meta(),
        scenarios=SCENARIOS,
        world_size=len(RANKS),
    log:
        p(L.log("report")),
    script:
        STAGE_SCRIPT
