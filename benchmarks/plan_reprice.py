"""Issue 20: the plan's price recomputed from each collected scenario's own plan.json (its timing, sensor and probe)
with the current cost model, against the GPU time that collection then took (`collect_gpu_s`).

    python benchmarks/plan_reprice.py --config CONFIG SWEEP_GPU_FOLDER [--markdown]

For every scenario under SWEEP_GPU_FOLDER/raw/gpu0: `fingrav.collect.plan.make_plan` is called again with the
plan's execution and cycle times, sensor, probe and predecessor count, the config's run policy for the scenario and
the device timing of the recorded device (`fingrav.collect.sweep_estimate.timing_of_device`; a predecessor's cycle
from its preset model, as the runner prices it), and its `cost` is
compared with the GPU seconds the raw runs took (`plan_vs_collect.spent_by_kind`; their sum is collect_gpu_s). The
price plan.json holds (the model of the code that collected it) is printed beside it. Nothing is measured or
written.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from plan_vs_collect import KINDS, spent_by_kind

from fingrav.collect.plan import make_plan
from fingrav.collect.sweep_estimate import predecessor_cycle_ns, timing_of_device
from fingrav.config import Scenario, load_config
from fingrav.contracts.plan import Plan

WITHIN_PCT = 25.0


def reprice(config: str, sweep_gpu: Path) -> list[dict[str, float | str]]:
    """One row per collected scenario: the old and new price, what collection spent, by run kind (s)."""
    cfg = load_config(config)
    out: list[dict[str, float | str]] = []
    for d in sorted((sweep_gpu / "raw" / "gpu0").iterdir()):
        if not (d / "plan.json").is_file() or not (d / "runs.parquet").is_file():
            continue
        raw = json.loads((d / "plan.json").read_text())
        plan = Plan.model_validate(raw)
        device = (raw.get("provenance") or {}).get("device") or {}
        timing = timing_of_device(device)
        policy = cfg.policy_for(d.name)
        scen = Scenario.model_validate((raw.get("provenance") or {}).get("scenario") or {"name": d.name})
        pred = predecessor_cycle_ns(device, scen.predecessor.kernel) if scen.predecessor is not None else 0.0
        new = make_plan(plan.exec_time_ns, plan.cycle_ns, plan.sensor, plan.probe, policy, plan.predecessor_count,
                        pred, timing)  # fmt: skip
        spent = spent_by_kind(d)
        gpu_s = sum(spent.values())
        c, o = new.cost, plan.cost
        assert c is not None
        out.append(
            {
                "scenario": d.name,
                "collect_gpu_s": gpu_s,
                "old_s": o.total_s if o is not None else float("nan"),
                "new_s": c.total_s,
                "err_old_pct": ((o.total_s if o is not None else float("nan")) / gpu_s - 1) * 100,
                "err_new_pct": (c.total_s / gpu_s - 1) * 100,
                **{f"spent_{k}_s": v for k, v in spent.items()},
                "new_probe_s": c.probe_s,
                "new_reference_s": c.reference_s,
                "new_sse_s": c.sse_s,
                "new_ssp_s": c.ssp_s,
                "new_other_s": c.other_s,
            }
        )
    return out


def summary(rows: list[dict[str, float | str]]) -> str:
    """Totals, median errors and how many scenarios are within +-WITHIN_PCT %."""
    spent = sum(float(r["collect_gpu_s"]) for r in rows)
    lines = [f"{len(rows)} scenarios, collect_gpu_s {spent:.0f} s in all, median "
             f"{statistics.median(float(r['collect_gpu_s']) for r in rows):.1f} s"]  # fmt: skip
    for key in ("old", "new"):
        tot = sum(float(r[f"{key}_s"]) for r in rows)
        errs = [float(r[f"err_{key}_pct"]) for r in rows]
        within = sum(abs(e) <= WITHIN_PCT for e in errs)
        med = statistics.median(float(r[f"{key}_s"]) for r in rows)
        lines.append(
            f"{key} price: {tot:.0f} s in all ({(tot / spent - 1) * 100:+.1f} %), median {med:.1f} s; per scenario "
            f"median {statistics.median(errs):+.1f} % ({min(errs):+.0f} ... {max(errs):+.0f} %), {within}/{len(rows)} "
            f"within +-{WITHIN_PCT:.0f} %"
        )
    for k in KINDS:
        sp = sum(float(r[f"spent_{k}_s"]) for r in rows)
        pr = sum(float(r.get(f"new_{k}_s", 0.0)) for r in rows)
        lines.append(f"  {k}: spent {sp:.1f} s, new price {pr:.1f} s")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", required=True, help="the sweep config the scenarios were collected with")
    ap.add_argument("sweep_gpu", type=Path, help="a sweep's results folder with raw/gpu0/<scenario>/")
    ap.add_argument("--rows", action="store_true", help="print every scenario too")
    args = ap.parse_args(argv)
    rows = reprice(args.config, args.sweep_gpu)
    if args.rows:
        for r in rows:
            old, new = f"{float(r['old_s']):6.1f} ({float(r['err_old_pct']):+5.0f} %)", f"{float(r['new_s']):6.1f}"
            sys.stdout.write(
                f"{r['scenario']:40s} spent {float(r['collect_gpu_s']):6.1f}  old {old}  new {new} "
                f"({float(r['err_new_pct']):+5.0f} %)\n"
            )
    sys.stdout.write(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
