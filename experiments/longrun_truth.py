"""The long-run sustained power of the fidelity matrix's limit-cycling rows, against their CIs (issue 22).

The simulator's truth of a sustained headline is the true mean over the same run's whole limit cycles
(`fingrav.device.sim.device._sustained_truth`): it has no cycle-to-cycle sampling error, while the headline's CI, a
t-interval over the per-cycle means, is the CI of the long-run mean (what another run reads). This script runs, per
valid limit-cycling row of a matrix output, one long unstamped run of the row's kernel on a fresh simulated device
of the row's sweep (the same preset and overrides; `--cycles` nominal limit cycles after the first clamp, 60 s
where the preset has no cycle) and takes its truth as the long-run mean; it prints the CI's coverage of both truths.
A fresh device is cold where the matrix's reference run followed a collection: the long run's whole-cycle mean
is mostly warm (the H200 preset warms with a 2 s time constant), not exactly the same state.

    python experiments/longrun_truth.py --matrix /tmp/fidelity.jsonl --seed 11 --sweeps 50 --scenarios 4
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fidelity_matrix import draw_sweep  # noqa: E402

logger = logging.getLogger("longrun_truth")
NO_CYCLE_NS = 60e9  # the long run's length where the preset has no limit cycle


def long_run_w(cfg_dict: dict[str, Any], scenario: str, cycles: int) -> tuple[float, float]:
    """(long-run sustained power W, whole limit cycles in it) of one scenario's kernel on a fresh device."""
    from fingrav.config import parse_config
    from fingrav.device import open_device

    cfg = parse_config(cfg_dict)
    s = next(x for x in cfg.scenarios if x.name == scenario)
    with open_device(cfg.device, seed=cfg.seed + 7) as dev:
        k = dev.prepare(s.kernel)
        p = dev.preset
        period = p.limit_cycle_high_ns + p.limit_cycle_low_ns
        span = p.limit_cycle_start_ns + cycles * period if period else NO_CYCLE_NS
        dev.run_unstamped(k, max(1, int(span / (k.base_ns + p.launch_gap_ns))))
        tr = dev.sustained_truth_of_last_run()["total"]
    return tr["power_mw"] / 1e3, tr["cycles"]


def _ratio(r: dict[str, Any], truth: float) -> float:
    """|headline - truth| over the CI's half-width on the truth's side."""
    v = r["power_w"]
    half = (v - r["power_ci_low_w"]) if truth < v else (r["power_ci_high_w"] - v)
    return abs(v - truth) / half


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrix", type=Path, required=True, help="fidelity_matrix.py --out file")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--sweeps", type=int, default=50)
    ap.add_argument("--scenarios", type=int, default=4)
    ap.add_argument("--cycles", type=int, default=120)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    rng = np.random.default_rng(args.seed)
    cfgs = {c["sweep"]: c for c in (draw_sweep(rng, i, args.scenarios) for i in range(args.sweeps))}
    rows = [json.loads(line) for line in args.matrix.read_text().splitlines()]
    lc = [r for r in rows if r.get("valid") and r.get("power_source") == "sustained" and (r.get("limit_cycles") or 0)]
    groups: dict[str, list[tuple[float, float]]] = {"simulated limit cycle": [], "no simulated limit cycle": []}
    for r in lc:
        w, n = long_run_w(cfgs[r["sweep"]], r["scenario"], args.cycles)
        key = "simulated limit cycle" if n > 0 else "no simulated limit cycle"
        groups[key].append((_ratio(r, r["truth_power_w"]), _ratio(r, w)))
        logger.info("%s %s: headline %.2f W, truth %.2f W, long run %.2f W (%d cycles)", r["sweep"], r["scenario"],
                    r["power_w"], r["truth_power_w"], w, n)  # fmt: skip
    for key, x in groups.items():
        if not x:
            continue
        a, b = np.array(x).T
        print(
            f"{key}: {len(a)} rows; vs the same run's truth: covered {int(np.sum(a <= 1))}, |error|/half p50 "
            f"{np.median(a):.2f} p95 {np.percentile(a, 95):.2f}; vs the long run: covered {int(np.sum(b <= 1))}, "
            f"p50 {np.median(b):.2f} p95 {np.percentile(b, 95):.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
