"""Issue 20: the stability probe re-analysed on a collected sweep's own probe samples, cut at a shorter watch after
the probe (run_policy.probe_idle_ms), against the probe its plan.json holds.

    python benchmarks/probe_watch_replay.py WATCH_MS [WATCH_MS ...]   # results/h200-db2/gpu, config/h200-db2.yaml

The probe's samples are those the runner analysed (from half its settle wait before the probe to the drain before
the next run); a watch keeps those up to max(2 settle waits, WATCH_MS) after the busy end. Prints how many probes
the full window reproduces and how many change (t_recover, t_stable or settled) at each watch. Only reads.
"""

import json
import sys
from pathlib import Path

import polars as pl

from fingrav import rawio
from fingrav.collect.plan import analyze_probe
from fingrav.config import load_config
from fingrav.contracts.calibration import Calibration

noise = float(rawio.read_model("results/h200-db2/gpu/calibration/gpu0.json", Calibration).total.noise_mw or 0.0)
cfg = load_config("config/h200-db2.yaml")
root = Path("results/h200-db2/gpu/raw/gpu0")
W = [int(float(w) * 1e6) for w in sys.argv[1:]]
same_full = 0
changed = {w: [] for w in W}
n = 0
for d in sorted(root.iterdir()):
    if not (d / "plan.json").is_file():
        continue
    p = json.loads((d / "plan.json").read_text())
    pol = cfg.policy_for(d.name)
    runs = pl.read_parquet(d / "runs.parquet")
    r = runs.filter(pl.col("phase") == "probe").row(0, named=True)
    e = pl.read_parquet(d / "executions.parquet").filter(pl.col("run") == r["run"])
    busy = int(e["gpu_end_ns"].max() - e["gpu_start_ns"].min())
    hs = r["host_start_ns"]
    settle = p["sensor"]["settle_ns"] + p["sensor"]["period_ns"]
    s = pl.read_parquet(d / "samples.parquet").filter(pl.col("channel") == "total")
    nxt = runs.filter(pl.col("run") == r["run"] + 1).row(0, named=True)
    t_end = nxt["host_start_ns"] - nxt["idle_ns"]  # the drain after the probe's wait
    s = s.filter((pl.col("t_ns") >= hs - settle // 2) & (pl.col("t_ns") <= t_end))
    t, pw = s["t_ns"].to_numpy(), s["power_mw"].to_numpy()
    full = analyze_probe(t, pw, hs, hs + busy, len(e), pol.stability_tol_pct, noise, p["cycle_ns"])
    pp = p["probe"]
    n += 1
    same_full += (
        full.t_recover_ns == pp["t_recover_ns"]
        and full.t_stable_ns == pp["t_stable_ns"]
        and full.settled == pp["settled"]
    )
    for w in W:
        k = t <= hs + busy + max(2 * settle, w)
        q = analyze_probe(t[k], pw[k], hs, hs + busy, len(e), pol.stability_tol_pct, noise, p["cycle_ns"])
        if (q.t_recover_ns, q.t_stable_ns, q.settled) != (full.t_recover_ns, full.t_stable_ns, full.settled):
            changed[w].append((d.name, full.t_recover_ns / 1e6, q.t_recover_ns / 1e6))
print(f"{n} probes; the full window reproduces plan.json's probe for {same_full}")
for w in W:
    c = changed[w]
    print(f"watch {w / 1e6:.0f} ms: {len(c)} probes change", c[:8])
