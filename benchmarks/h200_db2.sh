#!/usr/bin/env bash
# The H200 kernel power database, second run (issue 20): config/h200-db2.yaml (106 shapes of the Llama-3 grid) on one
# H200, in calls of under 9 minutes wall each, into results/h200-db2-gpu (never results/h200-db, committed and
# sealed). Run on the device machine from the repository root; README "The H200 database" gives the whole procedure.
#
#   bash benchmarks/h200_db2.sh collect   # one call: calibrate (first call only) and collect scenarios until
#                                         # LIMIT_S (default 500 s); resumes where the last call stopped
#   bash benchmarks/h200_db2.sh peers     # the last call: what is left (until LIMIT_S, default 320 s), then the
#                                         # peers on 10 of the shapes (~110 s wall)
#
# Each call leaves $OUT/h200-db2-gpu.tgz (the sweep folder so far: raw data, calibration, logs); unpack it into the
# checkout and carry results/h200-db2-gpu into the next call, which keeps every scenario already collected
# (`fingrav gpu-sweep` resumes; a scenario cut off by the time limit is archived, never deleted, and collected again).
set -euo pipefail
cd "$(dirname "$0")/.."
part="${1:?usage: h200_db2.sh collect|peers}"
out="${OUT:?set OUT to the output folder}"
if [ "$part" = peers ]; then limit="${LIMIT_S:-320}"; else limit="${LIMIT_S:-500}"; fi
source benchmarks/device_env.sh
device_env "$out" "$part"
rc=0
timeout "$limit" python3 -m fingrav.cli gpu-sweep --config config/h200-db2.yaml >> "$out/sweep.log" 2>&1 || rc=$?
if [ "$part" = peers ]; then
  # aiconfigurator's collector protocol and the uninstrumented reference (5 s back to back) on 10 shapes (~65 GPU-s)
  timeout 200 python3 experiments/peers.py --out "$out/peers" --config config/h200-db2.yaml \
    --tools reference aiconfigurator --reference-s 5.0 --budget-s 180 --kernels l3-8b-qkv-m1 l3-8b-o-m128 \
    l3-8b-gateup-m1024 l3-8b-down-m4096 l3-70b-qkv-m32 l3-70b-down-m512 l3-70b-o-m2048 l3-prefill-8b-q_len2048 \
    l3-decode-8b-kv_len4096-batch8 l3-prefill-70b-q_len8192 > "$out/peers.log" 2>&1 || echo "peers: rc $?" >> "$out/peers.log"
fi
tar czf "$out/h200-db2-gpu.tgz" results/h200-db2-gpu
echo "gpu-sweep rc $rc (124: stopped at LIMIT_S=$limit s; call again to go on)"
