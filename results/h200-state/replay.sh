#!/usr/bin/env bash
# Regenerate results/h200-state-replay/{summary.csv,report/,calibration/} from the committed raw data
# (results/h200-state/gpu/) on any machine, no GPU needed, check that every number matches the committed
# results/h200-state/summary.csv within 0.1 %, then that state.md (the headline against the references before and
# after the sweep) follows from the replayed summary. This folder is only read (git status stays clean). Run from
# anywhere after `pip install -e .` (see README.md).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
bash "$here/../../benchmarks/replay_dataset.sh" h200-state
python3 "$here/compare.py" --summary "$here/../h200-state-replay/summary.csv" --check
