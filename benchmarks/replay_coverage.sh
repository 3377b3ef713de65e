#!/usr/bin/env bash
# Replay one committed replicate dataset whose collections ran beside the uninstrumented reference
# (results/h200-ref-check, -ref-check2), check it (benchmarks/replay_dataset.sh), then rebuild its coverage.md
# (each collection's headline against the reference beside it: experiments/reference_coverage.py) from the replay
# and the committed references, and check that. Nothing committed is written. Usage: replay_coverage.sh NAME
set -euo pipefail
name="$1"
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/benchmarks/replay_dataset.sh" "$name"
(cd "$root" && python3 experiments/reference_coverage.py --datasets "$name") | diff "$root/results/$name/coverage.md" -
echo "$name: summary.csv and coverage.md reproduced"
