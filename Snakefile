# fingrav: the FinGraV method as a Snakemake pipeline.
# fingrav-workflow: the mark by which fingrav's Snakemake logger plugin (snakemake_logger_plugin_fingrav), imported
# first, knows this workflow and screens its --configfile files before Snakemake reads them (no YTE; fingrav.preflight)
# calibrate -> collect (per scenario) -> bin -> differentiate (per scenario and GPU) -> [combine | fleet] -> report
# Run the default sweep on the simulated GPU:  snakemake --cores 1
# Another sweep:                               snakemake --cores 1 --configfile config/sim-h200.yaml
# (the sweep config is read by rules/common.smk with fingrav's own YAML reader: no `configfile:` directive)


include: "rules/common.smk"
include: "rules/calibrate.smk"
include: "rules/collect.smk"
include: "rules/bin.smk"
include: "rules/differentiate.smk"
include: "rules/combine.smk"
include: "rules/fleet.smk"
include: "rules/report.smk"


rule all:
    input:
        report_outputs(),
