#!/usr/bin/env bash
# Regenerate results/h200-state-reps4-replay/{summary.csv,report/,calibration/} from the raw data of
# results/h200-state-reps4 (gpu/raw, in the tree) on any machine, no GPU needed, check every number against the
# committed summary.csv within 0.1 % (benchmarks/replay_dataset.sh), then rebuild the table pairs.md from the replay
# and the committed references (results/h200-state-reps/compare.py) and check it (the fingrav CIs may be wider since
# the card-state term grew). Nothing committed is written.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/replay_dataset.sh" h200-state-reps4
python3 "$root/results/h200-state-reps/compare.py" --dataset "$root/results/h200-state-reps4" \
  --against "$root/results/h200-state-reps4/pairs.md"
echo "h200-state-reps4: summary.csv and pairs.md reproduced"
