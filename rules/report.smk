rule report:
    input:
        per_gpu=[f for s in SCENARIOS for f in unit_files(s)],
        calibration=[f for r in UNITS for f in calibration_jsons(SweepLayout(Path(r)))],
        combined=combined_outputs(),
        fleet=fleet_outputs(),
    output:
        csv=p(L.summary_csv),
        metrics=p(L.metrics_parquet),
        metrics_csv=p(L.metrics_csv),
        html=p(L.report_html),
    params:
        json=stage_params(
            root=ROOT,
            scenarios=SCENARIOS,
            meta=sweep_meta(),
            world_size=len(RANKS),
            cards={s: CFG.gpus_of(s) for s in SCENARIOS} if CARDS else None,
        ),
    log:
        p(L.log("report")),
    shell:
        stage("report")
