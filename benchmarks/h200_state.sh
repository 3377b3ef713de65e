#!/usr/bin/env bash
# Issue 22 (the card's state between two runs) and issue 20 (the host's time between runs counted towards the idle)
# on one H200 (config/h200-state.yaml): the uninstrumented reference of eight kernels right before the sweep, the
# sweep, the same references right after it. One device call, run from the repository root with OUT set:
#
#   bash benchmarks/h200_state.sh      # ~5 min wall: ~70 s of references, the sweep (~81 GPU-s planned), ~70 s again
#
# Leaves $OUT/h200-state-gpu.tgz (the sweep folder: raw data, calibration, logs), $OUT/before.tgz and $OUT/after.tgz
# (the peers runs), the logs and $OUT/temps.csv (the card's temperature and power between the steps).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
source benchmarks/device_env.sh
device_env "$out" "state"
kernels="l3-8b-qkv-m1 l3-70b-qkv-m32 gemv-16k-bf16 gemm-512-bf16 gemm-8k-bf16 l3-8b-gateup-m1024 l3-70b-down-m512
l3-prefill-8b-q_len2048"
temps() {
  nvidia-smi --query-gpu=timestamp,temperature.gpu,temperature.memory,power.draw,clocks.sm --format=csv,noheader \
    | sed "s/^/$1, /" >> "$out/temps.csv"
}
references() {  # $1: before | after
  timeout 120 python3 experiments/peers.py --out "$out/$1" --config config/h200-state.yaml --tools reference \
    --reference-s 6.0 --budget-s 110 --kernels $kernels > "$out/$1.log" 2>&1 || echo "peers $1: rc $?" >> "$out/$1.log"
}
temps start
references before
temps before-done
rc=0
timeout 300 python3 -m fingrav.cli gpu-sweep --config config/h200-state.yaml >> "$out/sweep.log" 2>&1 || rc=$?
temps sweep-done
references after
temps after-done
tar czf "$out/h200-state-gpu.tgz" results/h200-state-gpu
# the device returns at most 8 files from $OUT: the two peers runs travel as one archive each (stop 27 lost
# before/peers.json by returning them as loose files)
for r in before after; do tar czf "$out/$r.tgz" -C "$out" "$r" && rm -r "${out:?}/$r"; done
echo "gpu-sweep rc $rc"
cat "$out/temps.csv"; tail -2 "$out/sweep.log"; tar xzOf "$out/before.tgz" before/peers.md | grep "| reference |" || true
tar xzOf "$out/after.tgz" after/peers.md | grep "| reference |" || true
