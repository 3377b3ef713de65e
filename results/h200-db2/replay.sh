#!/usr/bin/env bash
# Regenerate results/h200-db2-replay/{summary.csv,report/,calibration/} from the raw data of results/h200-db2 on any
# machine, no GPU needed, and check that every number matches the committed results/h200-db2/summary.csv within 0.1 %.
# The raw data (gpu/raw, 20.2 MB, 106 scenarios) are committed in the git tag data-h200-db2, not in main's tree (the
# tree must stay under 64 MiB to travel to a GPU machine): this restores them into results/h200-db2/gpu/raw
# (ignored by git) first, checked against each scenario's MANIFEST.json by the replay. Nothing committed is written
# (git status stays clean). Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
if [ ! -d "$root/results/h200-db2/gpu/raw" ]; then
  if ! git -C "$root" rev-parse -q --verify "refs/tags/data-h200-db2" > /dev/null 2>&1; then
    echo "results/h200-db2: its raw data are in the git tag data-h200-db2 of the fingrav repository; this copy has" \
      "no such tag (a tarball?): clone the repository (git clone --no-single-branch, or git fetch --tags)" >&2
    exit 2
  fi
  git -C "$root" archive data-h200-db2 results/h200-db2/gpu/raw | tar -x -C "$root"
  chmod -R a-w "$root/results/h200-db2/gpu/raw"
fi
exec bash "$root/benchmarks/replay_dataset.sh" h200-db2
