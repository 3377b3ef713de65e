"""Smoke benchmark of fingrav's NVIDIA backend on a real GPU (H200 target); < 60 s.

    PYTHONPATH=. python3 benchmarks/nvml_smoke.py --out DIR [--index 0] [--verbose]

Checks and measures, in this order:
  1. the %globaltimer stamp kernel (Triton, and CuPy when available): stamps written, monotonic, the
     GPU cost of one stamp (back-to-back series, stream launches and graph replay), clock-read round
     trips (launch + synchronize) and the GPU-host clock offset;
  2. GEMM / GEMV 2K, 4K, 8K bf16: execution time (median, TFLOP/s, GB/s), gaps between consecutive
     executions, and what stamping costs (stamped cycle vs unstamped back-to-back), graph and stream;
  3. spin accuracy: requested vs stamped duration;
  4. the NVML sampler over ~3 s of idle / spin / GEMM: sample period, gaps, channels, phase means,
     energy counter vs integrated samples, drain latency;
  5. perturbation: kernel time with the sampler running vs stopped (ABBA trials); must stay < 0.5 %.

Writes DIR/nvml_smoke.json and prints a short table last. Exit status 1 when a check fails or a section
raised. Heavy imports (torch) stay inside main(): the sampler process is started with *spawn*, which
re-imports this script in the child.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from pathlib import Path
from typing import Any

logger = logging.getLogger("fingrav.benchmarks.nvml_smoke")

SIZES = (2048, 4096, 8192)
PERTURBATION_LIMIT_PCT = 0.5


def _q(x: Any, qs: tuple[float, ...] = (10, 50, 90)) -> dict[str, float]:
    import numpy as np

    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return {f"p{int(q)}": float("nan") for q in qs}
    return {f"p{int(q)}": float(np.percentile(x, q)) for q in qs}


def _cycle(dev: Any, h: Any) -> float:
    """GPU time per execution (ns) of 8 back-to-back executions in the device's launch mode, the
    first 3 left out: the span, so CPU-bound launch gaps count."""
    r = dev.execute([(h, 8)])
    return max(float(r.gpu_end_ns[-1] - r.gpu_start_ns[3]) / 5, 1.0)


class Report:
    """Collects results, the rows of the final table and the checks."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}
        self.rows: list[tuple[str, str, str, str]] = []
        self.failed: list[str] = []

    def row(self, section: str, metric: str, value: str, check: bool | None = None) -> None:
        mark = "" if check is None else ("ok" if check else "FAIL")
        if check is False:
            self.failed.append(f"{section}: {metric} = {value}")
        self.rows.append((section, metric, value, mark))

    def section(self, name: str, fn: Any, *args: Any) -> Any:
        t0 = time.perf_counter()
        try:
            out = fn(*args)
        except Exception as exc:  # keep going: the other sections still say something
            self.data[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
            self.row(name, "error", f"{type(exc).__name__}: {exc}"[:90], False)
            logger.error("section %s failed:\n%s", name, traceback.format_exc())
            return None
        self.data.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 2)
        return out

    def table(self) -> str:
        w = [max(len(r[i]) for r in self.rows + [("section", "metric", "value", "check")]) for i in range(4)]
        lines = [" | ".join(h.ljust(w[i]) for i, h in enumerate(("section", "metric", "value", "check")))]
        lines.append("-+-".join("-" * x for x in w))
        lines += [" | ".join(c.ljust(w[i]) for i, c in enumerate(r)) for r in self.rows]
        return "\n".join(lines)


# --------------------------------------------------------------------------- 1. stamps and clock reads
def stamps(dev: Any, rep: Report) -> None:
    import numpy as np

    from fingrav.device.nvidia.timestamp import make_stamper

    out: dict[str, Any] = {}
    impls = [("default", dev.stamper)]
    try:
        other = "cupy" if getattr(dev.stamper, "impl", "") != "cupy" else "triton"
        impls.append((other, make_stamper(dev.index, other)))
    except Exception as exc:
        out["alternative_error"] = f"{type(exc).__name__}: {exc}"
        rep.row("stamp", "alternative impl", "unavailable")
    original = dev.stamper
    try:
        for label, stamper in impls:
            dev.stamper = stamper
            name = stamper.name
            r: dict[str, Any] = {"name": name}
            # the alternative kernel is only launched from the stream (no graph capture of it)
            for mode in ("stream", "graph") if label == "default" else ("stream",):
                t = dev.stamp_series(1000, use_graph=(mode == "graph"))
                d = np.diff(t)
                r[f"series_{mode}"] = {
                    "monotonic": bool(np.all(d >= 0)),
                    "nonzero": bool(np.all(t > 0)),
                    "cost_ns": _q(d),
                    "min_step_ns": int(d[d > 0].min()) if np.any(d > 0) else None,
                }
            dev.read_gpu_clock(20)  # warm
            reads = dev.read_gpu_clock(300)
            rt = reads.host_after_ns - reads.host_before_ns
            keep = rt <= np.percentile(rt, 10)
            mid = (reads.host_before_ns[keep] + reads.host_after_ns[keep]) // 2
            off = reads.gpu_ns[keep] - mid
            r["clock_read"] = {
                "round_trip_ns": {"min": int(rt.min()), **_q(rt)},
                "gpu_minus_host_ns_at_min_rt": float(np.median(off)),
                "offset_spread_ns": float(np.ptp(off)),
                "gpu_monotonic": bool(np.all(np.diff(reads.gpu_ns) > 0)),
            }
            out[label] = r
            ok = r["series_stream"]["monotonic"] and r["series_stream"]["nonzero"] and r["clock_read"]["gpu_monotonic"]
            rep.row("stamp", f"{name} works", "yes" if ok else "no", ok)
            cost_s = r["series_stream"]["cost_ns"]["p50"]
            cost_g = r["series_graph"]["cost_ns"]["p50"] if "series_graph" in r else float("nan")
            rep.row("stamp", f"{name} GPU cost (stream/graph)", f"{cost_s / 1e3:.2f} / {cost_g / 1e3:.2f} us")
            rep.row("clock", f"{name} round trip min/p50", f"{rt.min() / 1e3:.1f} / {np.median(rt) / 1e3:.1f} us")
            rep.row("clock", f"{name} GPU - host", f"{np.median(off) / 1e3:+.1f} us", abs(np.median(off)) < 1e9)
    finally:
        dev.stamper = original
    rep.data["stamps"] = out


# --------------------------------------------------------------------------- 2. kernels
def kernels(dev: Any, rep: Report) -> dict[str, Any]:
    import numpy as np
    import torch

    from fingrav.config import GemmKernel, GemvKernel

    out: dict[str, Any] = {}
    for kind in ("gemm", "gemv"):
        for s in SIZES:
            k = GemmKernel(m=s, n=s, k=s) if kind == "gemm" else GemvKernel(m=s, k=s)
            name = f"{kind}-{s // 1024}k"
            h = dev.prepare(k)
            n = int(min(max(40e6 / _cycle(dev, h), 20), 4000))
            r: dict[str, Any] = {"label": h.label, "input_sets": h.n_sets, "n": n}
            for mode in ("graph", "stream"):
                dev.launch_mode = mode
                rec = dev.execute([(h, n)])
                d = rec.duration_ns[3:]
                gaps = rec.gpu_start_ns[1:] - rec.gpu_end_ns[:-1]
                cycle = float(np.median(np.diff(rec.gpu_start_ns[3:])))
                unst = dev.run_unstamped(h, n)
                per_exec_unstamped = float(unst.duration_ns[0]) / n
                med = float(np.median(d))
                r[mode] = {
                    "exec_ns": _q(d),
                    "cycle_ns": cycle,
                    "gap_ns": {**_q(gaps), "max": float(gaps.max())},
                    "unstamped_per_exec_ns": per_exec_unstamped,
                    "stamp_overhead_ns": cycle - per_exec_unstamped,
                    "stamp_overhead_pct": 100.0 * (cycle - per_exec_unstamped) / per_exec_unstamped,
                    "tflops": h.sizes["flops"] / med / 1e3,
                    "gbps": h.sizes["bytes"] / med,
                }
            dev.launch_mode = "graph"
            g = r["graph"]
            out[name] = r
            rep.row(
                "kernel",
                f"{name} exec p50 (graph)",
                f"{g['exec_ns']['p50'] / 1e3:.1f} us, {g['tflops']:.0f} TFLOP/s, {g['gbps']:.0f} GB/s",
            )
            rep.row(
                "kernel",
                f"{name} cycle stamped/unstamped",
                f"{g['cycle_ns'] / 1e3:.2f} / {g['unstamped_per_exec_ns'] / 1e3:.2f} us "
                f"({g['stamp_overhead_pct']:+.1f} %); stream cycle {r['stream']['cycle_ns'] / 1e3:.2f} us",
            )
            del h
            torch.cuda.empty_cache()
    rep.data["kernels"] = out
    return out


# --------------------------------------------------------------------------- 3. spin
def spin(dev: Any, rep: Report) -> None:
    import numpy as np

    out = {}
    worst = 0.0
    for us in (20, 100, 1000, 10_000, 100_000):
        got = [int(dev.spin(us * 1000).duration_ns[0]) for _ in range(3)]
        excess = np.asarray(got, np.float64) - us * 1000
        out[str(us)] = {"requested_ns": us * 1000, "stamped_ns": got, "excess_ns_median": float(np.median(excess))}
        worst = max(worst, float(np.max(excess)))
        ok = bool(np.all(excess >= 0) and np.all(excess < max(20_000, 0.01 * us * 1000)))
        rep.row("spin", f"{us} us requested", f"+{np.median(excess) / 1e3:.2f} us stamped", ok)
    rep.data["spin"] = out


# --------------------------------------------------------------------------- 4. sampler
def sampler(dev: Any, rep: Report) -> None:
    import numpy as np

    from fingrav.config import GemmKernel
    from fingrav.device.base import PowerSamples

    h = dev.prepare(GemmKernel(m=4096, n=4096, k=4096))
    est = _cycle(dev, h)
    parts: list[PowerSamples] = []
    drain_ms: list[float] = []
    phases: list[tuple[str, int, int]] = []

    def drain() -> None:
        t = time.perf_counter()
        parts.append(dev.drain_samples())
        drain_ms.append((time.perf_counter() - t) * 1e3)

    e0 = dev.energy_mj()
    h0 = dev.host_time_ns()
    dev.start_sampling()
    t = dev.host_time_ns()
    dev.sleep_ns(500_000_000)
    phases.append(("idle", t, dev.host_time_ns()))
    drain()
    t = dev.host_time_ns()
    for _ in range(4):
        dev.spin(250_000_000)
    phases.append(("spin", t, dev.host_time_ns()))
    drain()
    dev.sleep_ns(500_000_000)
    drain()
    t = dev.host_time_ns()
    n = int(1e9 / est)
    for _ in range(4):
        dev.execute([(h, max(n // 4, 1))])
    phases.append(("gemm-4k", t, dev.host_time_ns()))
    drain()
    dev.sleep_ns(300_000_000)
    parts.append(dev.stop_sampling())
    h1 = dev.host_time_ns()
    e1 = dev.energy_mj()
    s = PowerSamples.concat(parts)
    stats = dict(dev.power.sampler.stats)
    tot = np.sort(s.t_ns[s.channel == "total"])
    ptot = s.power_mw[s.channel == "total"][np.argsort(s.t_ns[s.channel == "total"])]
    period = np.diff(tot)
    out: dict[str, Any] = {
        "window_s": (h1 - h0) / 1e9,
        "samples": {c: int((s.channel == c).sum()) for c in dev.channels},
        "period_ns": _q(period),
        "max_interval_ns": float(period.max()) if period.size else None,
        "gaps": s.gaps,
        "drain_ms": _q(drain_ms),
        "sampler_stats": stats,
    }
    means = {}
    for name, a, b in phases:
        # skip the sensor's settling (~60 ms on H200) at the start of each phase
        sel = {c: (s.channel == c) & (s.t_ns >= a + 80_000_000) & (s.t_ns <= b) for c in dev.channels}
        means[name] = {c: float(s.power_mw[m].mean()) if m.any() else None for c, m in sel.items()}
    out["phase_mean_mw"] = means
    if e0 is not None and e1 is not None and tot.size > 2:
        inside = (tot >= h0) & (tot <= h1)
        integral_mj = (
            float(np.trapezoid(ptot[inside], tot[inside]) / 1e9)
            if hasattr(np, "trapezoid")
            else float(np.trapz(ptot[inside], tot[inside]) / 1e9)
        )
        span_s = (tot[inside][-1] - tot[inside][0]) / 1e9
        out["energy"] = {
            "counter_mj": e1 - e0,
            "counter_window_s": (h1 - h0) / 1e9,
            "samples_integral_mj": integral_mj,
            "samples_span_s": span_s,
            "counter_mean_w": (e1 - e0) / ((h1 - h0) / 1e6),
            "samples_mean_w": integral_mj / (span_s * 1e3) if span_s > 0 else None,
        }
    rep.data["sampler"] = out
    p50 = out["period_ns"]["p50"]
    rep.row(
        "sampler",
        "total samples / period p10-p50-p90",
        f"{out['samples']['total']} / {out['period_ns']['p10'] / 1e6:.1f}-{p50 / 1e6:.1f}-"
        f"{out['period_ns']['p90'] / 1e6:.1f} ms",
        out["samples"]["total"] > 50,
    )
    rep.row("sampler", "gaps / late polls", f"{len(s.gaps)} / {stats.get('late_polls')}", len(s.gaps) == 0)
    if "memory" in dev.channels:
        rep.row("sampler", "memory samples", str(out["samples"]["memory"]), out["samples"]["memory"] > 0)
    rep.row(
        "sampler",
        "mean W idle/spin/gemm",
        " / ".join(f"{(means[p]['total'] or float('nan')) / 1e3:.0f}" for p in ("idle", "spin", "gemm-4k")),
    )
    if "energy" in out:
        en = out["energy"]
        rep.row("sampler", "energy counter vs samples", f"{en['counter_mean_w']:.0f} W vs {en['samples_mean_w']:.0f} W")
    rep.row("sampler", "drain p50/p90", f"{out['drain_ms']['p50']:.2f} / {out['drain_ms']['p90']:.2f} ms")
    del h


# --------------------------------------------------------------------------- 5. perturbation
def perturbation(dev: Any, rep: Report) -> None:
    import numpy as np
    import torch

    from fingrav.config import GemmKernel, GemvKernel

    cases = [
        ("gemm-4k graph", GemmKernel(m=4096, n=4096, k=4096), "graph", 6, True),
        ("gemv-8k graph", GemvKernel(m=8192, k=8192), "graph", 6, True),
        ("gemv-2k stream", GemvKernel(m=2048, k=2048), "stream", 5, False),
    ]
    out: dict[str, Any] = {}
    for name, kernel, mode, pairs, gating in cases:
        h = dev.prepare(kernel)
        dev.launch_mode = mode
        n = int(min(max(50e6 / _cycle(dev, h), 50), 20_000))
        dev.execute([(h, n)])  # capture graphs / warm
        res: dict[str, list[float]] = {"off": [], "on": [], "off_span": [], "on_span": []}
        order = []
        for i in range(pairs):
            order += ["off", "on"] if i % 2 == 0 else ["on", "off"]
        for state in order:
            if state == "on":
                dev.start_sampling()
            dev.sleep_ns(200_000_000)
            rec = dev.execute([(h, n)])
            if state == "on":
                dev.stop_sampling()
            res[state].append(float(np.median(rec.duration_ns[3:])))
            res[state + "_span"].append(float(rec.gpu_end_ns[-1] - rec.gpu_start_ns[0]) / n)
        off, on = float(np.median(res["off"])), float(np.median(res["on"]))
        off_s, on_s = float(np.median(res["off_span"])), float(np.median(res["on_span"]))
        diff = 100.0 * (on - off) / off
        diff_span = 100.0 * (on_s - off_s) / off_s
        noise = 100.0 * float(np.std(res["off"]) / off)
        out[name] = {
            "n": n,
            "exec_ns_off": res["off"],
            "exec_ns_on": res["on"],
            "span_ns_off": res["off_span"],
            "span_ns_on": res["on_span"],
            "diff_pct": diff,
            "span_diff_pct": diff_span,
            "trial_noise_pct": noise,
        }
        ok = abs(diff) < PERTURBATION_LIMIT_PCT and abs(diff_span) < PERTURBATION_LIMIT_PCT
        rep.row(
            "perturb",
            f"{name} on-vs-off exec/cycle",
            f"{diff:+.2f} % / {diff_span:+.2f} % (trial noise {noise:.2f} %)",
            ok if gating else None,
        )
        dev.launch_mode = "graph"
        del h
        torch.cuda.empty_cache()
    rep.data["perturbation"] = out


# --------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, type=Path, help="folder for nvml_smoke.json")
    ap.add_argument("--index", type=int, default=0, help="CUDA device index (default 0)")
    ap.add_argument("--interval-ms", type=float, default=10.0, help="NVML sampler drain period (ms)")
    ap.add_argument("--verbose", action="store_true", help="INFO logging")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    rep = Report()
    rep.data["args"] = {"index": args.index, "interval_ms": args.interval_ms}
    rep.data["started_unix_s"] = time.time()

    from fingrav.device.nvidia import NVMLDevice

    t = time.perf_counter()
    dev = NVMLDevice(index=args.index, sample_interval_ms=args.interval_ms)
    rep.data["setup_seconds"] = round(time.perf_counter() - t, 2)
    try:
        rep.data["device"] = dev.describe()
        d = rep.data["device"]
        rep.row(
            "device",
            "name / driver / channels",
            f"{d.get('name')} / {d.get('driver_version')} / {','.join(d.get('channels', []))}",
        )
        rep.row("device", "stamp / spin kernels", f"{d.get('stamp_kernel')} / {d.get('spin_kernel')}")
        rep.section("stamps", stamps, dev, rep)
        rep.section("kernels", kernels, dev, rep)
        rep.section("spin", spin, dev, rep)
        rep.section("sampler", sampler, dev, rep)
        rep.section("perturbation", perturbation, dev, rep)
    finally:
        dev.close()
    total = time.perf_counter() - t_start
    rep.data["total_seconds"] = round(total, 1)
    rep.data["failed_checks"] = rep.failed
    rep.row("total", "wall time", f"{total:.1f} s", total < 60)
    path = args.out / "nvml_smoke.json"
    from fingrav.rawio import jsonable

    path.write_text(json.dumps(jsonable(rep.data), indent=2, sort_keys=True))
    print(f"wrote {path}")
    print(rep.table())
    return 1 if rep.failed else 0


if __name__ == "__main__":
    sys.exit(main())
