# Shared helpers: the sweep config (validated once, before any job runs), its paths (fingrav.layout) and
# per-rule params. Every per-GPU path has a `gpu{rank}` part (rank 0 .. device.world_size - 1).
#
# Units: the GPU rules (calibrate, collect) and the per-GPU analysis (bin, differentiate) work in the folder of one
# GPU (or lockstep group), laid out as a sweep: the sweep's own results/<sweep>/, or on a sweep over listed GPUs
# (device.gpus) results/<sweep>/cards/<i>/ for GPU i (fingrav.layout). Their paths have a `{root}` wildcard, that
# folder (`U`); `UNITS` maps each folder to the device config its jobs run with (GPU i: a one-GPU sweep of device i).
import json
import re
import sys
from pathlib import Path

from fingrav.backends import get_backend
from fingrav.config import config_hash, merge_config, parse_config, read_yaml
from fingrav.errors import ConfigError
from fingrav.layout import SweepLayout
from fingrav.stages import rule_command
from fingrav.preflight import check_sweep, estimate_line
from fingrav.provenance import export_git_commit
from fingrav.contracts.paper import SSE_VS_SSP_PCT


# The sweep config is read by fingrav itself (`fingrav.config.read_yaml`: YAML 1.2 numbers, no YTE, duplicate keys,
# aliases and the expanded size refused before any model is built), never taken from Snakemake's own parse (YAML
# 1.1: `0512` octal, `1.0e9` a string). A sweep config given on the command line replaces the default sweep entirely
# (config/config.yaml, read only when no --configfile is given); --config values go on top.
DEFAULT_CONFIG = "config/config.yaml"


def _load_sweep_config():
    settings = workflow.config_settings
    try:
        data = {}
        for path in settings.configfiles or [DEFAULT_CONFIG]:
            data = merge_config(data, read_yaml(path), str(path))
        data = merge_config(data, dict(settings.config or {}), "--config")
        cfg = parse_config(data)
        check_sweep(cfg)  # what the sweep needs beyond a valid config: files, libraries, the results folder
        if (line := estimate_line(cfg)) is not None:  # the GPU time it will take, known before it is spent
            print(line, file=sys.stderr)
        return cfg
    except ConfigError as err:  # one message and exit 1: no traceback, no job (a WorkflowError prints its stack)
        raise SystemExit(str(err)) from None


CFG = _load_sweep_config()

# Every job records the checkout's commit in its provenance (`fingrav.provenance.git_commit`: `git rev-parse` and
# `git status`, two processes); found once here, for the checkout as the workflow starts, and handed to every job
# through the environment (`export_git_commit`) instead of being asked again by each of a sweep's jobs.
export_git_commit()

L = SweepLayout.of(CFG.sweep)
ROOT = str(L.root)
SCENARIOS = [s.name for s in CFG.scenarios]
RANKS = list(range(CFG.device.world_size))
IS_SIM = get_backend(CFG.device.backend).truth  # the simulator writes ground truth
CARDS = CFG.device.cards  # listed GPUs (device.gpus); [] for a sweep of device.index (+ world_size ranks)
UNITS = {str(L.card(i).root): CFG.device.card(i) for i in CARDS} if CARDS else {ROOT: CFG.device}
U = SweepLayout(Path("{root}"))  # the paths of one unit, its folder a wildcard


def unit(wildcards):
    """The layout of a job's unit (its `{root}` wildcard), for input functions (their paths are used as they are)."""
    return SweepLayout(Path(wildcards.root))


def unit_roots(scenario):
    """The unit folders `scenario` runs in: the sweep's own, or the cards of its listed GPUs (CFG.gpus_of)."""
    return [str(L.card(i).root) for i in CFG.gpus_of(scenario)] if CARDS else [ROOT]


def device_params(device):
    """A device config as rule params; the listed-GPU fields left out while at their defaults, so that sweeps
    measured before they existed keep their params (Snakemake reruns a job whose params change)."""
    exclude = {"gpus": device.gpus is None, "fleet": not device.fleet}
    out = device.model_dump(mode="json", exclude={k for k, v in exclude.items() if v})
    if device.sim.card_spread_pct == 0:
        out["sim"].pop("card_spread_pct", None)
    return out


# GPU jobs ask for their GPUs: `gpu` (sbatch --gpus under the SLURM executor: profiles/slurm) and, on a sweep over
# listed GPUs, the slot of their GPU (`fingrav_gpu<i>`, 1 of each unless --resources says otherwise): Snakemake
# never runs two jobs on one GPU and runs jobs on different GPUs at once.
GPU_SLOTS = {f"fingrav_gpu{i}": str(L.card(i).root) for i in CARDS}
for _slot in GPU_SLOTS:
    if _slot not in workflow.global_resources:
        workflow.global_resources[_slot] = 1
GPU_RESOURCES = {
    "gpu": len(RANKS),
    **{slot: (lambda wildcards, root=root: int(wildcards.root == root)) for slot, root in GPU_SLOTS.items()},
}


PARAMS_DIR = Path(".snakemake") / "fingrav-params"


def params_file(params_json):
    """A job's parameters as a file, named by their sha256 (written when Snakemake builds the job, under its own
    `.snakemake/` folder, never results/): the same parameters, the same file. Parameters never go on the command
    line: Linux limits one argument to 131,072 bytes, which the report's (the whole sweep config) pass beyond ~1,000
    scenarios, and a callable's `args` can too. The path is the rule's param: Snakemake reruns the job when the
    parameters change and prints one short line, not the whole JSON. The job itself is a shell command (a `run:`
    job would start a whole Snakemake process per job: seconds each)."""
    import hashlib
    import os

    path = PARAMS_DIR / f"{hashlib.sha256(params_json.encode()).hexdigest()[:32]}.json"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(params_json)
        tmp.replace(path)
    return str(path)


def stage(name):
    """The one shell line of a rule: run stage `name` (fingrav.stages.__main__) with the rule's params file
    (`fingrav.stages.rule_command`)."""
    return rule_command(name, sys.executable)


wildcard_constraints:
    scenario="|".join(re.escape(s) for s in SCENARIOS),
    rank=r"\d+",
    root="|".join(re.escape(r) for r in UNITS),


# on a cluster only the GPU rules go to the scheduler; the analysis runs where Snakemake runs (seconds per job, in
# the preloaded stage worker), never waiting in a GPU queue
localrules:
    bin,
    differentiate,
    combine,
    fleet,
    report,


def p(path):
    """A layout path as the string Snakemake wants (wildcards like "{scenario}" pass through)."""
    return str(path)


def calibration_jsons(layout=U):
    return [p(layout.calibration_json(k)) for k in RANKS]


# Raw data is no rule's output: Snakemake deletes a job's outputs before it runs and when it fails. collect declares
# the receipts it writes after the raw files and their manifest (and moves an earlier collection to archive/ before
# measuring again); calibrate declares only calibration/gpu<k>.json (fingrav.layout, fingrav.rawio.archive).
def collected(scenario, rank, layout=U):
    return [p(layout.collected(scenario, rank))]


def all_collected(scenario, layout=U):
    return [f for k in RANKS for f in collected(scenario, k, layout)]


def truth_files(scenario, ranks=None, layout=U):
    ks = RANKS if ranks is None else ranks
    return [p(f) for k in ks for f in (layout.truth(scenario, k), layout.reading_truth(scenario, k))] if IS_SIM else []


def profile_files(scenario, layout=L):
    return [p(f) for k in RANKS for f in (layout.summary_json(scenario, k), layout.lois(scenario, k))]


def unit_files(scenario):
    """The report's inputs of `scenario`: its summary.json on every GPU, in each of its units. The report reads
    lois.parquet and the binned runs too, but those come with summary.json (the differentiate job writes lois.parquet
    beside it and reads the binned runs), so listing one file per job keeps Snakemake's job lines short; a lockstep
    group's or a fleet survey's scenario is in the report's input through its combined or fleet file (made from these)."""
    if len(RANKS) > 1 or CFG.device.fleet:
        return []
    units = [SweepLayout(Path(r)) for r in unit_roots(scenario)]
    return [p(u.summary_json(scenario, k)) for u in units for k in RANKS]


def combined_outputs():
    return [p(L.combined(s)) for s in SCENARIOS] if len(RANKS) > 1 else []


def fleet_outputs():
    return [p(L.fleet(s)) for s in SCENARIOS] if CFG.device.fleet else []


# summary.csv and metrics.{parquet,csv} are written by the report job (atomically, once every summary.json has been
# read) but are not its declared outputs: Snakemake deletes a job's outputs before it runs and when it fails, and a damaged summary.json must not cost
# the last good summary.csv.
def report_outputs():
    return [p(L.report_html)]


def stage_params(**values):
    """A stage's parameters as one JSON string (sorted keys: Snakemake reruns a job when it changes)."""
    return json.dumps(values, sort_keys=True, separators=(",", ":"))


def calibrate_params(wc):
    return stage_params(
        root=wc.root,
        device=device_params(UNITS[wc.root]),
        calibration=CFG.calibration.model_dump(mode="json"),
        seed=CFG.seed,
    )


def bin_params(wc):
    return stage_params(root=wc.root, scenario=wc.scenario, rank=int(wc.rank), analysis=ANALYSIS)


def differentiate_params(wc):
    return stage_params(
        root=wc.root,
        scenario=wc.scenario,
        rank=int(wc.rank),
        analysis=ANALYSIS,
        max_clock_residual_us=CFG.calibration.max_clock_residual_us,
        with_truth=IS_SIM,
    )


def combine_params(wc):
    return stage_params(root=ROOT, scenario=wc.scenario, world_size=len(RANKS), analysis=ANALYSIS)


def fleet_params(wc):
    return stage_params(root=ROOT, scenario=wc.scenario, gpus=CFG.gpus_of(wc.scenario), analysis=ANALYSIS)


def collect_params(wildcards):
    # the run policy travels separately (merged with the sweep's): keep it out of the scenario's params; the
    # calibration config goes along for a GPU the scheduler picked that is not the calibrated one (stages.calibrate)
    return stage_params(
        root=wildcards.root,
        device=device_params(UNITS[wildcards.root]),
        scenario=CFG.scenario(wildcards.scenario).model_dump(mode="json", exclude={"run_policy"}),
        policy=CFG.policy_for(wildcards.scenario).model_dump(mode="json"),
        seed=CFG.seed,
        calibration=CFG.calibration.model_dump(mode="json"),
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
