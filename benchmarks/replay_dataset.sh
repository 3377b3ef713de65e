#!/usr/bin/env bash
# Replay one committed real-GPU dataset and check it: regenerate results/<name>-replay/{summary.csv,metrics.*,report/,
# calibration/} from results/<name>/gpu/ through config/<name>-replay.yaml (no GPU needed) and check that every number
# of the committed results/<name>/summary.csv is reproduced within 0.1 % under its new name (`fingrav replay
# --check`). The dataset's folder (results/<name>/, sealed by its DATASET.json) is only read: `git status` stays
# clean. Each dataset's results/<name>/replay.sh calls this. Usage: replay_dataset.sh NAME
set -euo pipefail
name="$1"
cd "$(dirname "$0")/.."
snakemake --cores "${CORES:-2}" --forceall --configfile "config/$name-replay.yaml"
python3 -m fingrav.cli replay --check "$name" --committed "results/$name/summary.csv" --replayed "results/$name-replay"
