"""Does anything we do at a run's start reset the phase of the H200's NVML power sampling?

FinGraV's random delay before each run only spreads LOIs over the kernel if the sensor's sampling grid is
independent of the run. On the H200 the first sample after an SSE run's start was never within 2 ms of
it (results/h200, cb-4k): something at the run start seems to align the grid. This script runs four
variants of a short run after idle + a random delay and records when the first power sample lands after
the run starts:
  A  energy-counter read + GPU-clock read + 4 GEMMs (what the collector did)
  B  GPU-clock read + 4 GEMMs
  C  energy-counter read + 4 GEMMs
  D  4 GEMMs only
Usage (GPU machine): PYTHONPATH=. python3 experiments/nvml_phase.py --out DIR [--runs 120]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--runs", type=int, default=120)
    args = ap.parse_args()
    from fingrav.config import GemmKernel
    from fingrav.device.nvidia import NVMLDevice

    rng = random.Random(1)
    res: dict[str, list[float]] = {}
    with NVMLDevice(index=0) as dev:
        h = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
        dev.execute([(h, 8)])
        dev.start_sampling()
        starts: dict[str, list[int]] = {k: [] for k in "ABCD"}
        order = [k for k in "ABCD" for _ in range(args.runs)]
        rng.shuffle(order)
        for v in order:
            dev.sleep_ns(100_000_000 + int(rng.uniform(0, 20e6)))
            t0 = time.time_ns()
            if v in "AC":
                dev.energy_mj()
            if v in "AB":
                dev.read_gpu_clock(1)
            starts[v].append(t0)
            dev.execute([(h, 4)])
        dev.sleep_ns(200_000_000)
        s = dev.stop_sampling()
    tot = np.sort(s.t_ns[s.channel == "total"])
    lines = []
    for v, st in starts.items():
        st = np.asarray(st)
        i = np.searchsorted(tot, st)
        off = (tot[np.minimum(i, len(tot) - 1)] - st) / 1e6
        res[v] = off.tolist()
        hist = np.histogram(off, bins=[0, 1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 18, 20, 30])[0]
        lines.append(
            f"{v}: first sample after start, ms: p5 {np.percentile(off, 5):.1f} p50 {np.median(off):.1f} "
            f"frac<2ms {np.mean(off < 2):.3f} (uniform: 0.100)  hist {hist.tolist()}"
        )
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "nvml_phase.json").write_text(json.dumps(res))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
