# Helpers for several GPUs (device.world_size > 1; fingrav.ranks has the file layout; the rules are in
# rules/ranks.smk): rank 0 keeps the single-GPU paths and rules; ranks k >= 1 get their own calibration, raw
# data, truth, bin and differentiate outputs, and `combine` writes profiles/<scenario>/combined.json.
# With world_size 1 every list here is [] and none of the rank rules is needed.
from fingrav.rawio import CALIBRATION_RAW_FILES

WORLD_SIZE = CFG.device.world_size
RANKS = list(range(1, WORLD_SIZE))  # ranks with their own files (rank 0: the single-GPU paths)


wildcard_constraints:
    rank="[1-9][0-9]*",


def rank_calibration_jsons():
    return [f"{RESULTS}/calibration.rank{k}.json" for k in RANKS]


def rank_calibration_raw():
    return [f"{RESULTS}/raw/calibration/rank{k}/{name}" for k in RANKS for name in CALIBRATION_RAW_FILES]


def rank_raw_files(scenario, rank):
    return [f"{RESULTS}/raw/{scenario}/rank{rank}/{name}" for name in SCENARIO_FILES]


def all_rank_raw_files(scenario):
    return [f for k in RANKS for f in rank_raw_files(scenario, k)]


def rank_truth_file(scenario, rank):
    return [f"{RESULTS}/truth/rank{rank}/{scenario}.parquet"] if IS_SIM else []


def all_rank_truth_files(scenario):
    return [f for k in RANKS for f in rank_truth_file(scenario, k)]


def rank_profile_files(scenario):
    """lois.parquet and summary.json of every rank (rank 0 first)."""
    dirs = [f"{RESULTS}/profiles/{scenario}"] + [f"{RESULTS}/profiles/{scenario}/rank{k}" for k in RANKS]
    return [f"{d}/{name}" for d in dirs for name in ("summary.json", "lois.parquet")]


def combined_outputs():
    return [f"{RESULTS}/profiles/{s}/combined.json" for s in SCENARIOS] if WORLD_SIZE > 1 else []


def bin_rank_job(output, params, wildcards, log):
    from fingrav.analysis.stages import run_bin
    from fingrav.provenance import provenance

    raw = f"{RESULTS}/raw/{wildcards.scenario}/rank{wildcards.rank}"
    with logging_to(log[0]):
        prov = provenance(stage="bin", config_hash=config_hash({"margin": params.margin}), rank=int(wildcards.rank))
        run_bin(raw, f"{raw}/plan.json", output[0], params.margin, prov)


def differentiate_rank_job(input, output, params, wildcards, log):
    from pathlib import Path

    from fingrav.analysis.stages import run_differentiate
    from fingrav.provenance import provenance

    with logging_to(log[0]):
        run_differentiate(
            f"{RESULTS}/raw/{wildcards.scenario}/rank{wildcards.rank}",
            input.binned,
            input.calibration,
            input.truth[0] if input.truth else None,
            params.analysis,
            Path(output.summary).parent,
            provenance(stage="differentiate", config_hash=config_hash(params.analysis), rank=int(wildcards.rank)),
            scenario=wildcards.scenario,
        )


def combine_job(output, params, wildcards, log):
    from fingrav.analysis.combine import run_combine
    from fingrav.provenance import provenance

    with logging_to(log[0]):
        run_combine(
            RESULTS,
            wildcards.scenario,
            params.world_size,
            params.analysis,
            output[0],
            provenance(stage="combine", config_hash=config_hash(params.analysis)),
        )
