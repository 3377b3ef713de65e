# A fleet survey (device.gpus with device.fleet) only: report_outputs() asks for the fleet files then.
rule fleet:
    input:
        summaries=lambda wc: [p(L.card(i).summary_json(wc.scenario)) for i in CFG.gpus_of(wc.scenario)],
    output:
        p(L.fleet("{scenario}")),
    params:
        file=lambda wc: params_file(fleet_params(wc)),
    log:
        p(L.log("fleet", "{scenario}")),
    shell:
        stage("fleet")
