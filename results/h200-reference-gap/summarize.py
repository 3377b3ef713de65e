"""summary.csv of results/h200-reference-gap: one row per uninstrumented reference run (W), in the order run, with the
idle before it (s) and the mean of its settled 200 ms blocks.

    python summarize.py OUT_CSV IDLE_S=PEERS_JSON [IDLE_S=PEERS_JSON ...]
"""

import csv
import json
import sys

from fingrav.errors import ConfigError
from fingrav.guard import check_write


def main(dst: str, sources: list[str]) -> None:
    rows = []
    for spec in sources:
        idle, path = spec.split("=", 1)
        with open(path) as f:
            results = [r for r in json.load(f)["results"] if r.get("tool") == "reference"]
        for i, r in enumerate(results):
            rows.append(
                {
                    "idle_s": float(idle),
                    "run": i + 1,
                    "kernel": r["kernel"],
                    "power_w": r["power_w"],
                    "power_ci_low_w": r["ci_low_w"],
                    "power_ci_high_w": r["ci_high_w"],
                    "cycle_us": r["cycle_us"],
                }
            )
    try:  # a sealed dataset is never rewritten: one message, no traceback
        check_write(dst, "summarize.py DST")
    except ConfigError as err:
        sys.exit(str(err))
    with open(dst, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
