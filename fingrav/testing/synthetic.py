"""Synthetic raw data with known answers, for tests and the scale benchmark (numpy + polars only).

The "sensor" is ideal except for a reporting delay (and optional noise): a sample stamped t_ns reports
the instantaneous power at t_ns - delay_ns, so after delay correction every LOI's power equals the
level of the role of its execution exactly. Runs, in time order, as the collector writes them
(ARCHITECTURE.md "Runs and roles"):

- SSP runs (phase "ssp", run ids 0 .. runs-1): [pred x predecessor_count] + main x
  (ssp_index + tail + trailing);
- SSE runs (phase "sse", run ids runs .. runs+sse_runs-1): [pred x predecessor_count] + main x
  (warmups + 1), the SSE execution last;
- the reference run (phase "reference", when reference_executions > 0): main x reference_executions
  back to back, no predecessor; executions.parquet keeps only its first and last execution.

Each run is an idle, a random delay and the executions back to back (launch gaps between them). GPU
stamps come from the host timeline through the inverse of host = gpu + offset + drift * (gpu - gpu_ref).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl

from fingrav.config import AnalysisConfig
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan, Probe
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.sensor import PlanSensor, SensorModel

logger = logging.getLogger(__name__)

RUNS_SCHEMA = {
    "run": pl.Int32,
    "phase": pl.String,
    "host_start_ns": pl.Int64,
    "delay_ns": pl.Int64,
    "idle_ns": pl.Int64,
    "energy_start_mj": pl.Float64,
    "energy_end_mj": pl.Float64,
}


@dataclass
class SynthSpec:
    """What to generate. Times ns, power mW; drift as a fraction."""

    runs: int = 60  # SSP runs
    sse_runs: int = 20  # SSE runs (warmups + 1 executions each)
    exec_time_ns: int = 200_000
    exec_jitter: float = 0.002  # relative sd of the run's execution time
    outlier_runs: tuple[int, ...] = ()  # these SSP runs execute `outlier_factor` x slower
    sse_outlier_runs: tuple[int, ...] = ()  # these SSE runs (0-based among the SSE runs) too
    outlier_factor: float = 1.3
    warmups: int = 3
    ssp_index: int = 6
    tail: int = 4
    trailing: int = 0  # executions after the SSP tail (role "trail", level of "ssp")
    launch_gap_ns: int = 0  # idle gap after every execution but a run's last, at levels_mw["gap"]
    predecessor_count: int = 0
    pred_exec_time_ns: int = 100_000
    idle_ns: int = 2_000_000
    max_delay_ns: int = 1_000_000
    sample_period_ns: int = 20_000
    delay_ns: int = 0
    offset_ns: int = 163_000
    gpu_ref_ns: int = 10_000_000_000
    drift: float = 0.0
    # reference run: back-to-back main executions (0: none); those ending within the first
    # reference_transient_ns draw levels_mw["transient"], the rest the "ssp" level (plan probe t_stable_ns)
    reference_executions: int = 0
    reference_transient_ns: int = 0
    energy_counter: bool = True  # runs.parquet energy_start_mj / energy_end_mj (else null)
    counter_scale: float = 1.0  # the energy counter reads the true energy x this
    noise_mw: float = 0.0  # sd of AR(1) sample noise (before channel scaling)
    noise_ar: float = 0.0  # AR(1) coefficient of the noise from one sample to the next
    truth_rows: str = "relevant"  # "relevant" (SSE, first, SSP tail of measure runs) | "all"
    levels_mw: dict[str, float] = field(
        default_factory=lambda: {
            "idle": 100_000.0,
            "pred": 500_000.0,
            "first": 450_000.0,
            "warmup": 300_000.0,
            "sse": 350_000.0,
            "ssp": 400_000.0,
            "gap": 150_000.0,
            "transient": 600_000.0,
        }
    )
    channel_scale: dict[str, float] = field(default_factory=lambda: {"total": 1.0, "memory": 0.25})
    margin: float = 0.05  # the binning margin `analyze` uses unless analysis.margin is set
    seed: int = 0
    host_t0_ns: int = 1_000_000_000_000


def _roles(spec: SynthSpec, phase: str = "ssp") -> np.ndarray:
    """Role names of the executions of one run of a kind ("ssp" | "sse"; pred first, then main)."""
    main = []
    if phase == "sse":
        for i in range(spec.warmups + 1):
            if i == spec.warmups:
                main.append("sse")
            elif i == 0 and spec.predecessor_count:
                main.append("first")
            else:
                main.append("warmup")
    else:
        for i in range(spec.ssp_index + spec.tail + spec.trailing):
            if i >= spec.ssp_index + spec.tail:
                main.append("trail")
            elif i >= spec.ssp_index:
                main.append("ssp")
            elif i == spec.warmups:
                main.append("sse")
            elif i == 0 and spec.predecessor_count:
                main.append("first")
            else:
                main.append("warmup")
    return np.array(["pred"] * spec.predecessor_count + main, dtype=object)


@dataclass
class _Block:
    """Runs of one kind with the same layout: per-run rows, per-execution columns."""

    phase: str
    run_ids: np.ndarray  # (r,)
    roles: np.ndarray  # (n,) role names
    segment: np.ndarray  # (n,) "pred" | "main"
    exec_index: np.ndarray  # (n,) int32
    dur: np.ndarray  # (r, n) ns
    gap: np.ndarray  # (r, n) ns after each execution (0 after the last)
    delay: np.ndarray  # (r,) ns


def _block(
    spec: SynthSpec, phase: str, run_ids: np.ndarray, outliers: tuple[int, ...], rng: np.random.Generator
) -> _Block:
    roles = _roles(spec, phase)
    n = roles.size
    r = run_ids.size
    n_pred = spec.predecessor_count
    t_main = spec.exec_time_ns * (1.0 + spec.exec_jitter * rng.standard_normal(r))
    if outliers:
        t_main[list(outliers)] *= spec.outlier_factor
    dur = np.empty((r, n), dtype=np.int64)
    dur[:, :n_pred] = spec.pred_exec_time_ns
    dur[:, n_pred:] = np.rint(t_main)[:, None].astype(np.int64)
    gap = np.full((r, n), spec.launch_gap_ns, dtype=np.int64)
    gap[:, -1] = 0
    delay = rng.integers(0, max(spec.max_delay_ns, 1), size=r)
    seg = np.where(np.arange(n) < n_pred, "pred", "main").astype(object)
    idx = np.concatenate([np.arange(n_pred), np.arange(n - n_pred)]).astype(np.int32)
    return _Block(phase, run_ids, roles, seg, idx, dur, gap, delay)


def _reference_block(spec: SynthSpec, run_id: int) -> _Block:
    n = spec.reference_executions
    dur = np.full((1, n), spec.exec_time_ns, dtype=np.int64)
    gap = np.full((1, n), spec.launch_gap_ns, dtype=np.int64)
    gap[:, -1] = 0
    return _Block(
        "reference",
        np.array([run_id]),
        np.array(["ssp"] * n, dtype=object),  # transient executions are re-levelled in generate()
        np.array(["main"] * n, dtype=object),
        np.arange(n, dtype=np.int32),
        dur,
        gap,
        np.zeros(1, dtype=np.int64),
    )


@dataclass
class _Timeline:
    """Every run laid out on the host clock (ns): the runs' rows, the executions and truth rows to store, each
    execution's start, end, cycle end and true level (mW, flattened in run order), and the end of the last idle."""

    run_rows: list[tuple[int, str, int, int, int, float, float]]
    ex_parts: list[dict[str, np.ndarray]]
    truth_parts: list[dict[str, np.ndarray]]
    starts: np.ndarray
    ends: np.ndarray
    cycle_ends: np.ndarray
    levels: np.ndarray
    host_end: int


def _lay_out(spec: SynthSpec, blocks: list[_Block]) -> _Timeline:
    """Runs back to back in block order, each idle + delay + busy; the energy counter's readings with them."""
    lv = spec.levels_mw
    begin = spec.host_t0_ns
    starts_l, ends_l, cyc_l, level_l = [], [], [], []
    run_rows: list[tuple[int, str, int, int, int, float, float]] = []
    truth_parts: list[dict[str, np.ndarray]] = []
    ex_parts: list[dict[str, np.ndarray]] = []
    energy = 0.0  # true energy since host_t0_ns, mJ
    for b in blocks:
        r, n = b.dur.shape
        busy = (b.dur + b.gap).sum(axis=1)
        span = spec.idle_ns + b.delay + busy
        run_begin = begin + np.concatenate([[0], np.cumsum(span)[:-1]])
        begin = int(run_begin[-1] + span[-1])
        host_start = run_begin + spec.idle_ns + b.delay
        cycle_ends = host_start[:, None] + np.cumsum(b.dur + b.gap, axis=1)
        starts = cycle_ends - b.dur - b.gap
        ends = starts + b.dur
        level = np.broadcast_to(np.array([lv["ssp" if x == "trail" else x] for x in b.roles]), (r, n)).copy()
        if b.phase == "reference" and spec.reference_transient_ns > 0:
            level[ends <= host_start[:, None] + spec.reference_transient_ns] = lv["transient"]
        busy_mj = (level * b.dur + lv["gap"] * b.gap).sum(axis=1) * 1e-9  # mW x ns -> mJ
        idle_mj = lv["idle"] * (spec.idle_ns + b.delay) * 1e-9
        for k in range(r):
            energy += float(idle_mj[k])
            e0 = energy
            energy += float(busy_mj[k])
            run_rows.append((int(b.run_ids[k]), b.phase, int(host_start[k]), int(b.delay[k]), spec.idle_ns, e0, energy))
        starts_l.append(starts.ravel())
        ends_l.append(ends.ravel())
        cyc_l.append(cycle_ends.ravel())
        level_l.append(level.ravel())
        ex_parts.append(_stored_executions(b, starts, ends))
        if b.phase != "reference":
            truth_parts.append(_truth_rows(spec, b, level))
    return _Timeline(
        run_rows, ex_parts, truth_parts, np.concatenate(starts_l), np.concatenate(ends_l), np.concatenate(cyc_l),
        np.concatenate(level_l), begin + spec.idle_ns,
    )  # fmt: skip


def _stored_executions(b: _Block, starts: np.ndarray, ends: np.ndarray) -> dict[str, np.ndarray]:
    """The block's execution rows as the collector stores them (a reference run: its first and last only)."""
    r, n = b.dur.shape
    keep = np.ones((r, n), bool)
    if b.phase == "reference":  # only the first and the last execution are stored
        keep[:, 1:-1] = False
    return {
        "run": np.repeat(b.run_ids.astype(np.int32), n)[keep.ravel()],
        "segment": np.tile(b.segment, r)[keep.ravel()],
        "exec_index": np.tile(b.exec_index, r)[keep.ravel()],
        "start": starts.ravel()[keep.ravel()],
        "end": ends.ravel()[keep.ravel()],
    }


def _truth_rows(spec: SynthSpec, b: _Block, level: np.ndarray) -> dict[str, np.ndarray]:
    """The block's truth rows (total channel, before channel scaling): cycle-mean power, energy, cycle."""
    lv = spec.levels_mw
    r, n = b.dur.shape
    cycle_mean = (level * b.dur + lv["gap"] * b.gap) / (b.dur + b.gap)
    relevant = np.isin(b.roles, ["sse", "first", "ssp"]) if spec.truth_rows == "relevant" else np.ones(n, bool)
    m = np.broadcast_to(relevant, (r, n)).ravel()
    return {
        "run": np.repeat(b.run_ids.astype(np.int32), n)[m],
        "segment": np.tile(b.segment, r)[m],
        "exec_index": np.tile(b.exec_index, r)[m],
        "power_mw": cycle_mean.ravel()[m],
        "energy_mj": (level * b.dur).ravel()[m] * 1e-9,
        "cycle_ns": np.broadcast_to(b.dur + b.gap, (r, n)).ravel()[m].astype(np.float64),
        "cycle_energy_mj": (cycle_mean * (b.dur + b.gap)).ravel()[m] * 1e-9,
    }


def _to_gpu(spec: SynthSpec, h: np.ndarray) -> np.ndarray:
    """Host ns -> GPU ns through the spec's clock (offset, reference, drift)."""
    h = np.asarray(h, dtype=np.int64)
    rel = (h - spec.offset_ns - spec.gpu_ref_ns).astype(np.float64) / (1.0 + spec.drift)
    return spec.gpu_ref_ns + np.rint(rel).astype(np.int64)


def _executions_frame(spec: SynthSpec, tl: _Timeline) -> pl.DataFrame:
    ex = {k: np.concatenate([p[k] for p in tl.ex_parts]) for k in tl.ex_parts[0]}
    return pl.DataFrame(
        {
            "run": ex["run"],
            "segment": ex["segment"].astype(str),
            "exec_index": ex["exec_index"],
            "gpu_start_ns": _to_gpu(spec, ex["start"]),
            "gpu_end_ns": _to_gpu(spec, ex["end"]),
        }
    )


def _runs_frame(spec: SynthSpec, tl: _Timeline) -> pl.DataFrame:
    rr = list(zip(*tl.run_rows, strict=True))
    return pl.DataFrame(
        {
            "run": np.asarray(rr[0], np.int32),
            "phase": list(rr[1]),
            "host_start_ns": np.asarray(rr[2], np.int64),
            "delay_ns": np.asarray(rr[3], np.int64),
            "idle_ns": np.asarray(rr[4], np.int64),
            "energy_start_mj": np.asarray(rr[5]) * spec.counter_scale if spec.energy_counter else [None] * len(rr[0]),
            "energy_end_mj": np.asarray(rr[6]) * spec.counter_scale if spec.energy_counter else [None] * len(rr[0]),
        },
        schema=RUNS_SCHEMA,
    )


def _samples_frame(spec: SynthSpec, tl: _Timeline, rng: np.random.Generator) -> pl.DataFrame:
    """Samples reported at t, showing the power at t - delay_ns (+ AR(1) noise), every channel scaled."""
    lv = spec.levels_mw
    t_true = np.arange(spec.host_t0_ns, tl.host_end, spec.sample_period_ns, dtype=np.int64)
    t_true = t_true + rng.integers(0, max(spec.sample_period_ns // 4, 1), size=t_true.size)
    k = np.searchsorted(tl.starts, t_true, side="right") - 1
    kc = np.clip(k, 0, None)
    inside = (k >= 0) & (t_true < tl.ends[kc])
    in_gap = (k >= 0) & ~inside & (t_true < tl.cycle_ends[kc])
    p_true = np.full(t_true.size, lv["idle"])
    p_true[inside] = tl.levels[k[inside]]
    p_true[in_gap] = lv["gap"]
    if spec.noise_mw > 0:
        z = rng.standard_normal(t_true.size) * spec.noise_mw * np.sqrt(1.0 - spec.noise_ar**2)
        noise = np.empty_like(z)
        acc = rng.standard_normal() * spec.noise_mw
        for j in range(z.size):  # AR(1); tests use it on small data only
            acc = spec.noise_ar * acc + z[j]
            noise[j] = acc
        p_reported = p_true + noise
    else:
        p_reported = p_true
    chans = list(spec.channel_scale)
    return pl.DataFrame(
        {
            "t_ns": np.tile(t_true + spec.delay_ns, len(chans)),
            "channel": np.repeat(chans, t_true.size),
            "power_mw": np.concatenate([p_reported * spec.channel_scale[c] for c in chans]),
        }
    ).sort("t_ns", maintain_order=True)


def _truth_frame(spec: SynthSpec, tl: _Timeline) -> pl.DataFrame:
    chans = list(spec.channel_scale)
    tr = {key: np.concatenate([p[key] for p in tl.truth_parts]) for key in tl.truth_parts[0]}
    n_tr = tr["run"].size
    return pl.DataFrame(
        {
            "run": np.tile(tr["run"], len(chans)),
            "segment": np.tile(tr["segment"].astype(str), len(chans)),
            "exec_index": np.tile(tr["exec_index"], len(chans)),
            "channel": np.repeat(chans, n_tr),
            "power_mw": np.concatenate([tr["power_mw"] * spec.channel_scale[c] for c in chans]),
            "energy_mj": np.concatenate([tr["energy_mj"] * spec.channel_scale[c] for c in chans]),
            "cycle_ns": np.tile(tr["cycle_ns"], len(chans)),
            "cycle_energy_mj": np.concatenate([tr["cycle_energy_mj"] * spec.channel_scale[c] for c in chans]),
        }
    )


def _clock_frame(spec: SynthSpec, host_end: int) -> pl.DataFrame:
    """50 clock reads over the whole timeline, each bracketed by +-5 us of host time."""
    g = _to_gpu(spec, np.linspace(spec.host_t0_ns, host_end, 50).astype(np.int64))
    h = spec.offset_ns + g + np.rint(spec.drift * (g - spec.gpu_ref_ns)).astype(np.int64)
    return pl.DataFrame(
        {
            "host_before_ns": h - 5_000,
            "gpu_ns": g,
            "host_after_ns": h + 5_000,
            "source": ["burst"] * g.size,
            "run": np.full(g.size, -1, np.int32),
        }
    )


def _plan(spec: SynthSpec) -> Plan:
    """The plan the synthetic collection followed."""
    n_main = spec.ssp_index + spec.tail + spec.trailing
    return Plan(
        exec_time_ns=int(spec.exec_time_ns),
        cycle_ns=spec.exec_time_ns + spec.launch_gap_ns,
        warmups=spec.warmups,
        sse_index=spec.warmups,
        ssp_index=spec.ssp_index,
        executions_per_run=n_main,
        tail=spec.tail,
        trailing=spec.trailing,
        runs=spec.runs,
        sse_runs=spec.sse_runs,
        sse_executions_per_run=spec.warmups + 1,
        reference_executions=spec.reference_executions,
        reference_ms=spec.reference_executions * (spec.exec_time_ns + spec.launch_gap_ns) / 1e6,
        predecessor_count=spec.predecessor_count,
        idle_ns=spec.idle_ns,
        delay_max_ns=spec.max_delay_ns,
        sensor=PlanSensor(
            period_ns=spec.sample_period_ns, delay_ns=spec.delay_ns, window_ns=1_000, lag_ns=0, settle_ns=0
        ),
        probe=Probe(
            busy_ns=0,
            executions=0,
            idle_level_mw=0.0,
            level_mw=0.0,
            peak_mw=0.0,
            tol_mw=0.0,
            t_stable_ns=spec.reference_transient_ns,
            t_recover_ns=0,
            settled=True,
            samples=0,
        ),
        lois_wanted=30,
        provenance={
            "scenario": {"name": "synthetic", "kernel": {"kind": "gemm", "m": 2048, "n": 2048, "k": 2048}},
            "device": {"backend": "synthetic"},
        },
    )


def generate(spec: SynthSpec) -> dict[str, Any]:
    """Frames (executions, runs, samples, clock, truth), plan, clock fit dict and sensor dict.

    Every execution's true power is levels_mw[role] x channel scale ("trail" at the "ssp" level),
    levels_mw["gap"] in launch gaps, levels_mw["idle"] elsewhere; reference-run executions that end
    within reference_transient_ns of its start are at levels_mw["transient"]. Truth power is the cycle
    mean (start to the next start; start to end for a run's last execution), truth energy start to end;
    with truth_rows="relevant" only the SSE, first and SSP-tail executions of measure runs have rows.
    Energy counter (runs.parquet): the true energy since host_t0_ns x counter_scale, read at the run's
    host_start_ns (= its first execution's start) and at its last execution's end."""
    if spec.truth_rows not in ("relevant", "all"):
        raise ValueError(f"truth_rows must be 'relevant' or 'all', got {spec.truth_rows!r}")
    rng = np.random.default_rng(spec.seed)
    blocks = [_block(spec, "ssp", np.arange(spec.runs), spec.outlier_runs, rng)]
    if spec.sse_runs:
        blocks.append(_block(spec, "sse", spec.runs + np.arange(spec.sse_runs), spec.sse_outlier_runs, rng))
    if spec.reference_executions:
        blocks.append(_reference_block(spec, spec.runs + spec.sse_runs))
    tl = _lay_out(spec, blocks)
    executions = _executions_frame(spec, tl)
    runs = _runs_frame(spec, tl)
    samples = _samples_frame(spec, tl, rng)
    truth = _truth_frame(spec, tl)
    clock = _clock_frame(spec, tl.host_end)
    plan = _plan(spec)
    logger.debug(
        "synthetic: %d runs, %d executions stored, %d samples, %d truth rows",
        runs.height,
        executions.height,
        samples.height,
        truth.height,
    )
    return {
        "executions": executions,
        "runs": runs,
        "samples": samples,
        "clock": clock,
        "truth": truth,
        "plan": plan,
        "margin": spec.margin,
        "clock_fit": ClockMap(
            offset_ns=spec.offset_ns, gpu_ref_ns=spec.gpu_ref_ns, drift=spec.drift, residual_ns=100.0
        ),
        "sensor": {
            TOTAL: SensorModel(
                period_ns=spec.sample_period_ns, delay_ns=spec.delay_ns, window_ns=1_000, lag_ns=0, settle_ns=0
            )
        },
    }


def analyze(
    data: dict[str, Any], analysis: AnalysisConfig | dict[str, Any], truth: bool = False, **kw: Any
) -> dict[str, Any]:
    """Bin + differentiate generated `data` (from `generate`) and return the summary dict; `kw` goes to
    `fingrav.analysis.differentiate.differentiate` (e.g. gaps=...). `truth` passes the generated truth frame
    to validation."""
    from fingrav.analysis.binning import bin_runs
    from fingrav.analysis.differentiate import differentiate

    analysis = AnalysisConfig.model_validate(analysis) if isinstance(analysis, dict) else analysis
    plan: Plan = data["plan"]
    margin = analysis.margin if analysis.margin is not None else data["margin"]
    binned, _ = bin_runs(data["executions"], data["runs"], plan, margin)
    kw.setdefault("max_clock_residual_us", 20.0)
    _, summary = differentiate(
        data["executions"],
        data["runs"],
        data["samples"],
        data["plan"],
        binned,
        data["clock_fit"],
        data["sensor"],
        analysis,
        data["truth"] if truth else None,
        **kw,
    )
    # the dump, with the result's flat columns as "row" and every flag as "flags" (what tests read by name)
    return {**summary.model_dump(), "row": summary.result.flat(), "flags": summary.flags, "valid": summary.valid}


def write_analyzed(layout: Any, name: str, analysis: AnalysisConfig, predecessor_count: int = 0, seed: int = 4) -> None:
    """One generated scenario (30 SSP and 20 SSE runs), binned and differentiated, written where the report reads
    it in `layout` (a `fingrav.layout.SweepLayout`): summary.json, lois.parquet and the binned runs."""
    from fingrav import rawio
    from fingrav.analysis.binning import bin_runs
    from fingrav.analysis.differentiate import differentiate

    d = generate(SynthSpec(runs=30, sse_runs=20, predecessor_count=predecessor_count, seed=seed))
    binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    lois, summary = differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], binned, d["clock_fit"], d["sensor"], analysis,
        d["truth"], max_clock_residual_us=20.0, scenario=name,
    )  # fmt: skip
    rawio.write_json(layout.summary_json(name), summary)
    lois.write_parquet(layout.lois(name))
    layout.binned(name).parent.mkdir(parents=True, exist_ok=True)
    binned.write_parquet(layout.binned(name))
