#!/usr/bin/env bash
# Rebuilds summary.csv of results/h200-reference-gap from its committed gpu/*/peers.json into
# results/h200-reference-gap-replay/ (no GPU needed) and checks it against the committed one; this folder is only read.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/results/h200-reference-gap"
out="$root/results/h200-reference-gap-replay"
mkdir -p "$out"
python3 "$here/summarize.py" "$out/summary.csv" "0.15=$here/gpu/short/peers.json" "4=$here/gpu/long/peers.json"
diff "$here/summary.csv" "$out/summary.csv" && echo "summary.csv reproduced"
