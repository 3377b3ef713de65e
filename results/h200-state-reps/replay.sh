#!/usr/bin/env bash
# Regenerate results/h200-state-reps-replay/{summary.csv,report/,calibration/} from the raw data of
# results/h200-state-reps (gpu/raw, in the tree) on any machine, no GPU needed, check every number against the
# committed summary.csv within 0.1 % (benchmarks/replay_dataset.sh), then rebuild the table pairs.md from the replay
# and the committed references (compare.py) and check it. Nothing committed is written (git status stays clean).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/replay_dataset.sh" h200-state-reps
python3 "$root/results/h200-state-reps/compare.py" --replay "$root/results/h200-state-reps-replay" \
  --against "$root/results/h200-state-reps/pairs.md"
echo "h200-state-reps: summary.csv and pairs.md reproduced"
