#!/usr/bin/env bash
# Regenerate results/h200-check/{summary.csv,report/,calibration/} from the committed raw data
# (results/h200-check/gpu/) on any machine, no GPU needed, and check that every number matches the committed
# summary.csv within 0.1 %. Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
committed=$(mktemp)
cp results/h200-check/summary.csv "$committed"
snakemake --cores "${CORES:-2}" --forceall --configfile config/h200-check-replay.yaml
python3 benchmarks/compare_summary.py "$committed" results/h200-check/summary.csv
