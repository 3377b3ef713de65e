"""results/h200-probe-ab: each shape measured with the probe read from the reference run (`-ref`) and with a probe run
of its own (`-sep`), back to back on one H200: headline, method SSP and its validity, the probe's settling and return
to idle, the idle before each run, the SSP runs and the GPU time, side by side (ab.md, written when no SUMMARY is
given; with one, e.g. a replay's, only printed). Reads summary.csv (or a
replay's) and the raw plan.json / runs.parquet of gpu/raw. Usage: python results/h200-probe-ab/compare.py [SUMMARY]
[--against ab.md]: with --against, the printed table must equal that one, except the method SSP's CI, which may be
wider (stop 32: the calibration's standard errors are cluster-robust, never smaller, and the SSP's residual-transient
term reads the lag + 2 of them) or narrower (stop 39: its systematic parts in quadrature with the bootstrap, where
they were added), its validity unchanged; exit 1 otherwise."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from fingrav.errors import ConfigError
from fingrav.guard import check_write

HERE = Path(__file__).resolve().parent


def _gpu_s(d: Path) -> float:
    """collect_gpu_s: the span of the scenario's power samples (s)."""
    t = pl.read_parquet(d / "samples.parquet")["t_ns"]
    return (int(t.max()) - int(t.min())) / 1e9


CI_COLUMN = 6  # "SSP CI ± %"


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return False
    return True


def same_but_ssp_ci(new: list[str], old: list[str]) -> bool:
    """Whether the replayed table `new` equals `old` line by line, cell by cell, except the SSP CI column (a number in
    both; module docstring)."""
    if len(new) != len(old):
        return False
    for a, b in zip(new, old, strict=True):
        ca, cb = a.split(" | "), b.split(" | ")
        if len(ca) != len(cb):
            return False
        for k, (x, y) in enumerate(zip(ca, cb, strict=True)):
            if x != y and not (k == CI_COLUMN and _number(x) and _number(y)):
                return False
    return True


def main() -> None:
    args = sys.argv[1:]
    against = None
    if "--against" in args:
        at = args.index("--against")
        against = Path(args[at + 1])
        del args[at : at + 2]
    sys.argv = [sys.argv[0], *args]
    summary = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "summary.csv"
    s = pl.read_csv(summary).sort("scenario")
    cols = ("scenario", "probe", "valid", "power_w", "ssp_valid", "ssp_power_w", "SSP CI ± %", "t_stable ms",
            "settled", "t_recover ms", "idle ms", "SSP runs", "tail unsettled", "collect_gpu_s")  # fmt: skip
    head = "| " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * len(cols)]
    for r in s.iter_rows(named=True):
        d = HERE / "gpu" / "raw" / "gpu0" / r["scenario"]
        plan = json.loads((d / "plan.json").read_text())
        p = plan["probe"]
        ci = (r["ssp_power_ci_high_w"] - r["ssp_power_ci_low_w"]) / 2 / r["ssp_power_w"] * 100
        lines.append(
            f"| {r['scenario'].rsplit('-', 1)[0]} | {p.get('source', 'run')} | {r['valid']} | {r['power_w']:.1f} | "
            f"{r['ssp_valid']} | {r['ssp_power_w']:.1f} | {ci:.2f} | {p['t_stable_ns'] / 1e6:.0f} | {p['settled']} | "
            f"{p['t_recover_ns'] / 1e6:.0f} | {plan['idle_ns'] / 1e6:.0f} | {plan['ssp_stop']['runs']} | "
            f"{'burst_unsettled' in (r['notes'] or '') and p['settled']} | {_gpu_s(d):.1f} |"
        )
    if len(sys.argv) == 1:  # the committed table; a replay's summary is only printed (replay.sh compares)
        try:  # a sealed dataset is never rewritten: one message, no traceback
            check_write(HERE / "ab.md", "compare.py (writing ab.md)")
        except ConfigError as err:
            sys.exit(str(err))
        (HERE / "ab.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    if against is not None and not same_but_ssp_ci(lines, against.read_text().splitlines()):
        sys.exit(f"the replayed A/B table differs from {against} (beyond the SSP CI)")


if __name__ == "__main__":
    main()
