"""Issue 20: `fingrav plan`'s estimate against the GPU time collection then took (`collect_gpu_s`), per scenario and
by run kind.

    python benchmarks/plan_vs_collect.py --config CONFIG [--results results] [--markdown]
    python benchmarks/plan_vs_collect.py --spent SWEEP_DIR [--markdown]
    python benchmarks/plan_vs_collect.py --oracle SWEEP_DIR SWEEP_DIR ... [--markdown]
    python benchmarks/plan_vs_collect.py --replicates SWEEP_DIR ... [--markdown]

`--oracle` bounds what any price made before a run can reach per scenario: each scenario priced at what the same
scenario took in the other sweep folders (the same kernel measured on other cards), against what it took.
`--replicates` bounds it on one card: each collection of a replicate dataset (`<kernel>-r<k>`, collected beside each
other) priced at what the kernel's other collections took.

The GPU time a collection took by run kind comes from its raw runs.parquet: run i holds the GPU from the start of
its idle (host_start_ns - idle_ns - read guard - delay) to the start of the next run's idle; the timing run and the
probe count as "probe"; what precedes the first run and follows the last is "other". Their sum is the span of the
power samples, `collect_gpu_s` (`fingrav.analysis.differentiate.gpu_seconds`). The estimate is printed twice: made
before the sweep ran (the simulator preset's sensor: what `fingrav plan` says on a fresh sweep) and with the sweep's
calibration (what it says once calibrated).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

import polars as pl

from fingrav.collect.sweep_estimate import estimate_sweep
from fingrav.config import load_config
from fingrav.contracts.tables import READ_GUARD_NS
from fingrav.layout import SweepLayout

KINDS = ("probe", "reference", "sse", "ssp", "other")


def spent_by_kind(raw: Path) -> dict[str, float]:
    """GPU seconds by run kind of one collected scenario (module docstring)."""
    runs = pl.read_parquet(raw / "runs.parquet").sort("host_start_ns")
    t = pl.read_parquet(raw / "samples.parquet", columns=["t_ns"])["t_ns"]
    t0, t1 = int(t.min()), int(t.max())
    start = (runs["host_start_ns"] - runs["idle_ns"] - runs["delay_ns"] - READ_GUARD_NS).to_list()
    # the timing run with the probe; base runs with the SSE runs (the plan prices them together, PlanCost.sse_s)
    merged = {"timing": "probe", "base": "sse"}
    phases = [merged.get(ph, ph) for ph in runs["phase"].to_list()]
    out = dict.fromkeys(KINDS, 0.0)
    out["other"] += (start[0] - t0) / 1e9
    ends = [*start[1:], t1]
    for ph, a, b in zip(phases, start, ends, strict=True):
        out[ph] += (b - a) / 1e9
    return out


def rows(config: str, results: str) -> list[dict[str, object]]:
    cfg = load_config(config)
    layout = SweepLayout.of(cfg.sweep, results)
    metrics = pl.read_csv(layout.root / "metrics.csv", infer_schema_length=0).filter(
        pl.col("metric") == "collect_gpu_s"
    )
    gpu_s = dict(zip(metrics["scenario"], metrics["value"].cast(pl.Float64), strict=True))
    with tempfile.TemporaryDirectory() as empty:
        before = {s.name: s for s in estimate_sweep(cfg, results_root=empty).scenarios}
    after = {s.name: s for s in estimate_sweep(cfg, results_root=results).scenarios}
    out = []
    for s in cfg.scenarios:
        spent = spent_by_kind(layout.scenario_dir(s.name, 0))
        b, a = before[s.name], after[s.name]
        out.append(
            {
                "scenario": s.name,
                "plan_before_s": b.expected_s,
                "plan_before_range_s": f"{b.low_s:.0f}-{b.high_s:.0f}",
                "plan_s": a.expected_s,
                "plan_range_s": f"{a.low_s:.0f}-{a.high_s:.0f}",
                "collect_gpu_s": gpu_s[s.name],
                "err_pct": (a.expected_s / gpu_s[s.name] - 1) * 100,
                "err_before_pct": (b.expected_s / gpu_s[s.name] - 1) * 100,
                **{f"{k}_s": v for k, v in spent.items()},
                "plan_probe_s": a.cost.probe_s,
                "plan_reference_s": a.cost.reference_s,
                "plan_sse_s": a.cost.sse_s,
                "plan_ssp_s": a.cost.ssp_s,
            }
        )
    return out


def spent_rows(sweep_dir: Path) -> list[dict[str, object]]:
    """GPU seconds by run kind of every scenario collected in a sweep folder (no estimate: any code's results)."""
    raw = sweep_dir / "raw" / "gpu0"
    return [
        {"scenario": d.name, **{f"{k}_s": v for k, v in spent_by_kind(d).items()}}
        for d in sorted(raw.iterdir())
        if (d / "runs.parquet").is_file()
    ]


def total_s(sweep_dir: Path) -> dict[str, float]:
    """collect_gpu_s of every scenario collected in a sweep folder (the sum of its run kinds)."""
    return {str(r["scenario"]): sum(float(r[f"{k}_s"]) for k in KINDS) for r in spent_rows(sweep_dir)}


def bound_row(sweep: Path, pairs: list[tuple[float, float]], tol_pct: float) -> dict[str, object]:
    """One sweep folder's (price, took) pairs (s): how many within +-tol_pct %, the total's error, the median took."""
    price, took = sum(p for p, _ in pairs), sum(t for _, t in pairs)
    return {
        "sweep": str(sweep),
        "priced": len(pairs),
        f"within_{tol_pct:g}_pct": sum(abs(p / t - 1) * 100 <= tol_pct for p, t in pairs),
        "total_err_pct": (price / took - 1) * 100,
        "collect_gpu_s": took,
        "median_s": float(pl.Series([t for _, t in pairs]).median()),
    }


def oracle_rows(sweep_dirs: list[Path], tol_pct: float = 25.0) -> list[dict[str, object]]:
    """The best price any plan made before a run could give, for the per-scenario criterion: each scenario of each
    sweep folder priced at what the same scenario took in the other folders (their mean: the same kernel, measured,
    on other cards), against what it took here; scenarios collected in every folder."""
    spent = {d: total_s(d) for d in sweep_dirs}
    common = sorted(set.intersection(*(set(v) for v in spent.values())))
    rows = []
    for d in sweep_dirs:
        others = [o for o in sweep_dirs if o != d]
        pairs = [(sum(spent[o][s] for o in others) / len(others), spent[d][s]) for s in common]
        rows.append(bound_row(d, pairs, tol_pct))
    return rows


def replicate_rows(sweep_dirs: list[Path], tol_pct: float = 25.0) -> list[dict[str, object]]:
    """The same bound on one card: in each sweep folder of replicate collections (`<kernel>-r<k>`, collected beside
    each other), each collection priced at what the kernel's other collections took, against what it took."""
    rows = []
    for d in sweep_dirs:
        took: dict[str, list[float]] = {}
        for scenario, s in total_s(d).items():
            took.setdefault(re.sub(r"-r\d+$", "", scenario), []).append(s)
        pairs = [((sum(v) - x) / (len(v) - 1), x) for v in took.values() if len(v) > 1 for x in v]
        rows.append(bound_row(d, pairs, tol_pct))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="the sweep config: its estimate against its results")
    ap.add_argument("--results", default="results")
    ap.add_argument("--spent", type=Path, help="instead: only the GPU seconds by run kind of this sweep folder")
    ap.add_argument("--oracle", type=Path, nargs="+", help="instead: each sweep folder priced from the others")
    ap.add_argument(
        "--replicates", type=Path, nargs="+", help="instead: each replicate collection priced from its kernel's others"
    )
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    bound = args.oracle is not None or args.replicates is not None
    if args.spent is None and args.config is None and not bound:
        ap.error("give --config, --spent, --oracle or --replicates")
    if args.oracle is not None:
        df = pl.DataFrame(oracle_rows(args.oracle))
    elif args.replicates is not None:
        df = pl.DataFrame(replicate_rows(args.replicates))
    elif args.spent is not None:
        df = pl.DataFrame(spent_rows(args.spent))
    else:
        df = pl.DataFrame(rows(args.config, args.results))
    if args.spent is not None and not bound:
        df = df.with_columns(pl.sum_horizontal([f"{k}_s" for k in KINDS]).alias("total_s"))
    num = [c for c, t in df.schema.items() if t == pl.Float64]
    df = df.with_columns(pl.col(num).round(1))
    if args.markdown:
        cols = df.columns
        sys.stdout.write("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols) + "\n")
        for r in df.iter_rows():
            sys.stdout.write("| " + " | ".join(str(v) for v in r) + " |\n")
        if bound:
            return 0
        tot = df.select(pl.col(num).sum())
        sys.stdout.write("| total | " + " | ".join(str(round(tot[c][0], 1)) if c in num else "" for c in cols[1:]))
        sys.stdout.write(" |\n")
    else:
        with pl.Config(tbl_rows=-1, tbl_cols=-1, tbl_width_chars=250):
            sys.stdout.write(str(df) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
