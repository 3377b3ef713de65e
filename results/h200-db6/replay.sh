#!/usr/bin/env bash
# Regenerate results/h200-db6-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-db6 on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db6/summary.csv within 0.1 %.
# The raw data (gpu/raw, 20 MB, 106 scenarios) are committed in the git tag data-h200-db6 (commit 12e8ef1, an ancestor
# of main), not in main's tree (the tree must stay under 64 MiB to travel to a GPU machine): this restores them into
# results/h200-db6/gpu/raw (ignored by git) first, checked against each scenario's MANIFEST.json by the replay.
# Nothing committed is written (git status stays clean). Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/restore_raw.sh" h200-db6 data-h200-db6 12e8ef151c474d7b97dc24c9b30026082657f82c
exec bash "$root/benchmarks/replay_dataset.sh" h200-db6
