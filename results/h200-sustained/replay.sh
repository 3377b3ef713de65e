#!/usr/bin/env bash
# Regenerate results/h200-sustained/{summary.csv,report/,calibration/} from the committed raw data (results/h200-sustained/gpu/) on any
# machine, no GPU needed, and check that every number matches the committed summary.csv within 0.1 %. Run from
# anywhere after `pip install -e .` (see README.md).
exec bash "$(dirname "$0")/../../benchmarks/replay_dataset.sh" h200-sustained
