"""results/h200-state: fingrav's headline against the uninstrumented references right before and right after the
sweep (issue 22: the card's state between two runs). Writes state.md (or checks it with --check).

    python results/h200-state/compare.py [--summary results/h200-state/summary.csv] [--check]

The after reference is read over whole limit cycles where it cycles (experiments/reference_coverage.py: its settled
window starts in the released phase of the limiter's start-up); the before one only as its settled window (its
samples did not come back from the device: peers-before-rows.md).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

from fingrav.errors import ConfigError
from fingrav.guard import check_write
from fingrav.replay_check import table_differences

HERE = Path(__file__).resolve().parent


def _before() -> dict[str, float]:
    rows = {}
    for line in (HERE / "peers-before-rows.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 8 and cells[1] == "reference":
            rows[cells[0]] = float(cells[2])
    return rows


def _after() -> dict[str, tuple[float, str, float]]:
    doc = json.loads((HERE / "peers-after" / "peers.json").read_text())
    out = {}
    for r in doc["results"]:
        if r["tool"] != "reference" or r["status"] != "ok":
            continue
        lc = r["detail"].get("limit_cycle")
        if lc and int(lc["cycles"]) >= 2 and lc["mean_w"]["value"] is not None:
            out[r["kernel"]] = (float(lc["mean_w"]["value"]), f"whole cycles ({lc['cycles']})", float(r["power_w"]))
        else:
            out[r["kernel"]] = (float(r["power_w"]), "settled window", float(r["power_w"]))
    return out


def table(summary: Path) -> str:
    before, after = _before(), _after()
    lines = [
        "| kernel | fingrav headline (W) [95 % CI] | ± % | before: window (W), diff % | after (W), read as | diff % | "
        "covered | window before -> after % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    with summary.open() as f:
        for row in csv.DictReader(f):
            k, p = row["scenario"], float(row["power_w"])
            lo, hi = float(row["power_ci_low_w"]), float(row["power_ci_high_w"])
            b, (a, how, window) = before[k], after[k]
            lines.append(
                f"| {k} | {p:.2f} [{lo:.2f}, {hi:.2f}] | {50 * (hi - lo) / p:.2f} | "
                f"{b:.1f}, {100 * (p / b - 1):+.2f} | "
                f"{a:.2f}, {how} | {100 * (p / a - 1):+.2f} | {'yes' if lo <= a <= hi else 'NO'} | "
                f"{100 * (window / b - 1):+.2f} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--summary", type=Path, default=HERE / "summary.csv")
    ap.add_argument("--check", action="store_true", help="compare with the committed state.md instead of writing it")
    args = ap.parse_args(argv)
    text = table(args.summary)
    if args.check:  # the fingrav CIs may be wider since their terms grew (fingrav.replay_check.table_differences)
        diffs = table_differences(text, (HERE / "state.md").read_text())
        print("\n".join(["state.md DIFFERS:", *diffs]) if diffs else "state.md reproduced (CIs as wide or wider)")
        return 1 if diffs else 0
    try:  # a sealed dataset is never rewritten: one message, no traceback
        check_write(HERE / "state.md", "compare.py (writing state.md)")
    except ConfigError as err:
        sys.exit(str(err))
    (HERE / "state.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
