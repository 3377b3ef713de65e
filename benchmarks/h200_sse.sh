#!/usr/bin/env bash
# Issue 22 on one H200 (config/h200-sse.yaml): the SSE's kernel power of six 2.3-4 ms kernels through the 20 ms
# sensor read at its grid times (200 aimed SSE runs each, a 120-step calibration), then the uninstrumented reference
# (6 s back to back) of five of them for the headline-CI coverage check. One device call, from the repository root
# with OUT set:
#
#   LIMIT_S=360 bash benchmarks/h200_sse.sh    # ~7 min wall: calibration + 6 scenarios, then the references
#   CONFIG=config/h200-sse2.yaml PEERS=no LIMIT_S=420 bash benchmarks/h200_sse.sh   # the second call (~6 min)
#
# Leaves $OUT/<sweep>.tgz (the sweep folder: raw data, calibration, logs), $OUT/peers and the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${OUT:?set OUT to the output folder}"
limit="${LIMIT_S:-360}"
config="${CONFIG:-config/h200-sse.yaml}"
sweep="$(sed -n 's/^sweep: //p' "$config")"
source benchmarks/device_env.sh
device_env "$out" "sse"
rc=0
timeout "$limit" python3 -m fingrav.cli gpu-sweep --config "$config" >> "$out/sweep.log" 2>&1 || rc=$?
[ "${PEERS:-yes}" = no ] || timeout 90 python3 experiments/peers.py --out "$out/peers" --config config/h200-sse.yaml \
  --tools reference --reference-s 6.0 --budget-s 80 --kernels gemm-12k-16k-8k gemm-16k-16k-6k l3-70b-gateup-m3072 \
  prefill-70b-10k gemm-8k-16k > "$out/peers.log" 2>&1 || echo "peers: rc $?" >> "$out/peers.log"
tar czf "$out/$sweep.tgz" "results/$sweep"
echo "gpu-sweep rc $rc (124: stopped at LIMIT_S=$limit s)"
grep -E "SSE kernel power|differentiate" "$out/sweep.log" | tail -8 || true
tail -3 "$out/sweep.log"; [ ! -f "$out/peers.log" ] || tail -12 "$out/peers.log"
