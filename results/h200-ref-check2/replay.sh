#!/usr/bin/env bash
# Regenerate results/h200-ref-check2-replay/{summary.csv,report/,calibration/} from the raw data of
# results/h200-ref-check2 (gpu/raw, in the tree) on any machine, no GPU needed, check every number against the committed
# summary.csv within 0.1 %, then rebuild coverage.md and check it (benchmarks/replay_coverage.sh). Nothing committed
# is written.
set -euo pipefail
bash "$(cd "$(dirname "$0")/../.." && pwd)/benchmarks/replay_coverage.sh" h200-ref-check2
