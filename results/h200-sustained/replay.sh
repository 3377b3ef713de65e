#!/usr/bin/env bash
# Regenerate results/h200-sustained/{summary.csv,report/,calibration/} from the committed raw data
# (results/h200-sustained/gpu/) on any machine, no GPU needed, and check that every number matches the committed
# summary.csv within 0.1 %. Run from anywhere after `pip install -e .` (see README.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
committed=$(mktemp)
cp results/h200-sustained/summary.csv "$committed"
snakemake --cores "${CORES:-2}" --forceall --configfile config/h200-sustained-replay.yaml
python3 - "$committed" results/h200-sustained/summary.csv <<'PY'
import csv, math, sys
old = {r["scenario"]: r for r in csv.DictReader(open(sys.argv[1]))}
new = {r["scenario"]: r for r in csv.DictReader(open(sys.argv[2]))}
assert old.keys() == new.keys(), (sorted(old), sorted(new))
worst, bad = 0.0, []
for name, o in old.items():
    for col, a in o.items():
        b = new[name][col]
        try:
            x, y = float(a), float(b)
        except ValueError:
            if a != b:
                bad.append((name, col, a, b))
            continue
        if math.isnan(x) and math.isnan(y):
            continue
        rel = abs(y - x) / max(abs(x), 1e-12) if x else abs(y)
        worst = max(worst, rel)
        if rel > 1e-3:
            bad.append((name, col, a, b))
print(f"replay: {len(old)} scenarios, worst relative difference {worst:.2e}")
if bad:
    for row in bad:
        print("differs:", *row)
    sys.exit(1)
print("replay: summary.csv reproduced within 0.1 %")
PY
