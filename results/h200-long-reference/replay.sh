#!/usr/bin/env bash
# Re-renders peers.md of results/h200-long-reference from its committed peers.json into results/h200-long-reference-replay/
# (no GPU needed); this folder is only read. Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/results/h200-long-reference-replay"
cp "$root/results/h200-long-reference/peers.json" "$root/results/h200-long-reference-replay/peers.json"
python3 "$root/experiments/peers.py" --out "$root/results/h200-long-reference-replay" \
  --from-json "$root/results/h200-long-reference-replay/peers.json"
diff <(grep "reference |" "$root/results/h200-long-reference/peers.md") \
  <(grep "reference |" "$root/results/h200-long-reference-replay/peers.md") && echo "every reference row reproduced"
