#!/usr/bin/env bash
# Regenerate results/h200-db5-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-db5 on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db5/summary.csv within 0.1 %.
# Nothing committed is written (git status stays clean). Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
exec bash "$root/benchmarks/replay_dataset.sh" h200-db5
