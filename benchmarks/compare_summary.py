"""Compare two summary.csv files cell by cell: strings exactly, numbers within a relative tolerance (default
0.1 %). Used by every results/<name>/replay.sh to check that a replay reproduces the committed summary.

    python3 benchmarks/compare_summary.py COMMITTED.csv NEW.csv [--rel 1e-3]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys


def compare(old_path: str, new_path: str, rel_tol: float = 1e-3) -> int:
    """0 when every cell matches (printing the worst relative difference), 1 otherwise (printing each difference)."""
    with open(old_path, newline="") as f_old, open(new_path, newline="") as f_new:
        old = {r["scenario"]: r for r in csv.DictReader(f_old)}
        new = {r["scenario"]: r for r in csv.DictReader(f_new)}
    if old.keys() != new.keys():
        print("scenarios differ:", sorted(old), sorted(new))
        return 1
    worst, bad = 0.0, []
    for name, o in old.items():
        for col, a in o.items():
            b = new[name].get(col)
            try:
                x, y = float(a), float(b)
            except (TypeError, ValueError):
                if a != b:
                    bad.append((name, col, a, b))
                continue
            if math.isnan(x) and math.isnan(y):
                continue
            rel = abs(y - x) / max(abs(x), 1e-12) if x else abs(y)
            worst = max(worst, rel)
            if rel > rel_tol:
                bad.append((name, col, a, b))
    print(f"replay: {len(old)} scenarios, worst relative difference {worst:.2e}")
    for row in bad:
        print("differs:", *row)
    if not bad:
        print(f"replay: summary.csv reproduced within {100 * rel_tol:g} %")
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("committed")
    ap.add_argument("new")
    ap.add_argument("--rel", type=float, default=1e-3)
    a = ap.parse_args(argv)
    return compare(a.committed, a.new, a.rel)


if __name__ == "__main__":
    sys.exit(main())
