#!/usr/bin/env bash
# Regenerate results/h200-db3-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-db3 on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db3/summary.csv within 0.1 %.
# The raw data (gpu/raw, 8.7 MB) are committed in commit cf1d200 (an ancestor of main; the git tag data-h200-db3 where
# it exists), not in main's tree since stop 31 (the tree must stay under 64 MiB to travel to a GPU machine): this
# restores them into results/h200-db3/gpu/raw (ignored by git) first, checked against each scenario's MANIFEST.json by
# the replay. Nothing committed is written (git status stays clean). Run from anywhere after `pip install -e .`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/restore_raw.sh" h200-db3 data-h200-db3 cf1d200834382dfa02822e65f842fee24749fbda
exec bash "$root/benchmarks/replay_dataset.sh" h200-db3
