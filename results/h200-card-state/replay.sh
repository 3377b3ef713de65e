#!/usr/bin/env bash
# Rebuilds the tables of results/h200-card-state (card_state.md of each call, and summary.csv: the spread between
# runs per call, shape and input-set count) from its committed card_state.json into results/h200-card-state-replay/
# (no GPU needed) and checks them against the committed ones; this folder is only read.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
here="$root/results/h200-card-state"
out="$root/results/h200-card-state-replay"
for call in state prepare-1set prepare-4sets sets control; do
  mkdir -p "$out/$call"
  python3 "$root/experiments/card_state.py" --from-json "$here/gpu/$call/card_state.json" > "$out/$call/card_state.md"
  diff "$here/gpu/$call/card_state.md" "$out/$call/card_state.md"
done
python3 "$root/experiments/card_state.py" --summary "$out/summary.csv" \
  $(for call in state prepare-1set prepare-4sets sets control; do echo "$call=$here/gpu/$call/card_state.json"; done)
diff "$here/summary.csv" "$out/summary.csv"
echo "card_state.md of the five calls and summary.csv reproduced"
