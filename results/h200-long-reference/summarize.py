"""summary.csv of results/h200-long-reference from gpu/peers.json: per kernel the reference's settled mean and CI
(W) and the mean of its first L seconds after settling (the 200 ms block means; all of them where the run has fewer).

    python summarize.py PEERS_JSON OUT_CSV
"""

import csv
import json
import sys

from fingrav.errors import ConfigError
from fingrav.guard import check_write

WINDOWS_S = (2, 4, 6, 10, 20, 29)


def main(src: str, dst: str) -> None:
    rows = []
    with open(src) as f:
        results = json.load(f)["results"]
    for r in results:
        if r.get("tool") != "reference":
            continue
        blocks = r["detail"]["block_means_w"]
        row = {
            "kernel": r["kernel"],
            "power_w": r["power_w"],
            "power_ci_low_w": r["ci_low_w"],
            "power_ci_high_w": r["ci_high_w"],
        }
        for s in WINDOWS_S:
            n = int(s * 1000 / r["detail"]["block_ms"])
            first = blocks[:n]
            row[f"mean_first_{s}s_w"] = sum(first) / len(first)
        rows.append(row)
    try:  # a sealed dataset is never rewritten: one message, no traceback
        check_write(dst, "summarize.py DST")
    except ConfigError as err:
        sys.exit(str(err))
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
