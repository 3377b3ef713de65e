#!/usr/bin/env bash
# One run of the H200 kernel power database (issue 20): config/<SWEEP>.yaml (the Llama-3 grid) on one H200, in calls of
# <= 9.5 minutes wall each, into results/<SWEEP>-gpu (never a committed, sealed results/h200-db* folder). Run on the
# device machine from the repository root; README "The H200 database" gives the whole procedure.
#
#   bash benchmarks/h200_db.sh h200-db4 part1   # calibrate and collect scenarios until LIMIT_S (default 555 s)
#   bash benchmarks/h200_db.sh h200-db4 part2   # what is left until LIMIT_S (default 400 s), then the peers:
#                                               # aiconfigurator's protocol on 10 shapes and the uninstrumented
#                                               # reference (4 s back to back) on 5 of them (~70 s wall)
#
# SCENARIOS=FILE (names, whitespace-separated) collects only those, in that order: a call that does not carry the
# sweep folder of the call before (the raw data of 40 scenarios would not fit in what travels to the GPU machine)
# carries its calibration (results/<SWEEP>-gpu/calibration, results/<SWEEP>-gpu/raw/gpu0/calibration) and collects
# the scenarios the call before did not (README "The H200 database").
#
# Wall time: the plan's GPU time (`fingrav plan --config config/<SWEEP>.yaml --probes-from results/h200-db3/gpu`)
# + the kernels' preparation + ~25 s start-up per call. Each call leaves $OUT/<SWEEP>-gpu.tgz (the sweep folder so
# far: raw data, calibration, logs); unpack it into the checkout and carry results/<SWEEP>-gpu into the next call,
# which keeps every scenario already collected (`fingrav gpu-sweep` resumes; a scenario cut off by the time limit is
# archived, never deleted, and collected again). `part1` may be called again before `part2`.
set -euo pipefail
cd "$(dirname "$0")/.."
sweep="${1:?usage: h200_db.sh SWEEP part1|part2}"
part="${2:?usage: h200_db.sh SWEEP part1|part2}"
out="${OUT:?set OUT to the output folder}"
case "$part" in
  part1) limit="${LIMIT_S:-555}" ;;
  part2) limit="${LIMIT_S:-400}" ;;
  *) echo "usage: h200_db.sh SWEEP part1|part2" >&2; exit 2 ;;
esac
source benchmarks/device_env.sh
device_env "$out" "$part"
rc=0
only=()
if [ -n "${SCENARIOS:-}" ]; then mapfile -t only < <(tr -s ' \t' '\n\n' < "$SCENARIOS" | grep -v '^$'); fi
args=(); for n in ${only[@]+"${only[@]}"}; do args+=(--scenario "$n"); done
# --time-limit-s: no scenario is started that its plan does not expect to end before the limit (none is cut and
# archived); timeout stays as the hard stop
timeout "$limit" python3 -m fingrav.cli gpu-sweep --config "config/$sweep.yaml" ${args[@]+"${args[@]}"} \
  --time-limit-s "$((limit - 5))" >> "$out/sweep.log" 2>&1 || rc=$?
if [ "$part" = part2 ]; then
  peers=(l3-8b-qkv-m1 l3-8b-o-m128 l3-8b-gateup-m1024 l3-8b-down-m4096 l3-70b-qkv-m32 l3-70b-down-m512 l3-70b-o-m2048
         l3-prefill-8b-q_len2048 l3-decode-8b-kv_len4096-batch8 l3-prefill-70b-q_len8192)
  timeout 100 python3 experiments/peers.py --out /tmp/peers-aic --config "config/$sweep.yaml" \
    --tools aiconfigurator --budget-s 80 --kernels "${peers[@]}" > "$out/peers.log" 2>&1 || echo "peers: rc $?" >> "$out/peers.log"
  timeout 100 python3 experiments/peers.py --out /tmp/peers-ref --config "config/$sweep.yaml" \
    --tools reference --reference-s 4.0 --budget-s 80 --kernels l3-8b-qkv-m1 l3-8b-o-m128 l3-8b-down-m4096 \
    l3-70b-o-m2048 l3-decode-8b-kv_len4096-batch8 >> "$out/peers.log" 2>&1 || echo "peers: rc $?" >> "$out/peers.log"
  tar czf "$out/peers.tgz" -C /tmp peers-aic peers-ref 2>/dev/null || true  # one file: the device returns at most 8
fi
tar czf "$out/$sweep-gpu.tgz" "results/$sweep-gpu"
echo "gpu-sweep rc $rc (124: stopped at LIMIT_S=$limit s, or a scenario left for it; call again to go on)"
