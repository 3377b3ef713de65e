#!/usr/bin/env bash
# Regenerate results/h200-probe-ab-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-probe-ab on any
# machine, no GPU needed, and check that every number matches the committed results/h200-probe-ab/summary.csv within 0.1 %.
# The raw data (gpu/raw, 3.1 MB, 15 scenarios) are committed in the git tag data-h200-db4 (commit 4f3f7dc, an
# ancestor of main), not in main's tree (the
# tree must stay under 64 MiB to travel to a GPU machine): this restores them into results/h200-probe-ab/gpu/raw
# (ignored by git) first, checked against each scenario's MANIFEST.json by the replay. Nothing committed is written
# (git status stays clean). Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bash "$root/benchmarks/restore_raw.sh" h200-probe-ab data-h200-db4 4f3f7dc99a3df0142b1bc379c5387317657487ae
bash "$root/benchmarks/replay_dataset.sh" h200-probe-ab
# the A/B table of the replayed summary is the committed one (the method SSP's CI may differ: wider since stop 32,
# narrower since stop 39)
python3 "$root/results/h200-probe-ab/compare.py" "$root/results/h200-probe-ab-replay/summary.csv" \
  --against "$root/results/h200-probe-ab/ab.md" > /dev/null
