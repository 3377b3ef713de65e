#!/usr/bin/env bash
# Regenerate results/h200-placement-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-placement
# on any machine, no GPU needed, and check that every number matches the committed results/h200-placement/summary.csv
# within 0.1 %, and that the committed ab.md is the A/B table of the committed summary.csv. The raw data (gpu/raw, 3.4 MB, 12 scenarios)
# are committed in the git tag data-h200-placement (commit 6fffff1, an ancestor of main), not in main's tree (the tree
# must stay under 64 MiB to travel to a GPU machine): this restores them into results/h200-placement/gpu/raw (ignored
# by git) first, checked against each scenario's MANIFEST.json by the replay. Nothing committed is written (git status
# stays clean). Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/restore_raw.sh" h200-placement data-h200-placement 6fffff1b5c96014e49f00e5e2a4475a4438af259
bash "$root/benchmarks/replay_dataset.sh" h200-placement
# ab.md is the table of the committed summary.csv (which the replay check above reproduces, with the intended changes
# it lists: since stop 35 the headline CIs carry the card's state between runs, fingrav.analysis.card_state)
python3 "$root/results/h200-placement/compare.py" "$root/results/h200-placement/summary.csv" |
  diff - "$root/results/h200-placement/ab.md"
