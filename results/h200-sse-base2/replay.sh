#!/usr/bin/env bash
# Regenerate results/h200-sse-base2-replay/{summary.csv,report/,calibration/} from the committed raw data (results/h200-sse-base2/gpu/)
# on any machine, no GPU needed, and check that every number matches the committed results/h200-sse-base2/summary.csv within
# 0.1 %; this folder is only read (git status stays clean). Run from anywhere after `pip install -e .` (README.md).
exec bash "$(dirname "$0")/../../benchmarks/replay_dataset.sh" h200-sse-base2
