#!/usr/bin/env bash
# Replay one committed real-GPU dataset and check it: regenerate results/<name>/{summary.csv,metrics.*,report/,calibration/}
# from results/<name>/gpu/ through config/<name>-replay.yaml (no GPU needed) and check that every number of the
# committed summary.csv is reproduced within 0.1 % under its new name (`fingrav replay --check`). Each dataset's
# results/<name>/replay.sh calls this. Usage: replay_dataset.sh NAME
set -euo pipefail
name="$1"
cd "$(dirname "$0")/.."
committed=$(mktemp)
cp "results/$name/summary.csv" "$committed"
snakemake --cores "${CORES:-2}" --forceall --configfile "config/$name-replay.yaml"
python3 -m fingrav.cli replay --check "$name" --committed "$committed" --replayed "results/$name"
