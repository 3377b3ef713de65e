# Shared helpers: the sweep config (validated once, before any job runs), its paths (fingrav.layout) and
# per-rule params. Every per-GPU path has a `gpu{rank}` part (rank 0 .. device.world_size - 1).
import json
import shlex
import sys

from snakemake.exceptions import WorkflowError

from fingrav.config import config_hash, parse_config, read_yaml
from fingrav.errors import ConfigError
from fingrav.layout import SweepLayout
from fingrav.preflight import check_sweep
from fingrav.contracts.paper import SSE_VS_SSP_PCT


# Snakemake merges --configfile over the default `configfile:`; a sweep config given on the command line
# must replace the default sweep entirely (not inherit its keys), so use only the command-line files
# (and --config values) when there are any.
def _load_sweep_config():
    settings = workflow.config_settings
    data = dict(settings.overwrite_config) if settings.configfiles else dict(config)
    try:
        for path in settings.configfiles or ["config/config.yaml"]:
            read_yaml(path)  # fingrav's own safe parse: duplicate keys, aliases and size are refused
        cfg = parse_config(data)
        check_sweep(cfg)  # what the sweep needs beyond a valid config: files, libraries, the results folder
        return cfg
    except ConfigError as err:
        raise WorkflowError(str(err)) from None


CFG = _load_sweep_config()
L = SweepLayout.of(CFG.sweep)
ROOT = str(L.root)
SCENARIOS = [s.name for s in CFG.scenarios]
RANKS = list(range(CFG.device.world_size))
IS_SIM = CFG.device.backend == "sim"


def stage(name):
    """The one shell line of a rule: run stage `name` (fingrav.stages.__main__) with the rule's params.json."""
    return f"{shlex.quote(sys.executable)} -m fingrav.stages {name} --log {{log:q}} --params {{params.json:q}}"


wildcard_constraints:
    scenario="|".join(SCENARIOS),
    rank=r"\d+",


def p(path):
    """A layout path as the string Snakemake wants (wildcards like "{scenario}" pass through)."""
    return str(path)


def calibration_jsons():
    return [p(L.calibration_json(k)) for k in RANKS]


def calibration_raw():
    return [p(f) for k in RANKS for f in L.calibration_files(k)]


def raw_files(scenario, rank):
    return [p(f) for f in L.scenario_files(scenario, rank)]


def all_raw_files(scenario):
    return [f for k in RANKS for f in raw_files(scenario, k)]


def truth_files(scenario, ranks=None):
    return [p(L.truth(scenario, k)) for k in (RANKS if ranks is None else ranks)] if IS_SIM else []


def profile_files(scenario):
    return [p(f) for k in RANKS for f in (L.summary_json(scenario, k), L.lois(scenario, k))]


def combined_outputs():
    return [p(L.combined(s)) for s in SCENARIOS] if len(RANKS) > 1 else []


def report_outputs():
    return [p(L.summary_csv), p(L.report_html)]


def stage_params(**values):
    """A stage's parameters as one JSON string (sorted keys: Snakemake reruns a job when it changes)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def collect_params(wildcards):
    # the run policy travels separately (merged with the sweep's): keep it out of the scenario's params
    return stage_params(
        root=ROOT,
        device=CFG.device.model_dump(mode="json"),
        scenario=CFG.scenario(wildcards.scenario).model_dump(mode="json", exclude={"run_policy"}),
        policy=CFG.policy_for(wildcards.scenario).model_dump(mode="json"),
        seed=CFG.seed,
    )


ANALYSIS = CFG.analysis.model_dump(mode="json")


def sweep_meta():
    return {
        "sweep": CFG.sweep,
        "backend": CFG.device.backend,
        "config_hash": config_hash(CFG),
        "config": CFG.model_dump(mode="json"),
        "paper_sse_vs_ssp_pct": SSE_VS_SSP_PCT,
    }
