#!/usr/bin/env bash
# Regenerate results/h200-db-replay/{summary.csv,report/,calibration/} from the committed raw data (results/h200-db/gpu/) on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db/summary.csv within 0.1 %; this
# folder is only read (git status stays clean). Run from anywhere after `pip install -e .` (see README.md).
exec bash "$(dirname "$0")/../../benchmarks/replay_dataset.sh" h200-db
