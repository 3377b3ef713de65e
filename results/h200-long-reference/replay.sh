#!/usr/bin/env bash
# Rebuilds summary.csv and peers.md of results/h200-long-reference from its committed gpu/peers.json into
# results/h200-long-reference-replay/ (no GPU needed) and checks both against the committed ones; this folder is only
# read. Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/results/h200-long-reference"
out="$root/results/h200-long-reference-replay"
mkdir -p "$out"
cp "$here/gpu/peers.json" "$out/peers.json"
python3 "$root/experiments/peers.py" --out "$out" --from-json "$out/peers.json" > /dev/null
python3 "$here/summarize.py" "$out/peers.json" "$out/summary.csv"
diff "$here/summary.csv" "$out/summary.csv"
diff <(grep "reference |" "$here/peers.md") <(grep "reference |" "$out/peers.md")
echo "summary.csv and every reference row of peers.md reproduced"
