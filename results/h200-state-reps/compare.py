"""The table of results/h200-state-reps (and -reps2): each kernel's three collections (fingrav's headline and CI, its
cycle) beside the uninstrumented reference run right after (before, in the second) each, from a replay's summary.csv
and metrics.csv and the dataset's committed peers/peers-r<k>.json; the kernels are the scenarios named <kernel>-r1, in
the summary's order. Markdown on stdout.

    python results/h200-state-reps/compare.py [--dataset results/h200-state-reps] [--replay DATASET-replay]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polars as pl

from fingrav.replay_check import table_differences

HERE = Path(__file__).resolve().parent
ORDER = {1: "F, R", 2: "R, F", 3: "F, R"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", type=Path, default=HERE)
    ap.add_argument("--replay", type=Path, help="default: the dataset's folder name + -replay beside it")
    ap.add_argument(
        "--against",
        type=Path,
        help="check against this committed table (fingrav.replay_check."
        "table_differences: the fingrav CIs may be wider since their terms grew) instead of printing",
    )
    args = ap.parse_args(argv)
    out: list[str] = []
    replay = args.replay or args.dataset.parent / f"{args.dataset.name}-replay"
    s = pl.read_csv(replay / "summary.csv", infer_schema_length=0)
    m = pl.read_csv(replay / "metrics.csv", infer_schema_length=0)
    kernels = [n[: -len("-r1")] for n in s["scenario"].to_list() if n.endswith("-r1")]
    ref = {}
    for r in (1, 2, 3):
        for res in json.loads((args.dataset / "peers" / f"peers-r{r}.json").read_text())["results"]:
            if res["tool"] == "reference" and res.get("power_w") is not None:
                ref[res["kernel"]] = res
    head = "| kernel | run | order | fingrav W [95 % CI] | ± % | cycle µs | reference W [CI] | cycle µs | diff % |"
    out += [head, "|---|---|---|---|---|---|---|---|---|"]
    for k in kernels:
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
            out.append(
                f"| {k} {cyc_note} | r{r} | {ORDER[r]} | {p:.1f} [{lo:.1f}, {hi:.1f}] | {(hi - lo) / 2 / p * 100:.2f} "
                f"| {cy:.2f} | {rtxt} | {rcy} | {diff} |"
            )
    if args.against is None:
        print("\n".join(out))
        return 0
    diffs = table_differences("\n".join(out), args.against.read_text())
    print("\n".join(diffs) if diffs else f"{args.against.name} reproduced (CIs as wide or wider)")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
