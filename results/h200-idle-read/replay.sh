#!/usr/bin/env bash
# Regenerate results/h200-idle-read-replay/{summary.csv,report/,calibration/} from the raw data of
# results/h200-idle-read (gpu/raw, in the tree) on any machine, no GPU needed, and check every number against the
# committed summary.csv within 0.1 % (benchmarks/replay_dataset.sh). Nothing committed is written.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec bash "$root/benchmarks/replay_dataset.sh" h200-idle-read
