# Sourced by the device-call scripts (benchmarks/h200_*.sh) on the device machine, from the repository root:
# `device_env OUT LABEL` installs the wheels carried in .whl (pydantic & co. for the device's Python; README "The H200
# database") into /tmp/site, puts them and the checkout on PYTHONPATH, and writes the card's identity and starting
# temperature to OUT/gpu-LABEL-<UTC time>.csv.
device_env() {
  local out="$1" label="$2"
  if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
    export PYTHONPATH="/tmp/site:$PWD"
  else
    export PYTHONPATH="$PWD"
  fi
  export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,temperature.gpu,uuid --format=csv \
    > "$out/gpu-$label-$(date -u +%H%M%S).csv"
}
