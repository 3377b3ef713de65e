"""The card's state between runs on hardware: how far apart repeated measurements of one below-cap kernel on one card
are (issue 22). Reads replayed datasets whose scenarios repeat a kernel under suffixed names (results/h200-state-reps:
``<name>-r1``/``-r2``/``-r3``; results/h200-placement: ``<name>-a``/``-b``), keeps the valid headlines that do not
limit-cycle, and pools the sample variance of their power above the calibrated idle (% of that excess) over the
kernels, with its degrees of freedom (sum of n - 1). A kernel whose collections ran different executions (execution
times more than `reference_coverage.MAX_CYCLE_DIFF_PCT` apart: on the H200, results/h200-state-reps4's
l3-8b-gateup-m1 ran at 55.2 µs in two preparations and 60.2 µs in the third: the same library kernel, a rare mode
of a whole preparation, experiments/gemm_modes.py) is listed and left out: another execution, not the card's state.
Prints one line per kernel and the pooled value, which `fingrav.backends` records for the card (`CardStateSpec`).

    python experiments/card_state_sd.py [--datasets h200-state-reps h200-placement] [--root results]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

from reference_coverage import MAX_CYCLE_DIFF_PCT  # noqa: E402

SUFFIX = re.compile(r"^(?P<kernel>.+)-(?:r\d+|a|b)$")


def excess_by_kernel(root: Path, name: str) -> dict[str, list[tuple[float, float, float, float]]]:
    """Per kernel: the valid, non-cycling headlines of dataset `name`'s replay as (power above the calibrated idle,
    its CI's low and high end, the same offset, W; the execution time, µs)."""
    rep = root / f"{name}-replay"
    cal = json.loads((rep / "calibration" / "gpu0.json").read_text())
    idle_w = float(cal["sensor"]["total"]["idle_mw"]) / 1e3
    s = pl.read_csv(rep / "summary.csv", infer_schema_length=0)
    out: dict[str, list[tuple[float, float, float, float]]] = {}
    for row in s.iter_rows(named=True):
        m = SUFFIX.match(row["scenario"])
        notes = f"{row.get('flags') or ''};{row.get('notes') or ''}"
        if m is None or row["valid"] != "true" or "power_limit_cycling" in notes:
            continue
        p, lo, hi = (float(row[c]) - idle_w for c in ("power_w", "power_ci_low_w", "power_ci_high_w"))
        out.setdefault(f"{name}:{m['kernel']}", []).append((p, lo, hi, float(row["exec_time_us"])))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["h200-state-reps", "h200-placement"])
    ap.add_argument("--root", type=Path, default=Path("results"))
    args = ap.parse_args(argv)
    ss, df, pairs, covered = 0.0, 0, 0, 0
    for name in args.datasets:
        for kernel, runs in excess_by_kernel(args.root, name).items():
            if len(runs) < 2:
                continue
            times = [t for *_, t in runs]
            if 100.0 * (max(times) / min(times) - 1.0) > MAX_CYCLE_DIFF_PCT:
                print(f"{kernel}: left out, its collections ran different executions ({min(times):.2f} ... "
                      f"{max(times):.2f} µs)")  # fmt: skip
                continue
            xs = [p for p, *_ in runs]
            # each headline's CI against every other collection of the kernel (ordered pairs)
            pairs += len(runs) * (len(runs) - 1)
            covered += sum(
                lo <= q <= hi for i, (_, lo, hi, _) in enumerate(runs) for j, (q, *_) in enumerate(runs) if i != j
            )
            mean = sum(xs) / len(xs)
            rel = [100.0 * (x / mean - 1.0) for x in xs]
            var = sum(r * r for r in rel) / (len(xs) - 1)
            ss, df = ss + var * (len(xs) - 1), df + len(xs) - 1
            print(f"{kernel}: {len(xs)} runs, excess {mean:.1f} W, sd {math.sqrt(var):.3f} % of it")
    if df == 0:
        print("no repeated kernel", file=sys.stderr)
        return 1
    print(f"pooled: sd {math.sqrt(ss / df):.3f} % of the power above idle, {df} degrees of freedom")
    print(f"a headline's CI (as replayed) covers another collection of its kernel in {covered} of {pairs} pairs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
