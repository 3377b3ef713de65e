"""results/h200-placement: each shape measured twice in one call (-a, then -b about a minute later, each prepared
anew): execution time and headline power side by side with their CIs, whether each CI covers the other measurement,
the die temperature before and after each reference run (raw telemetry), and the input sets' effects on the
execution time (`fingrav.analysis.placement`, from the raw SSP tails). Reads summary.csv (or a replay's) and gpu/raw.
Writes ab.md when no SUMMARY is given; with one, e.g. a replay's, only prints.
Usage: python results/h200-placement/compare.py [SUMMARY]"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from fingrav.analysis.placement import placement_term
from fingrav.errors import ConfigError
from fingrav.guard import check_write

HERE = Path(__file__).resolve().parent
RAW = HERE / "gpu" / "raw" / "gpu0"


def _temps(name: str) -> str:
    """The die temperature (C) before -> after the reference run."""
    t = pl.read_parquet(RAW / name / "telemetry.parquet").filter(pl.col("phase") == "reference").sort("when", "run")
    got = {w: json.loads(f).get("NVML_TEMPERATURE_GPU") for w, f in zip(t["when"], t["fields_json"], strict=True)}
    return f"{got.get('before', float('nan')):.0f} → {got.get('after', float('nan')):.0f}"


def _effects(name: str) -> str:
    """Each input set's effect on the SSP tail's execution time (% of the mean), as the analysis measures it."""
    d = RAW / name
    plan = json.loads((d / "plan.json").read_text())
    sets = int(plan["provenance"]["kernels"]["main"]["input_sets"])
    ssp = pl.read_parquet(d / "runs.parquet").filter(pl.col("phase") == "ssp").select("run")
    i = pl.col("exec_index")
    ex = (
        pl.read_parquet(d / "executions.parquet")
        .join(ssp, on="run")
        .filter((pl.col("segment") == "main") & (i >= plan["ssp_index"]) & (i < plan["ssp_index"] + plan["tail"]))
        .select("run", "exec_index", (pl.col("gpu_end_ns") - pl.col("gpu_start_ns")).alias("dur_ns"))
    )
    t = placement_term(ex, sets)
    return "" if t is None else " / ".join(f"{x:+.2f}" for x in t.effects_pct)


def _ci(r: dict, col: str, fmt: str) -> str:
    lo, hi = (
        col.replace("_us", "_ci_low_us").replace("_w", "_ci_low_w"),
        col.replace("_us", "_ci_high_us").replace("_w", "_ci_high_w"),
    )
    return f"{r[col]:{fmt}} [{r[lo]:{fmt}}, {r[hi]:{fmt}}]"


def _covers(r: dict, other: dict, col: str) -> bool:
    lo, hi = (
        col.replace("_us", "_ci_low_us").replace("_w", "_ci_low_w"),
        col.replace("_us", "_ci_high_us").replace("_w", "_ci_high_w"),
    )
    return bool(r[lo] <= other[col] <= r[hi])


def main() -> None:
    summary = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "summary.csv"
    rows = {r["scenario"]: r for r in pl.read_csv(summary).to_dicts()}
    shapes = sorted({n.rsplit("-", 1)[0] for n in rows})
    lines = [
        "| shape | exec time a, µs [CI] | exec time b | b − a | each CI covers the other | "
        "input sets' effects a (b), % | power a, W [CI] | power b | b − a | each CI covers the other | "
        "die °C a (b), before → after the reference run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in shapes:
        a, b = rows[f"{s}-a"], rows[f"{s}-b"]
        dt = (b["exec_time_us"] - a["exec_time_us"]) / a["exec_time_us"] * 100.0
        dp = (b["power_w"] - a["power_w"]) / a["power_w"] * 100.0
        ct = "yes" if _covers(a, b, "exec_time_us") and _covers(b, a, "exec_time_us") else "no"
        cp = "yes" if _covers(a, b, "power_w") and _covers(b, a, "power_w") else "no"
        lines.append(
            f"| {s} | {_ci(a, 'exec_time_us', '.3f')} | {_ci(b, 'exec_time_us', '.3f')} | {dt:+.2f} % | {ct} | "
            f"{_effects(s + '-a')} ({_effects(s + '-b')}) | {_ci(a, 'power_w', '.1f')} | {_ci(b, 'power_w', '.1f')} | "
            f"{dp:+.2f} % | {cp} | {_temps(s + '-a')} ({_temps(s + '-b')}) |"
        )
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if len(sys.argv) == 1:
        try:  # a sealed dataset is never rewritten: one message, no traceback
            check_write(HERE / "ab.md", "compare.py (writing ab.md)")
        except ConfigError as err:
            sys.exit(str(err))
        (HERE / "ab.md").write_text(text)


if __name__ == "__main__":
    main()
