# A fleet survey (device.gpus with device.fleet) only: report_outputs() asks for the fleet files then.
rule fleet:
    input:
        summaries=lambda wc: [p(L.card(i).summary_json(wc.scenario)) for i in CFG.gpus_of(wc.scenario)],
    output:
        p(L.fleet("{scenario}")),
    params:
        digest=lambda wc: digest(fleet_params(wc)),
    log:
        p(L.log("fleet", "{scenario}")),
    run:
        run_stage("fleet", fleet_params(wildcards), log[0])
