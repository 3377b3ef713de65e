#!/usr/bin/env bash
# Regenerate results/h200-db-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-db on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db/summary.csv within 0.1 %.
# The raw data (gpu/raw, 4 MB, 11 scenarios) are committed in the git tag data-h200-db (commit 7857c56, an ancestor
# of main), not in main's tree since stop 34 (the tree must stay under 64 MiB to travel to a GPU machine): this
# restores them into results/h200-db/gpu/raw (ignored by git) first, checked against each scenario's MANIFEST.json by
# the replay. Nothing committed is written (git status stays clean). Run from anywhere after `pip install -e .`.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/restore_raw.sh" h200-db data-h200-db 7857c56f580a86fefd5005366103a4ad19182e06
exec bash "$root/benchmarks/replay_dataset.sh" h200-db
