"""Peers side by side (issue 10, item 4): what the tools people use say a kernel draws on the H200, against a
>= 6 s uninstrumented reference, in ONE GPU-machine call (~4 min; `--budget-s` stops it in time).

    python3 experiments/peers.py --out DIR [--fingrav-summary results/<sweep>/summary.csv] [--kernels ...]
                                [--tools ...] [--quick] [--budget-s 330]
    python3 experiments/peers.py --out DIR --from-json DIR/peers.json --fingrav-summary ...   # no GPU: add fingrav

Per kernel (`KERNELS`: bf16 GEMM 8192^3, bf16 GEMM 4096^3 (cap-bound), fp32 GEMM 8192^3, bf16 GEMV 16384x16384,
bf16 GEMM 512^3 (~5-10 us)), prepared once by fingrav's NVML device (`fingrav.device.nvidia.NVMLDevice.prepare`:
random inputs, input sets rotated where one set would sit in L2), the tools run one after another, each after
`--idle-s` of idle GPU:

1. ``reference``: `REFERENCE_S` (6.5 s) of back-to-back CUDA-graph replays with no stamp between executions
   (`NVMLDevice.run_unstamped`: graphs of ~256 launches, one stamp at each end), power from NVML's sample buffer
   (nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES) through fingrav's own sampler process
   (`fingrav.device.nvidia.poller`); `settled_power`: the mean after `SETTLE_S`, its CI by batch means over 200 ms
   blocks, the 200 ms block means (the limit cycle shows in them), the "burst" mean 0.2-0.7 s after idle and the
   limit cycle (`fingrav.analysis.sustained.limit_cycle`).
2. ``aiconfigurator``: the per-kernel power protocol of NVIDIA's aiconfigurator collector, `run_aiconfigurator`
   (ai-dynamo/aiconfigurator, collector/helper.py: `benchmark_with_power` and `PowerMonitor`, at commit 095f58a51;
   collector/sglang/collect_gemm.py for the GEMM's 6 input copies): repeat for >= 1 s (0.3 s below 0.1 ms per
   call, at most 3000 calls) as CUDA-graph replays, poll nvmlDeviceGetPowerUsage every 100 ms in a thread, mean.
3. ``kernel_tuner``: Kernel Tuner 1.5's NVML observer (kernel_tuner.observers.nvml.NVMLObserver with "nvml_power",
   continuous_duration 1 s), driven by Kernel Tuner's own benchmark loop (`kt_benchmark`: core.py
   ``benchmark_default`` + ``benchmark_continuous`` of 1.5.0), kernels launched one by one from Python.
4. ``zeus`` and ``zeus_powermonitor``: Zeus 0.16 as its documentation prescribes for one or a few kernels
   (docs/measure/index.md, "Thermally Stable Energy Profiling"): `zeus.profile` trials (cooldown, warm-up,
   measurement window) on a `zeus.monitor.ZeusMonitor` (begin_window / end_window: the energy counter), with a
   `zeus.monitor.PowerMonitor` (update_period 0.1 s) running; its device_instant timeline over each measured
   window is the second row. Durations: `ZEUS_MEASURE_S` / `ZEUS_COOLDOWN_S` / `ZEUS_TRIALS` (the docs sweep them
   with `profile_parameters`, 2 x 10 x 10 trials of up to 20 s each: hours, not affordable here).
5. ``fingrav``: run separately; its row is read from `--fingrav-summary` (summary.csv, matched by kernel label)
   when given.

Per kernel and tool: mean power (W), error vs the reference (%), the CI where the tool gives one (Zeus: a t-interval
over its trials; fingrav: its CI), GPU-seconds spent (the wall time the tool's protocol held the GPU, its idle
cooldowns included) and the cycle time it saw. A tool that is not installed, or fails, gets its row with
"not available: <why>" / "failed: <why>" instead of stopping the script. Clocks, clock-event reasons and violation
counters (`GPUDevice.read_telemetry`) are read before and after every tool run. Writes DIR/peers.json and
DIR/peers.md; prints the table last. Wheels the image lacks (zeus, kernel_tuner; pydantic for fingrav) travel in
.whl (experiments/RESULTS.md). Heavy imports stay inside functions: the samplers start processes with *spawn*, which
re-imports this script.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import math
import statistics
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from fingrav.analysis.energy import trapezoid_energy_mj
from fingrav.analysis.sustained import binned, limit_cycle
from fingrav.analysis.tdist import t_half_width, t_interval
from fingrav.contracts.flags import BLOCK_NS, MAX_BLOCK_SPREAD_PCT
from fingrav.contracts.result import Estimate, ci_columns
from fingrav.contracts.units import MJ_PER_MW_NS, MW_PER_W, NS_PER_S
from fingrav.rawio import jsonable

logger = logging.getLogger("fingrav.experiments.peers")

#: the kernels: name -> fingrav.config kernel fields
KERNELS: dict[str, dict[str, Any]] = {
    "gemm-8k-bf16": {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "bf16"},
    "gemm-4k-bf16": {"kind": "gemm", "m": 4096, "n": 4096, "k": 4096, "dtype": "bf16"},
    "gemm-8k-fp32": {"kind": "gemm", "m": 8192, "n": 8192, "k": 8192, "dtype": "fp32"},
    "gemv-16k-bf16": {"kind": "gemv", "m": 16384, "k": 16384, "dtype": "bf16"},
    "gemm-512-bf16": {"kind": "gemm", "m": 512, "n": 512, "k": 512, "dtype": "bf16"},
}
TOOLS = ("reference", "aiconfigurator", "kernel_tuner", "zeus")  # zeus also gives the zeus_powermonitor row
ROW_ORDER = ("reference", "fingrav", "aiconfigurator", "kernel_tuner", "zeus", "zeus_powermonitor")

REFERENCE_S = 6.5  # uninstrumented back-to-back run (s)
SETTLE_S = 1.0  # the reference's settled window starts this long after its start (s)
BURST_S = (0.2, 0.7)  # the burst level: samples this long after idle (s)
LEVEL = 0.95
IDLE_S = 1.0  # idle GPU before each tool
ZEUS_MEASURE_S = 5.0  # zeus.profile measurement_duration (the docs' example value)
ZEUS_COOLDOWN_S = 2.0  # zeus.profile cooldown_duration (the docs' example: 10 s; shortened for the budget)
ZEUS_TRIALS = 3
ZEUS_WARMUP_TRIALS = 1
ZEUS_UPDATE_PERIOD_S = 0.1  # PowerMonitor update_period (Zeus's own example; 0.16's default None infers 0 s: bug #261)
AIC_OPS = 6  # collector/sglang/collect_gemm.py: op_list holds up to 6 copies of the GEMM, kernel_func runs them all
AIC_WARMUPS, AIC_NUM_RUNS, AIC_MAX_RUNS = 3, 6, 3000  # benchmark_with_power's defaults and cap
AIC_MIN_DURATION_S, AIC_FAST_DURATION_S, AIC_FAST_ITER_S = 1.0, 0.3, 1e-4  # COLLECTOR_POWER_MIN_DURATION, fast rule
AIC_INTERVAL_S = 0.1  # PowerMonitor.SAMPLE_INTERVAL_MS
KT_ITERATIONS = 7  # tune_kernel's iterations
KT_CONTINUOUS_S = 1.0  # NVMLObserver continuous_duration
KT_OBSERVABLES = ("nvml_power", "nvml_energy", "core_freq", "temperature")
BUDGET_S = 330.0  # the whole script (s): no tool run starts that would end later


# --------------------------------------------------------------------------- results
@dataclass
class ToolResult:
    """One tool's number for one kernel. power_w / ci_*: W; gpu_s: wall seconds the protocol held the GPU;
    cycle_us: the time per execution it saw (µs); status: "ok", "not available: ...", "failed: ...",
    "skipped: ..."; detail: everything else (JSON-able)."""

    kernel: str
    tool: str
    power_w: float | None = None
    ci_low_w: float | None = None
    ci_high_w: float | None = None
    gpu_s: float | None = None
    cycle_us: float | None = None
    status: str = "ok"
    notes: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


def error_pct(value: float | None, reference: float | None) -> float | None:
    """(value - reference) / reference in %, None when either is missing."""
    if value is None or reference is None or reference == 0:
        return None
    return (value - reference) / reference * 100.0


# --------------------------------------------------------------------------- 1. the reference's statistics
def settled_power(
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    start_ns: int,
    end_ns: int,
    settle_ns: int = int(SETTLE_S * 1e9),
    block_ns: int = BLOCK_NS,
    level: float = LEVEL,
    burst_ns: tuple[int, int] = (int(BURST_S[0] * 1e9), int(BURST_S[1] * 1e9)),
    sensor_period_ns: float | None = None,
) -> dict[str, Any]:
    """The settled power of one long run from its power samples (host ns, mW) and its busy span [start_ns, end_ns].

    Settled window: whole `block_ns` blocks from start + settle_ns up to end_ns. mean_w: the samples' mean there;
    ci: mean +- t(level, blocks - 1) x sd(block means) / sqrt(blocks) (batch means: the samples are autocorrelated;
    a limit cycle longer than a block makes the blocks correlated too, so read it with the cycle); block_means_w
    in time order; block_spread_pct: (max - min) / mean of the block means (> MAX_BLOCK_SPREAD_PCT: the limiter
    cycles); burst_w: the mean of the samples burst_ns after start (the level short runs after idle see);
    limit_cycle: `fingrav.analysis.sustained.limit_cycle` of the settled samples in W / ms (None: no cycling)."""
    t = np.asarray(t_ns, dtype=np.int64)
    p = np.asarray(power_mw, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, p = t[order], p[order]
    a = int(start_ns) + int(settle_ns)
    blocks = max(0, (int(end_ns) - a) // int(block_ns))
    b = a + blocks * int(block_ns)
    sel = (t >= a) & (t < b)
    out: dict[str, Any] = {
        "settled_from_ns": a,
        "settled_to_ns": b,
        "n_samples": int(sel.sum()),
        "mean_w": None,
        "ci_low_w": None,
        "ci_high_w": None,
        "block_ms": block_ns / 1e6,
        "block_means_w": [],
        "block_spread_pct": None,
        "burst_w": None,
        "limit_cycle": None,
    }
    bsel = (t >= int(start_ns) + burst_ns[0]) & (t < int(start_ns) + burst_ns[1])
    if bsel.any():
        out["burst_w"] = float(p[bsel].mean()) / 1e3
    if not sel.any():
        return out
    ts, ps = t[sel], p[sel]
    mean = float(ps.mean()) / 1e3
    out["mean_w"] = mean
    _, bm = binned(ts, ps, int(block_ns))
    means = [float(x) / 1e3 for x in bm]
    out["block_means_w"] = means
    if len(means) >= 2:
        half = t_half_width(means, level)  # batch means over the blocks
        out["ci_low_w"], out["ci_high_w"] = mean - half, mean + half
        out["block_spread_pct"] = (max(means) - min(means)) / statistics.fmean(means) * 100.0
    try:
        lc = limit_cycle(ts, ps, level, sensor_period_ns)
    except Exception as exc:  # noqa: BLE001 - the settled mean stands without the cycle's characterization
        logger.error("limit cycle failed:\n%s", traceback.format_exc())
        out["limit_cycle_error"] = _why(exc)
        lc = None
    if lc is not None:
        out["limit_cycle"] = {
            "cycles": lc.cycles,
            "period_ms": _scaled(lc.period_ns, 1e-6),
            "duty": _scaled(lc.duty, 1.0),
            "high_w": _scaled(lc.high_mw, 1e-3),
            "low_w": _scaled(lc.low_mw, 1e-3),
            "mean_w": _scaled(lc.mean_mw, 1e-3),
        }
    return out


def _scaled(e: Estimate, factor: float) -> dict[str, float | None]:
    """An Estimate's value and CI x factor, as the JSON record {value, ci_low, ci_high}."""
    return {k: (None if v is None else float(v) * factor) for k, v in (("value", e.value), ("ci_low", e.ci_low),
                                                                         ("ci_high", e.ci_high))}  # fmt: skip


# --------------------------------------------------------------------------- 2. aiconfigurator's protocol
def aic_runs(
    single_iter_s: float,
    num_runs: int = AIC_NUM_RUNS,
    repeat_n: int = 1,
    min_duration_s: float = AIC_MIN_DURATION_S,
) -> int:
    """How many graph replays aiconfigurator's benchmark_with_power runs with power on: enough for min_duration_s
    (0.3 s when one call takes < 0.1 ms), at least num_runs, at most 3000."""
    target = min(min_duration_s, AIC_FAST_DURATION_S) if single_iter_s < AIC_FAST_ITER_S else min_duration_s
    runs = max(num_runs, int(target / (single_iter_s * repeat_n)) + 1)
    return min(runs, AIC_MAX_RUNS)


class AicPowerSampler:
    """aiconfigurator's PowerMonitor, re-implemented: a thread that reads `read_mw()` (nvmlDeviceGetPowerUsage, mW)
    at once and then every `interval_s` until stopped, skipping failed reads; `stop()` returns the mean in W (None
    without a sample) and the samples."""

    def __init__(self, read_mw: Callable[[], float], interval_s: float = AIC_INTERVAL_S) -> None:
        self.read_mw = read_mw
        self.interval_s = interval_s
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="aic-power-monitor", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # the collector skips failed samples silently, so does this
                self.samples.append((time.time(), float(self.read_mw())))
            self._stop.wait(self.interval_s)

    def stop(self) -> float | None:
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._thread = None
        return float(np.mean([mw for _, mw in self.samples])) / 1e3 if self.samples else None


# --------------------------------------------------------------------------- 3. Kernel Tuner's loop
def kt_benchmark(
    dev: Any,
    benchmark_observers: Sequence[Any],
    continuous_observers: Sequence[Any],
    iterations: int = KT_ITERATIONS,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Kernel Tuner 1.5's benchmark of one configuration (kernel_tuner/core.py, DeviceInterface.benchmark_default
    then benchmark_continuous), over any `dev` with synchronize / start_event / run_kernel / stop_event /
    kernel_finished: `iterations` timed launches with the observers' hooks, then ceil(duration / time) launches
    back to back while the continuous observers poll. Returns the merged results (time in ms)."""
    result: dict[str, Any] = {}
    dev.synchronize()
    for _ in range(iterations):
        for obs in benchmark_observers:
            obs.before_start()
        dev.synchronize()
        dev.start_event()
        dev.run_kernel()
        dev.stop_event()
        for obs in benchmark_observers:
            obs.after_start()
        while not dev.kernel_finished():
            for obs in benchmark_observers:
                obs.during()
            sleep(1e-6)
        dev.synchronize()
        for obs in benchmark_observers:
            obs.after_finish()
    for obs in benchmark_observers:
        result.update(obs.get_results())
    if not continuous_observers:
        return result
    duration = 1.0
    for obs in continuous_observers:
        obs.results = result
        duration = max(duration, obs.continuous_duration)
    n = kt_continuous_iterations(duration, result["time"])
    dev.synchronize()
    for obs in continuous_observers:
        obs.before_start()
    dev.start_event()
    for _ in range(n):
        dev.run_kernel()
    dev.stop_event()
    for obs in continuous_observers:
        obs.after_start()
    while not dev.kernel_finished():
        for obs in continuous_observers:
            obs.during()
        sleep(1e-6)
    dev.synchronize()
    for obs in continuous_observers:
        obs.after_finish()
    for obs in continuous_observers:
        result.update(obs.get_results())
    result["continuous_iterations"] = n
    return result


def kt_continuous_iterations(duration_s: float, time_ms: float) -> int:
    """benchmark_continuous's launch count: ceil(duration / time of one execution)."""
    return int(np.ceil(duration_s / (time_ms / 1000.0)))


def load_kernel_tuner_nvml() -> types.ModuleType:
    """kernel_tuner.observers.nvml from the installed wheel, without running kernel_tuner/__init__.py: that imports
    the whole tuning interface (pymoo, python-constraint2, jsonschema, xmltodict), the observer needs numpy and pynvml
    only. The package is registered as a namespace over its own folder; no code is copied."""
    spec = importlib.util.find_spec("kernel_tuner")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("kernel_tuner is not installed (carry kernel_tuner-1.5.0-py3-none-any.whl)")
    if "kernel_tuner" not in sys.modules:
        pkg = types.ModuleType("kernel_tuner")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec
        sys.modules["kernel_tuner"] = pkg
    return importlib.import_module("kernel_tuner.observers.nvml")


# --------------------------------------------------------------------------- 4. Zeus's numbers
def timeline_mean_w(timeline: Sequence[tuple[float, float]]) -> float | None:
    """Time-weighted mean (W) of a PowerMonitor timeline [(time s, W)]: its trapezoid integral (what
    PowerMonitor.get_energy computes) over its span; the plain mean of one sample; None when empty."""
    if not timeline:
        return None
    ts = np.asarray([x for x, _ in timeline], dtype=np.float64)
    ws = np.asarray([w for _, w in timeline], dtype=np.float64)
    if ts.size < 2 or ts[-1] <= ts[0]:
        return float(ws.mean())
    t_ns = np.round((ts - ts[0]) * NS_PER_S).astype(np.int64)  # relative: float64 keeps ns precision
    energy_mj = trapezoid_energy_mj(t_ns, ws * MW_PER_W, 0, int(t_ns[-1]))
    return None if energy_mj is None else energy_mj / MJ_PER_MW_NS / float(t_ns[-1]) / MW_PER_W


def zeus_windows(log_csv: Path, name: str = "__zeus_profile_run_trial") -> list[tuple[float, float]]:
    """(start s, elapsed s) of every window `name` in a ZeusMonitor log file (its log_file= CSV), in order."""
    out = []
    with open(log_csv, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("window_name") == name:
                out.append((float(row["start_time"]), float(row["elapsed_time"])))
    return out


# --------------------------------------------------------------------------- 5. fingrav's summary
CI_LOW, CI_HIGH = ci_columns("power_w")


def read_fingrav_summary(path: Path, labels: Mapping[str, str]) -> dict[str, ToolResult]:
    """fingrav rows of a summary.csv for the kernels in `labels` (name -> fingrav kernel label), matched by the
    scenario of that name, else by the `kernel` column, among rows without a predecessor: power_w (the headline:
    sustained where the sweep had a reference run, see power_source) and its CI, valid, flags, the method SSP
    (ssp_power_w), cycle time. A summary
    before format 3 is read under the new names (`fingrav.contracts.legacy`); with a metrics.csv beside it, every
    number of the sweep (`fingrav.replay_check.replayed_columns`)."""
    from fingrav.contracts import legacy
    from fingrav.replay_check import replayed_columns

    with open(path, newline="") as f:
        rows = [legacy.new_columns(r) if legacy.is_old_row(r) else dict(r) for r in csv.DictReader(f)]
    if (path.parent / "metrics.csv").is_file():
        every = replayed_columns(path.parent)
        rows = [{**every.get(r.get("scenario", ""), {}), **r} for r in rows]
    by_label: dict[str, dict[str, Any]] = {}
    by_scenario: dict[str, dict[str, Any]] = {}
    for row in rows:
        if not (row.get("predecessor") or "").strip():
            by_label.setdefault(row.get("kernel", ""), row)
            by_scenario[row.get("scenario", "")] = row
    out = {}
    for name, label in labels.items():
        # the scenario of that name where there is one (a replicate dataset collects one kernel under several names)
        row = by_scenario.get(name) or by_label.get(label)
        if row is None:
            out[name] = ToolResult(name, "fingrav", status=f"not available: no row for {label!r} in {path}")
            continue
        valid = (row.get("valid") or "").strip().lower() == "true"
        notes = [f"scenario {row.get('scenario')}", "valid" if valid else "NOT valid"]
        if row.get("power_source"):
            notes.append(f"headline {row['power_source']}")
        flags = ";".join(f for f in (row.get("flags"), row.get("notes")) if f)
        if flags:
            notes.append(f"flags {flags}")
        if _num(row.get("ssp_power_w")) is not None and row.get("power_source") not in (None, "", "burst"):
            notes.append(f"burst {_num(row.get('ssp_power_w')):.0f} W")
        if _num(row.get("sustained_run_s")) is not None:
            notes.append(f"reference {_num(row.get('sustained_run_s')):.1f} s ({row.get('sustained_stop') or 'fixed'})")
        out[name] = ToolResult(
            name,
            "fingrav",
            power_w=_num(row.get("power_w")),
            ci_low_w=_num(row.get(CI_LOW)),
            ci_high_w=_num(row.get(CI_HIGH)),
            gpu_s=_num(row.get("collect_gpu_s")),  # the scenario's whole collection (the sweep's calibration aside)
            cycle_us=_num(row.get("sustained_cycle_time_us")) or _num(row.get("ssp_cycle_time_us")),
            notes="; ".join(notes),
            detail={k: v for k, v in row.items() if v not in (None, "")},
        )
    return out


def _num(v: Any) -> float | None:
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


# --------------------------------------------------------------------------- the table
def _fmt(v: float | None, spec: str = ".1f") -> str:
    return "—" if v is None else format(v, spec)


def markdown_table(results: Iterable[ToolResult], reference: Mapping[str, Mapping[str, Any]] | None = None) -> str:
    """The peers table (markdown): per kernel, the reference first, then fingrav and the peers; error vs the
    reference's settled mean. Then the reference's burst level, block spread, limit cycle and 200 ms block means."""
    rows = list(results)
    ref_w = {r.kernel: r.power_w for r in rows if r.tool == "reference" and r.status == "ok"}
    kernels = list(dict.fromkeys(r.kernel for r in rows))
    lines = [
        "| kernel | tool | mean power (W) | 95 % CI (W) | vs reference (%) | GPU-s | cycle (µs) | notes |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in kernels:
        mine = sorted((r for r in rows if r.kernel == k), key=lambda r: _order(r.tool))
        for r in mine:
            ci = "—" if r.ci_low_w is None else f"{r.ci_low_w:.1f} – {r.ci_high_w:.1f}"
            err = "—" if r.tool == "reference" else _fmt(error_pct(r.power_w, ref_w.get(k)), "+.1f")
            text = r.notes if r.status == "ok" else f"{r.status}{'; ' + r.notes if r.notes else ''}"
            cells = [k, r.tool, _fmt(r.power_w), ci, err, _fmt(r.gpu_s), _fmt(r.cycle_us, ".2f"), text]
            lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    if reference:
        lines += ["", "| kernel | burst 0.2–0.7 s (W) | block spread (%) | limit cycle | 200 ms block means (W) |"]
        lines.append("|---|---|---|---|---|")
        for k, s in reference.items():
            lc = s.get("limit_cycle")
            cyc = "none" if not lc else _cycle_text(lc)
            blocks = " ".join(f"{w:.0f}" for w in s.get("block_means_w", []))
            lines.append(f"| {k} | {_fmt(s.get('burst_w'))} | {_fmt(s.get('block_spread_pct'))} | {cyc} | {blocks} |")
    return "\n".join(lines)


def _cycle_text(lc: Mapping[str, Any]) -> str:
    period, duty = lc["period_ms"]["value"], lc["duty"]["value"]
    high, low = lc["high_w"]["value"], lc["low_w"]["value"]
    return (
        f"{lc['cycles']} cycles, period {_fmt(period, '.0f')} ms, duty {_fmt(duty, '.2f')}, "
        f"{_fmt(high)} / {_fmt(low)} W"
    )


def _order(tool: str) -> int:
    return ROW_ORDER.index(tool) if tool in ROW_ORDER else len(ROW_ORDER)


# --------------------------------------------------------------------------- orchestration
ToolFn = Callable[[Any, str, Any], list[ToolResult]]


def run_all(
    ctx: Any,
    kernels: Sequence[str],
    tools: Mapping[str, ToolFn],
    unavailable: Mapping[str, str],
    estimate_s: Mapping[str, Callable[[str], float]],
    budget_s: float,
    idle_s: float = IDLE_S,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> list[ToolResult]:
    """Every tool on every kernel, kernel by kernel (`ctx.prepare(name)` gives the kernel, `ctx.release()` frees
    what it took): a tool in `unavailable` (tool -> why) gets "not available: why"; one whose `estimate_s` would
    end past `budget_s` (from the first call) "skipped: time budget"; one that raises "failed: ..." (logged). Each
    tool runs after `idle_s` of idle GPU."""
    t0 = clock()
    out: list[ToolResult] = []
    for name in kernels:
        kernel = None
        try:
            kernel = ctx.prepare(name)
        except Exception as exc:  # noqa: BLE001 - report and go on with the next kernel
            logger.error("preparing %s failed:\n%s", name, traceback.format_exc())
            out += [ToolResult(name, t, status=f"failed: preparing the kernel: {_why(exc)}") for t in tools]
            continue
        try:
            for tool, fn in tools.items():
                if tool in unavailable:
                    out.append(ToolResult(name, tool, status=f"not available: {unavailable[tool]}"))
                    continue
                need = estimate_s[tool](name) + idle_s
                if clock() - t0 + need > budget_s:
                    out.append(ToolResult(name, tool, status=f"skipped: time budget ({budget_s:.0f} s)"))
                    continue
                sleep(idle_s)
                try:
                    out += fn(ctx, name, kernel)
                except Exception as exc:  # noqa: BLE001 - a failing tool is a row, not the end of the run
                    logger.error("%s on %s failed:\n%s", tool, name, traceback.format_exc())
                    out.append(ToolResult(name, tool, status=f"failed: {_why(exc)}"))
        finally:
            kernel = None  # the last reference: release() can free its memory
            ctx.release()
    return out


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).strip()[:200]}"


def write_outputs(out: Path, results: Sequence[ToolResult], meta: Mapping[str, Any]) -> str:
    """DIR/peers.json (meta + every result) and DIR/peers.md (the table); returns the table."""
    out.mkdir(parents=True, exist_ok=True)
    reference = meta.get("reference") or {}
    table = markdown_table(results, reference)
    payload = {"meta": dict(meta), "results": [asdict(r) for r in results]}
    (out / "peers.json").write_text(json.dumps(jsonable(payload), indent=2, sort_keys=True))
    head = f"# Peers on {meta.get('gpu', 'the GPU')} ({meta.get('date', '')})\n\n"
    (out / "peers.md").write_text(head + table + "\n")
    return table


# --------------------------------------------------------------------------- the GPU side
class GPUContext:
    """The GPU and what the tools share: fingrav's NVML device (kernels, the reference's sampler, telemetry), torch,
    the Zeus PowerMonitor once started, and the settled statistics of each reference run."""

    def __init__(self, args: argparse.Namespace) -> None:
        import torch

        from fingrav.device.nvidia import NVMLDevice

        self.args = args
        self.torch = torch
        torch.cuda.set_device(args.index)
        self.dev = NVMLDevice(index=args.index, sample_interval_ms=args.interval_ms)
        self.nvml_index = int(self.dev.power.nvml_index)
        self.power_monitor: Any = None
        self.reference: dict[str, dict[str, Any]] = {}
        self.scratch = Path(tempfile.mkdtemp(prefix="peers-"))

    def prepare(self, name: str) -> Any:
        return self.dev.prepare(kernel_model(name))

    def release(self) -> None:
        """Free the memory of the kernel just dropped (its inputs and cached graphs)."""
        import gc

        gc.collect()
        self.torch.cuda.synchronize()
        self.torch.cuda.empty_cache()

    def telemetry(self) -> dict[str, Any] | None:
        r = self.dev.read_telemetry()
        return None if r is None else r.as_dict()

    def close(self) -> None:
        if self.power_monitor is not None:
            self.power_monitor.stop()
        self.dev.close()


CONFIG_KERNELS: dict[str, Any] = {}  # scenario name -> kernel model, from --config (`config_kernels`)


def config_kernels(path: Path) -> dict[str, Any]:
    """The kernels of a fingrav sweep config (grids expanded, validated as the pipeline validates them), by scenario
    name; scenarios with a predecessor are left out (the peers measure one kernel back to back)."""
    from fingrav.config import load_config

    cfg = load_config(path)
    return {s.name: s.kernel for s in cfg.scenarios if s.predecessor is None}


def kernel_model(name: str) -> Any:
    """The fingrav.config kernel model of a `KERNELS` entry or of a scenario of --config."""
    from fingrav.config import GemmKernel, GemvKernel

    if name in CONFIG_KERNELS:
        return CONFIG_KERNELS[name]
    spec = dict(KERNELS[name])
    kind = spec.pop("kind")
    return GemmKernel(**spec) if kind == "gemm" else GemvKernel(**spec)


def _with_telemetry(ctx: GPUContext, fn: Callable[[], list[ToolResult]]) -> list[ToolResult]:
    before = ctx.telemetry()
    t0 = time.perf_counter()
    rows = fn()
    wall = time.perf_counter() - t0
    after = ctx.telemetry()
    tele: dict[str, Any] = {"before": before, "after": after}
    if before and after:
        tele["violation_ns"] = {
            k: after["violation"][k] - v for k, v in before["violation"].items() if k in after["violation"]
        }
    for r in rows:
        r.detail["telemetry"] = tele
        if r.gpu_s is None:
            r.gpu_s = wall
    return rows


def run_reference(ctx: GPUContext, name: str, h: Any) -> list[ToolResult]:
    """The uninstrumented reference (module docstring, 1.)."""

    def go() -> list[ToolResult]:
        dev = ctx.dev
        probe = dev.run_unstamped(h, 8)
        per = max(float(probe.duration_ns[0]) / 8, 1.0)
        n_cal = max(8, int(0.1e9 / per))
        cal = dev.run_unstamped(h, n_cal)
        cycle_ns = float(cal.duration_ns[0]) / n_cal
        count = int(math.ceil(ctx.args.reference_s * 1e9 / cycle_ns))
        t0 = time.perf_counter()
        dev.start_sampling()
        rec = dev.run_unstamped(h, count)  # (captures the graphs it lacks first, with the GPU idle)
        end = dev.host_time_ns()  # right after the synchronize that follows the last execution
        start = end - int(rec.duration_ns[0])  # the busy span is the two end stamps' distance
        dev.sleep_ns(100_000_000)  # the sensor reports with a delay: let the last samples arrive
        samples = dev.stop_sampling()
        wall = time.perf_counter() - t0
        total = samples.channel == "total"
        s = settled_power(
            samples.t_ns[total],
            samples.power_mw[total],
            start,
            end,
            int(ctx.args.settle_s * 1e9),
            sensor_period_ns=20e6,
        )
        s["count"] = count
        s["gaps"] = len(samples.gaps)
        rel = (samples.t_ns[total] - start) / 1e6
        keep = (rel >= -200.0) & (rel <= (end - start) / 1e6 + 100.0)
        s["samples_ms_w"] = [
            [round(float(a), 2), round(float(w) / 1e3, 1)]
            for a, w in zip(rel[keep], samples.power_mw[total][keep], strict=True)
        ]
        ctx.reference[name] = s
        gpu_cycle_us = float(rec.duration_ns[0]) / count / 1e3
        notes = f"{count} executions, {s['n_samples']} settled samples"
        if (s.get("block_spread_pct") or 0) > MAX_BLOCK_SPREAD_PCT:
            notes += f"; limiter cycles (block spread {s['block_spread_pct']:.1f} %)"
        return [
            ToolResult(
                name,
                "reference",
                power_w=s["mean_w"],
                ci_low_w=s["ci_low_w"],
                ci_high_w=s["ci_high_w"],
                gpu_s=wall,
                cycle_us=gpu_cycle_us,
                notes=notes,
                detail=s,
            )
        ]

    return _with_telemetry(ctx, go)


def run_aiconfigurator(ctx: GPUContext, name: str, h: Any) -> list[ToolResult]:
    """aiconfigurator's collector protocol (module docstring, 2.): warm-up timed with CUDA events, a CUDA graph of
    one kernel_func (AIC_OPS executions on the first AIC_OPS input sets, the collector's op_list), graph warm-up,
    then `aic_runs` replays with the 100 ms NVML poller running; power = the mean of its samples."""
    import pynvml

    torch = ctx.torch

    def go() -> list[ToolResult]:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(ctx.nvml_index)

        def kernel_func() -> None:
            for j in range(AIC_OPS):
                h.launch(j)

        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(AIC_WARMUPS):
            kernel_func()
        end.record()
        torch.cuda.synchronize()
        single_s = start.elapsed_time(end) / AIC_WARMUPS / 1000.0
        runs = aic_runs(single_s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            kernel_func()
        torch.cuda.synchronize()
        for _ in range(AIC_WARMUPS):
            g.replay()
        torch.cuda.synchronize()
        sampler = AicPowerSampler(lambda: pynvml.nvmlDeviceGetPowerUsage(handle))
        sampler.start()
        clk0 = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        start.record()
        for _ in range(runs):
            g.replay()
        end.record()
        torch.cuda.synchronize()
        clk1 = pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)
        power = sampler.stop()
        latency_ms = start.elapsed_time(end) / runs
        del g
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        detail = {
            "single_iter_s": single_s,
            "runs": runs,
            "ops_per_run": AIC_OPS,
            "latency_ms_per_kernel": latency_ms / AIC_OPS,
            "measured_s": latency_ms * runs / 1e3,
            "samples_w": [mw / 1e3 for _, mw in sampler.samples],
            "sm_clock_mhz": [clk0, clk1],
            "throttled": bool(clk1 < clk0 * 0.9),
            "power_limit_w": pynvml_limit_w(ctx),
        }
        notes = (
            f"{len(sampler.samples)} samples of nvmlDeviceGetPowerUsage over {detail['measured_s']:.2f} s "
            f"({runs} replays of {AIC_OPS} kernels)"
        )
        return [
            ToolResult(
                name,
                "aiconfigurator",
                power_w=power,
                cycle_us=latency_ms / AIC_OPS * 1e3,
                notes=notes,
                detail=detail,
            )
        ]

    return _with_telemetry(ctx, go)


def pynvml_limit_w(ctx: GPUContext) -> float | None:
    lim = ctx.dev.describe().get("enforced_power_limit_mw")
    return None if lim is None else float(lim) / 1e3


class TorchKTBackend:
    """What Kernel Tuner's benchmark loop needs of a backend (kernel_tuner/backends/cupy.py: start_event,
    stop_event, kernel_finished, synchronize, run_kernel), over torch CUDA events and one prepared fingrav kernel
    launched from Python; each launch takes the next input set. `start` / `end` are the events."""

    def __init__(self, torch: Any, handle: Any) -> None:
        self.torch = torch
        self.handle = handle
        self.start = torch.cuda.Event(enable_timing=True)
        self.end = torch.cuda.Event(enable_timing=True)
        self.i = 0
        self.env: dict[str, Any] = {}

    def synchronize(self) -> None:
        self.torch.cuda.synchronize()

    def start_event(self) -> None:
        self.start.record()

    def stop_event(self) -> None:
        self.end.record()

    def kernel_finished(self) -> bool:
        return bool(self.end.query())

    def run_kernel(self) -> None:
        self.handle.launch(self.i)
        self.i += 1


def run_kernel_tuner(ctx: GPUContext, name: str, h: Any) -> list[ToolResult]:
    """Kernel Tuner 1.5's NVMLObserver (module docstring, 3.): its result "nvml_power" is the median of the
    instant-power readings (NVML_FI_DEV_POWER_INSTANT) taken while the continuous run drains."""
    kt = load_kernel_tuner_nvml()
    base = importlib.import_module("kernel_tuner.observers.observer")

    class RuntimeObserver(base.BenchmarkObserver):  # kernel_tuner/observers/cupy.py CupyRuntimeObserver, on torch
        def __init__(self, dev: TorchKTBackend) -> None:
            self.dev = dev
            self.times: list[float] = []

        def after_finish(self) -> None:
            self.times.append(self.dev.start.elapsed_time(self.dev.end))

        def get_results(self) -> dict[str, Any]:
            out = {"time": float(np.average(self.times)), "times": list(self.times)}
            self.times = []
            return out

    def go() -> list[ToolResult]:
        dev = TorchKTBackend(ctx.torch, h)
        obs = kt.NVMLObserver(list(KT_OBSERVABLES), device=ctx.nvml_index, continuous_duration=KT_CONTINUOUS_S)
        obs.register_device(dev)
        result = kt_benchmark(dev, [RuntimeObserver(dev), obs], [obs.continuous_observer])
        readings = result.get("power_readings") or obs.continuous_observer.power_readings
        n = int(result["continuous_iterations"])
        cont_s = dev.start.elapsed_time(dev.end) / 1e3
        detail = {
            "time_ms": result["time"],
            "continuous_iterations": n,
            "continuous_s": cont_s,
            "power_readings": [[float(t), float(w)] for t, w in readings],
            "nvml_energy_j": _num(result.get("nvml_energy")),
            "core_freq_mhz": _num(result.get("core_freq")),
            "kernel_tuner_version": _dist_version("kernel_tuner"),
        }
        power = _num(result.get("nvml_power"))
        notes = f"median of {len(readings)} readings; {n} launches from Python in {cont_s:.2f} s"
        if not readings:  # ContinuousObserver keeps power = 0 when it read nothing while the run drained
            notes = f"Kernel Tuner reported {power} W: no reading while the run drained; " + notes
            power = None
        return [
            ToolResult(
                name,
                "kernel_tuner",
                power_w=power,
                cycle_us=cont_s / n * 1e6 if n else None,
                notes=notes,
                detail=detail,
            )
        ]

    return _with_telemetry(ctx, go)


def run_zeus(ctx: GPUContext, name: str, h: Any) -> list[ToolResult]:
    """Zeus 0.16 (module docstring, 4.): zeus.profile trials on a ZeusMonitor, with a PowerMonitor running. Rows:
    "zeus" (energy counter: total_energy / total_time per trial, t-interval over trials) and "zeus_powermonitor"
    (the time-weighted mean of the device_instant timeline over each measured window, t-interval over trials)."""
    from zeus.monitor import PowerMonitor, ZeusMonitor
    from zeus.profile import profile_measurement_duration

    a = ctx.args
    idx = int(a.index)
    pm_error = None
    if ctx.power_monitor is None:
        try:  # started once, kept for the later kernels (its processes poll every 0.1 s: a light load)
            ctx.power_monitor = PowerMonitor(gpu_indices=[idx], update_period=ZEUS_UPDATE_PERIOD_S)
        except Exception as exc:  # noqa: BLE001 - the ZeusMonitor row does not need it
            logger.error("Zeus PowerMonitor failed to start:\n%s", traceback.format_exc())
            pm_error = f"failed: PowerMonitor: {_why(exc)}"
    pm = ctx.power_monitor

    def go() -> list[ToolResult]:
        log = ctx.scratch / f"zeus-{name}.csv"
        monitor = ZeusMonitor(gpu_indices=[idx], cpu_indices=[], log_file=log)
        counter = iter(range(1 << 62))

        def one_iteration() -> None:
            h.launch(next(counter))

        t0 = time.perf_counter()
        report = profile_measurement_duration(
            one_iteration,
            monitor,
            measurement_duration_search_range=[a.zeus_measure_s],
            cooldown_duration=a.zeus_cooldown_s,
            num_trials=a.zeus_trials,
            num_warmup_trials=a.zeus_warmup_trials,
        )
        wall = time.perf_counter() - t0
        entry = report.entries[0]
        trials = list(entry.trials)
        powers = [t.total_energy / t.total_time for t in trials if t.total_time > 0]
        mean, lo, hi = t_interval(powers)
        pm_powers: list[float | None] = []
        pm_status = pm_error or "ok"
        try:
            # the measured trials are the last windows (the warm-up trials come first)
            for s, el in [] if pm is None else zeus_windows(log)[-len(trials) :]:
                tl = pm.get_power_timeline("device_instant", gpu_index=idx, start_time=s, end_time=s + el)
                pm_powers.append(timeline_mean_w(tl.get(idx, [])))
        except Exception as exc:  # noqa: BLE001 - the energy-counter row stands without the PowerMonitor's
            logger.error("PowerMonitor timeline failed:\n%s", traceback.format_exc())
            pm_status = f"failed: {_why(exc)}"
        pm_mean, pm_lo, pm_hi = t_interval([p for p in pm_powers if p is not None])
        cycle_us = statistics.fmean(t.time_per_iter for t in trials) * 1e6 if trials else None
        detail = {
            "zeus_version": _dist_version("zeus"),
            "measurement_duration_s": a.zeus_measure_s,
            "cooldown_duration_s": a.zeus_cooldown_s,
            "num_trials": a.zeus_trials,
            "num_warmup_trials": a.zeus_warmup_trials,
            "energy_std_j_per_iter": entry.energy_std,
            "is_valid": entry.is_valid,
            "trials": [asdict(t) for t in trials],
            "trial_power_w": powers,
            "power_monitor_update_period_s": None if pm is None else pm.update_period,
            "power_monitor_domains": None if pm is None else [d.value for d in pm.measurement_domains],
            "power_monitor_trial_w": pm_powers,
        }
        notes = f"{len(trials)} trials of {a.zeus_measure_s:g} s after {a.zeus_cooldown_s:g} s cooldown"
        return [
            ToolResult(name, "zeus", mean, lo, hi, wall, cycle_us, notes=notes + " (energy counter)", detail=detail),
            ToolResult(
                name,
                "zeus_powermonitor",
                pm_mean,
                pm_lo,
                pm_hi,
                wall,
                cycle_us,
                status=pm_status,
                notes=f"device_instant every {ZEUS_UPDATE_PERIOD_S:g} s over the same windows (same GPU time)",
                detail={"trial_w": pm_powers},
            ),
        ]

    return _with_telemetry(ctx, go)


def availability(tools: Sequence[str]) -> dict[str, str]:
    """tool -> why it cannot run here (missing package, wrong version); tools not listed can run."""
    out: dict[str, str] = {}
    if "zeus" in tools:
        try:
            importlib.import_module("zeus.monitor")
            importlib.import_module("zeus.profile")
            v = _dist_version("zeus")
            if not (v or "").startswith("0.16"):
                out["zeus"] = f"zeus {v} installed, this compares 0.16"
        except Exception as exc:  # noqa: BLE001 - any import failure is "not available"
            out["zeus"] = _why(exc)
    if "kernel_tuner" in tools:
        try:
            load_kernel_tuner_nvml()
            v = _dist_version("kernel_tuner")
            if not (v or "").startswith("1.5"):
                out["kernel_tuner"] = f"kernel_tuner {v} installed, this compares 1.5"
        except Exception as exc:  # noqa: BLE001
            out["kernel_tuner"] = _why(exc)
    if "aiconfigurator" in tools:
        try:
            importlib.import_module("pynvml")
        except Exception as exc:  # noqa: BLE001
            out["aiconfigurator"] = _why(exc)
    return out


def estimates(args: argparse.Namespace) -> dict[str, Callable[[str], float]]:
    """Seconds each tool is expected to take on a kernel (for the budget), with margin."""
    zeus = args.zeus_warmup_trials * args.zeus_measure_s + args.zeus_trials * (
        args.zeus_cooldown_s + args.zeus_measure_s
    )
    return {
        "reference": lambda k: args.reference_s + 1.5,
        "aiconfigurator": lambda k: 2.0,
        "kernel_tuner": lambda k: 3.0,
        "zeus": lambda k: zeus + 3.0,
    }


# --------------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--out", required=True, type=Path, help="folder for peers.json and peers.md")
    ap.add_argument("--fingrav-summary", type=Path, default=None, help="a fingrav summary.csv for the fingrav rows")
    ap.add_argument(
        "--from-json",
        type=Path,
        action="append",
        default=None,
        help="re-render this peers.json with --fingrav-summary (no GPU); repeat it to join several (`join_peers`)",
    )
    ap.add_argument(
        "--config", type=Path, default=None, help="a fingrav sweep config: --kernels may name its scenarios too"
    )
    ap.add_argument("--kernels", nargs="+", default=None, help=f"kernels to measure (default: {', '.join(KERNELS)})")
    ap.add_argument("--tools", nargs="+", default=list(TOOLS), choices=list(TOOLS), help="tools to run")
    ap.add_argument("--index", type=int, default=0, help="CUDA device index")
    ap.add_argument("--interval-ms", type=float, default=10.0, help="fingrav's NVML sampler drain period (ms)")
    ap.add_argument("--reference-s", type=float, default=REFERENCE_S, help="uninstrumented reference length (s)")
    ap.add_argument("--settle-s", type=float, default=SETTLE_S, help="the reference's settling time (s)")
    ap.add_argument("--idle-s", type=float, default=IDLE_S, help="idle GPU before each tool (s)")
    ap.add_argument("--zeus-measure-s", type=float, default=ZEUS_MEASURE_S, help="zeus.profile measurement_duration")
    ap.add_argument("--zeus-cooldown-s", type=float, default=ZEUS_COOLDOWN_S, help="zeus.profile cooldown_duration")
    ap.add_argument("--zeus-trials", type=int, default=ZEUS_TRIALS, help="zeus.profile num_trials")
    ap.add_argument("--zeus-warmup-trials", type=int, default=ZEUS_WARMUP_TRIALS, help="zeus.profile warm-up trials")
    ap.add_argument("--budget-s", type=float, default=BUDGET_S, help="start no tool run that would end later (s)")
    ap.add_argument("--quick", action="store_true", help="short durations (a smoke test, not numbers to cite)")
    args = ap.parse_args(argv)
    if args.quick:
        args.reference_s, args.settle_s = min(args.reference_s, 2.5), min(args.settle_s, 0.5)
        args.zeus_measure_s, args.zeus_cooldown_s, args.zeus_trials, args.zeus_warmup_trials = 1.0, 0.5, 2, 0
    if args.config is not None:
        CONFIG_KERNELS.update(config_kernels(args.config))
    known = [*KERNELS, *CONFIG_KERNELS]
    args.kernels = args.kernels or list(KERNELS)
    unknown = [k for k in args.kernels if k not in known]
    if unknown:
        ap.error(f"unknown kernels {unknown}: one of {known}")
    if args.reference_s <= args.settle_s + 0.4:
        ap.error("--reference-s must exceed --settle-s by at least two 200 ms blocks")
    return args


def fingrav_rows(summary: Path | None, labels: Mapping[str, str]) -> list[ToolResult]:
    """The fingrav rows: from `summary` (a summary.csv) when given and present, else "not available" rows."""
    if summary is None:
        return [ToolResult(k, "fingrav", status="not available: run separately (--fingrav-summary)") for k in labels]
    if not summary.exists():
        return [ToolResult(k, "fingrav", status=f"not available: {summary} missing") for k in labels]
    return list(read_fingrav_summary(summary, labels).values())


def join_peers(parts: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Several peers.json of one card joined into one (e.g. aiconfigurator's protocol and the reference, run as two
    calls of this script): the results in the given order, labels and reference data merged, setup and total times
    summed, each part's arguments under meta["merged_from"][its name]; the rest of meta is the first part's. One
    part is returned as it is."""
    if len(parts) == 1:
        return dict(next(iter(parts.values())))
    datas = list(parts.values())
    meta = dict(datas[0]["meta"])
    for key in ("labels", "reference", "unavailable"):
        meta[key] = {k: v for d in datas for k, v in (d["meta"].get(key) or {}).items()}
    for key in ("setup_s", "total_s"):
        meta[key] = sum(float(d["meta"].get(key) or 0.0) for d in datas)
    meta["merged_from"] = {name: d["meta"].get("args") for name, d in parts.items()}
    return {"meta": meta, "results": [r for d in datas for r in d["results"]]}


def rerender(args: argparse.Namespace) -> int:
    """--from-json: previous runs' peers.json (joined, `join_peers`) with their fingrav rows replaced by
    --fingrav-summary's (no GPU)."""
    data = join_peers({p.name if p.name != "peers.json" else str(p): json.loads(p.read_text()) for p in args.from_json})
    meta = dict(data["meta"])
    results = [ToolResult(**r) for r in data["results"] if r["tool"] != "fingrav"]
    results += fingrav_rows(args.fingrav_summary, meta["labels"])
    meta["fingrav_summary"] = None if args.fingrav_summary is None else str(args.fingrav_summary)
    table = write_outputs(args.out, results, meta)
    print(table)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.from_json is not None:
        return rerender(args)
    t_start = time.perf_counter()
    labels = {k: kernel_model(k).label() for k in args.kernels}
    unavailable = availability(args.tools)
    for tool, why in unavailable.items():
        logger.warning("%s not available: %s", tool, why)
    ctx = GPUContext(args)
    device: dict[str, Any] = {}
    setup_s = math.nan
    results: list[ToolResult] = []
    fns: dict[str, ToolFn] = {
        "reference": run_reference,
        "aiconfigurator": run_aiconfigurator,
        "kernel_tuner": run_kernel_tuner,
        "zeus": run_zeus,
    }
    try:
        device = ctx.dev.describe()
        setup_s = time.perf_counter() - t_start
        results = run_all(
            ctx,
            args.kernels,
            {t: fns[t] for t in args.tools},
            unavailable,
            estimates(args),
            args.budget_s - (time.perf_counter() - t_start),  # the budget is the whole script's
            args.idle_s,
        )
    finally:
        ctx.close()
    results += fingrav_rows(args.fingrav_summary, labels)
    meta = {
        "gpu": device.get("name"),
        "date": time.strftime("%Y-%m-%d"),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "labels": labels,
        "device": device,
        "unavailable": unavailable,
        "reference": ctx.reference,
        "fingrav_summary": None if args.fingrav_summary is None else str(args.fingrav_summary),
        "setup_s": setup_s,
        "total_s": time.perf_counter() - t_start,
        "versions": _versions(),
    }
    table = write_outputs(args.out, results, meta)
    print(f"wrote {args.out / 'peers.json'} and {args.out / 'peers.md'} in {meta['total_s']:.0f} s")
    print(table)
    return 0


def _versions() -> dict[str, str | None]:
    return {d: _dist_version(d) for d in ("torch", "nvidia-ml-py", "zeus", "kernel_tuner", "numpy", "pydantic")}


def _dist_version(dist: str) -> str | None:
    """The installed version of distribution `dist`, None when it is not installed as one."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
