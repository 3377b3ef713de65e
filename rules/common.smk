# Shared helpers: the sweep config (validated once, before any job runs), its paths (fingrav.layout) and
# per-rule params. Every per-GPU path has a `gpu{rank}` part (rank 0 .. device.world_size - 1).
from snakemake.exceptions import WorkflowError

from fingrav.config import config_hash, parse_config
from fingrav.errors import ConfigError
from fingrav.layout import SweepLayout
from fingrav.stages.report import PAPER_SSE_VS_SSP_PCT


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
L = SweepLayout.of(CFG.sweep)
ROOT = str(L.root)
SCENARIOS = [s.name for s in CFG.scenarios]
RANKS = list(range(CFG.device.world_size))
IS_SIM = CFG.device.backend == "sim"
STAGE_SCRIPT = "scripts/stage.py"


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


def policy_params(wildcards):
    return CFG.policy_for(wildcards.scenario).model_dump(mode="json")


def scenario_params(wildcards):
    # the run policy travels separately (merged with the sweep's): keep it out of the scenario's params
    return CFG.scenario(wildcards.scenario).model_dump(mode="json", exclude={"run_policy"})


def analysis_params():
    return CFG.analysis.model_dump(mode="json")


def sweep_meta():
    return {
        "sweep": CFG.sweep,
        "backend": CFG.device.backend,
        "config_hash": config_hash(CFG),
        "config": CFG.model_dump(mode="json"),
        "paper_sse_vs_ssp_pct": PAPER_SSE_VS_SSP_PCT,
    }
