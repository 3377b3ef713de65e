#!/usr/bin/env bash
# Issue 22 on one H200 (config/h200-method.yaml): SSE kernel power of 2-4 ms kernels through the 20 ms sensor, phase
# targeting off vs on, the calibration kernel, then the uninstrumented reference (6 s back to back) of five of its
# kernels for the headline-CI coverage check. One device call, run from the repository root with OUT set:
#
#   LIMIT_S=330 bash benchmarks/h200_method.sh    # ~7 min wall: calibration + 9 scenarios, then the references
#
# Leaves $OUT/h200-method-gpu.tgz (the sweep folder: raw data, calibration, logs), $OUT/peers and the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
limit="${LIMIT_S:-330}"
source benchmarks/device_env.sh
device_env "$out" "method"
rc=0
timeout "$limit" python3 -m fingrav.cli gpu-sweep --config config/h200-method.yaml >> "$out/sweep.log" 2>&1 || rc=$?
timeout 100 python3 experiments/peers.py --out "$out/peers" --config config/h200-method.yaml \
  --tools reference --reference-s 6.0 --budget-s 90 --kernels gemm-8k-16k-aimed gemm-12k-16k-8k-aimed \
  prefill-70b-8k-aimed l3-70b-down-m4096-aimed gemm-8k > "$out/peers.log" 2>&1 || echo "peers: rc $?" >> "$out/peers.log"
tar czf "$out/h200-method-gpu.tgz" results/h200-method-gpu
echo "gpu-sweep rc $rc (124: stopped at LIMIT_S=$limit s)"
tail -3 "$out/sweep.log"; tail -12 "$out/peers.log"
