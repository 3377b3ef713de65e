#!/usr/bin/env bash
# Issue 22: how far apart two measurements of one below-cap kernel on one card are, and whether fingrav's headline
# sits apart from an uninstrumented reference by the instrument or by the card's state. Six kernels of db6
# (config/h200-state-reps.yaml: <name>-r1, -r2, -r3) collected three times on one H200, each collection followed by
# the uninstrumented reference of the same six (experiments/peers.py, 4 s back to back), the second preceded by it
# (F R, R F, F R: an offset that follows the order is the card's history, one that does not is the instrument's).
# Run on the device machine from the repository root, one call (~5 min wall):
#
#   bash benchmarks/h200_state_reps.sh                                        # results/h200-state-reps
#   CONFIG=config/h200-state-reps2.yaml bash benchmarks/h200_state_reps.sh    # results/h200-state-reps2
#
# The kernels are the config's scenarios named <kernel>-r1, in its order. REPS (default 3) collections each, the
# config naming <kernel>-r1 ... -r<REPS>.
# Leaves $OUT/state-reps.tgz (the sweep folder /tmp/reps: raw data, calibration, logs; the references' peers.json)
# and the card's identity and temperature between the blocks in $OUT/gpu-*.csv.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
source benchmarks/device_env.sh
device_env "$out" reps
cfg="${CONFIG:-config/h200-state-reps.yaml}"
mapfile -t kernels < <(sed -n 's/^- name: \(.*\)-r1$/\1/p' "$cfg")
temp() { nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw --format=csv,noheader >> "$out/temps.csv"; }
reps="${REPS:-3}"
for rep in $(seq 1 "$reps"); do
  names=(); args=()
  for k in "${kernels[@]}"; do names+=("$k-r$rep"); args+=(--scenario "$k-r$rep"); done
  fingrav() {
    echo "fingrav r$rep $(date -u +%T)" >> "$out/temps.csv"; temp
    timeout 200 python3 -m fingrav.cli gpu-sweep --config "$cfg" --out /tmp/reps "${args[@]}" --time-limit-s 190 \
      >> "$out/sweep.log" 2>&1 || echo "gpu-sweep r$rep: rc $?" >> "$out/sweep.log"
  }
  reference() {
    echo "reference r$rep $(date -u +%T)" >> "$out/temps.csv"; temp
    timeout 100 python3 experiments/peers.py --out "/tmp/ref-r$rep" --config "$cfg" --tools reference \
      --reference-s 4.0 --budget-s 90 --kernels "${names[@]}" >> "$out/peers.log" 2>&1 \
      || echo "peers r$rep: rc $?" >> "$out/peers.log"
  }
  if [ "$rep" = 2 ]; then reference; fingrav; else fingrav; reference; fi
done
temp
refs=(); for rep in $(seq 1 "$reps"); do refs+=("ref-r$rep"); done
tar czf "$out/state-reps.tgz" -C /tmp reps "${refs[@]}"
tail -3 "$out/sweep.log"; cat "$out/temps.csv"
