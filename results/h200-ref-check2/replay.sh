#!/usr/bin/env bash
# Regenerate results/h200-ref-check2-replay/{summary.csv,report/,calibration/} from the raw data of
# results/h200-ref-check2 (gpu/raw, in the tree) on any machine, no GPU needed, check every number against the
# committed summary.csv within 0.1 % (benchmarks/replay_dataset.sh), then rebuild coverage.md (each collection's
# headline against the uninstrumented reference beside it: experiments/reference_coverage.py) from the replay and the
# committed references, and check it. Nothing committed is written.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/replay_dataset.sh" h200-ref-check2
(cd "$root" && python3 experiments/reference_coverage.py --datasets h200-ref-check2) \
  | diff "$root/results/h200-ref-check2/coverage.md" -
echo "h200-ref-check2: summary.csv and coverage.md reproduced"
