#!/usr/bin/env bash
# Issue 22 (the card's state between runs): experiments/card_state.py's plan on one H200, one device call, run from
# the repository root with OUT set (results/h200-card-state/REPRODUCE.md):
#
#   bash benchmarks/h200_card_state.sh               # plan "default": ~3 min wall
#   PLAN=prepare bash benchmarks/h200_card_state.sh  # plan "prepare": four preparations of three shapes, ~1 min
#   PLAN=prepare MIN_SETS=4 bash benchmarks/h200_card_state.sh  # ... each rotating through >= 4 input sets
#   PLAN=sets bash benchmarks/h200_card_state.sh     # plan "sets": six preparations with one set and six with four
#   PLAN=control bash benchmarks/h200_card_state.sh  # plan "control": a control and two shapes after it, 8 times
#
# Leaves $OUT/card_state.json, $OUT/card_state.md, $OUT/card_state.log and the card's identity (device_env).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
source benchmarks/device_env.sh
device_env "$out" "card-state"
rc=0
timeout 400 python3 experiments/card_state.py --out "$out" --config config/h200-db4.yaml --plan "${PLAN:-default}" --min-sets "${MIN_SETS:-1}" > "$out/card_state.log" 2>&1 \
  || rc=$?
echo "card_state rc $rc"
tail -3 "$out/card_state.log" | grep -v "^|" || true
cat "$out/card_state.md" 2> /dev/null || tail -20 "$out/card_state.log"
