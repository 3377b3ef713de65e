"""The table of results/h200-state-reps: each kernel's three collections (fingrav's headline and CI, its cycle) beside
the uninstrumented reference run right after (before, in the second) each, from a replay's summary.csv and
metrics.csv and the committed peers/peers-r<k>.json. Markdown on stdout.

    python results/h200-state-reps/compare.py [--replay results/h200-state-reps-replay]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl

HERE = Path(__file__).resolve().parent
KERNELS = (
    "l3-decode-8b-kv_len1024-batch1",
    "l3-8b-qkv-m1",
    "l3-8b-down-m1",
    "l3-70b-qkv-m32",
    "l3-70b-gateup-m8",
    "l3-decode-8b-kv_len4096-batch8",
)
ORDER = {1: "F, R", 2: "R, F", 3: "F, R"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--replay", type=Path, default=HERE.parent / "h200-state-reps-replay")
    args = ap.parse_args(argv)
    s = pl.read_csv(args.replay / "summary.csv", infer_schema_length=0)
    m = pl.read_csv(args.replay / "metrics.csv", infer_schema_length=0)
    ref = {}
    for r in (1, 2, 3):
        for res in json.loads((HERE / "peers" / f"peers-r{r}.json").read_text())["results"]:
            if res["tool"] == "reference" and res.get("power_w") is not None:
                ref[res["kernel"]] = res
    head = "| kernel | run | order | fingrav W [95 % CI] | ± % | cycle µs | reference W [CI] | cycle µs | diff % |"
    print(head)
    print("|---|---|---|---|---|---|---|---|---|")
    for k in KERNELS:
        for r in (1, 2, 3):
            name = f"{k}-r{r}"
            row = s.filter(pl.col("scenario") == name).row(0, named=True)
            p, lo, hi = (float(row[c]) for c in ("power_w", "power_ci_low_w", "power_ci_high_w"))
            cyc = m.filter((pl.col("scenario") == name) & (pl.col("metric") == "sustained_cycle_time_us"))
            cy = float(cyc["value"][0]) if cyc.height else float("nan")
            rr = ref.get(name)
            cyc_note = "cycling" if "power_limit_cycling" in f"{row['flags']};{row['notes']}" else ""
            rtxt, rcy, diff = "—", "—", "—"
            if rr is not None:
                rp = float(rr["power_w"])
                rtxt = f"{rp:.1f} [{float(rr['ci_low_w']):.1f}, {float(rr['ci_high_w']):.1f}]"
                rcy, diff = f"{float(rr['cycle_us']):.2f}", f"{(p / rp - 1) * 100:+.2f}"
            print(
                f"| {k} {cyc_note} | r{r} | {ORDER[r]} | {p:.1f} [{lo:.1f}, {hi:.1f}] | {(hi - lo) / 2 / p * 100:.2f} "
                f"| {cy:.2f} | {rtxt} | {rcy} | {diff} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
