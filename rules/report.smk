REPORT_PARAMS = stage_params(
    root=ROOT,
    scenarios=SCENARIOS,
    meta=sweep_meta(),
    world_size=len(RANKS),
    cards={s: CFG.gpus_of(s) for s in SCENARIOS} if CARDS else None,
)


rule report:
    input:
        per_gpu=[f for s in SCENARIOS for f in unit_files(s)],
        calibration=[f for r in UNITS for f in calibration_jsons(SweepLayout(Path(r)))],
        combined=combined_outputs(),
        fleet=fleet_outputs(),
    output:
        html=p(L.report_html),
    params:
        file=params_file(REPORT_PARAMS),
    log:
        p(L.log("report")),
    # one line instead of Snakemake's job info, whose input line lists every scenario's files (thousands of
    # characters on a kernel database)
    message:
        f"report of {len(SCENARIOS)} scenarios -> {{output.html}}"
    shell:
        stage("report")
