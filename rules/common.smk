# Shared helpers: config validation (before any job runs), result paths and per-rule params.
import json
import os

from snakemake.exceptions import WorkflowError

from fingrav.config import config_hash, parse_config
from fingrav.errors import ConfigError
from fingrav.rawio import SCENARIO_FILES
from fingrav.stages import logging_to


# Snakemake merges --configfile over the default `configfile:`; a sweep config given on the command line
# must replace the default sweep entirely (not inherit its keys), so use only the command-line files
# (and --config values) when there are any.
def _load_sweep_config():
    settings = workflow.config_settings
    data = dict(settings.overwrite_config) if settings.configfiles else dict(config)
    try:
        return parse_config(data)
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


CFG = _load_sweep_config()
SWEEP = CFG.sweep
RESULTS = f"results/{SWEEP}"
SCENARIOS = [s.name for s in CFG.scenarios]
IS_SIM = CFG.device.backend == "sim"


wildcard_constraints:
    scenario="|".join(SCENARIOS),


def device_params():
    d = CFG.device.model_dump(mode="json")
    # multi-GPU fields left out at their defaults: one-GPU sweeps keep their params (no re-measuring)
    for key, default in (("world_size", 1), ("dist_backend", None)):
        if d.get(key) == default:
            d.pop(key, None)
    return d


def scenario_params(wildcards):
    # the run policy travels separately (merged with the sweep's): keep it out of the scenario's params
    return CFG.scenario(wildcards.scenario).model_dump(mode="json", exclude={"run_policy"})


def collect_policy_params(wildcards):
    # the margin is an analysis parameter: changing it must not re-measure anything
    return CFG.policy_for(wildcards.scenario).model_dump(mode="json", exclude={"margin"})


def margin_param(wildcards):
    return CFG.policy_for(wildcards.scenario).margin


def raw_files(scenario):
    return [f"{RESULTS}/raw/{scenario}/{name}" for name in SCENARIO_FILES]


def truth_file(scenario):
    return [f"{RESULTS}/truth/{scenario}.parquet"] if IS_SIM else []


def report_outputs():
    return [f"{RESULTS}/summary.csv", f"{RESULTS}/report/index.html"]


def sweep_meta():
    return {
        "sweep": SWEEP,
        "backend": CFG.device.backend,
        "config_hash": config_hash(CFG),
        "config": CFG.model_dump(mode="json"),
        # the paper's SSE-vs-SSP errors on the MI300X (METHOD.md), shown next to ours
        "paper_sse_vs_ssp_pct": {"cb-2k": 80.0, "cb-4k": 36.0, "cb-8k": 20.0},
    }


def analysis_params():
    return {
        **CFG.analysis.model_dump(mode="json"),
        "max_clock_residual_us": CFG.calibration.max_clock_residual_us,
    }

