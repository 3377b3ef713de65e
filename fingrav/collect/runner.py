"""Collect one scenario on any GPUDevice: time the kernel, probe stability, plan, run, write raw data.

GPU-side module (numpy + pyarrow + stdlib). Host-side bookkeeping happens only between runs, never
between the executions of a run.

Several GPUs (device.world_size > 1, `fingrav.collect.distributed`): every rank calls `collect_scenario`
on its own device with the same scenario, policy and seed and a `Lockstep` that keeps the ranks in step:
a barrier before every run (before every batch of runs on a device that generates a batch at once, the simulator:
its ranks' clocks are virtual, `GPUDevice.batch_runs`); rank 0's timing decides the probe length and rank 0 makes
the plan (from its timing and the most conservative probe of all ranks) and broadcasts it, so every rank issues
exactly the same executions (unequal counts would hang NCCL); delays and run kinds come from the shared seed.
With the default `Solo` (one GPU) all of this is a no-op and the collection is what it always was.
"""

from __future__ import annotations

import json
import logging
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from fingrav import rawio
from fingrav.analysis.ssp_stop import MIN_RUNS, SSP_STOP_REASONS, SSPStopDecision, ssp_stop_decision
from fingrav.analysis.sustained import REFERENCE_REASONS, ReferenceDecision, reference_decision
from fingrav.collect.estimate import (
    PROBE_MIN_PERIODS,
    REFERENCE_PART_NS,
    probe_in_reference,
    probe_load_ns,
    probe_watch_ns,
)
from fingrav.collect.plan import analyze_probe, make_plan, reference_fields
from fingrav.collect.sweep_estimate import predecessor_cycle_ns, timing_of_device
from fingrav.collect.targeting import SseAim
from fingrav.config import RunPolicy, Scenario, collection_hash
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.plan import Plan, Probe, RankLocal, SSPStop
from fingrav.contracts.provenance import DistributedInfo
from fingrav.contracts.roles import BASE, SSE, SSP
from fingrav.contracts.sensor import PlanSensor
from fingrav.contracts.tables import READ_GUARD_NS
from fingrav.contracts.units import MJ_PER_MW_NS, NS_PER_MS
from fingrav.device.base import (
    ClockReads,
    ClockTelemetry,
    ExecRecords,
    GPUDevice,
    KernelHandle,
    MeasureRuns,
    PowerSamples,
)
from fingrav.errors import ConfigError, DeviceError
from fingrav.layout import SCENARIO_CALIBRATION, SCENARIO_RAW_FILES, TELEMETRY_FILE
from fingrav.provenance import provenance

logger = logging.getLogger(__name__)

CLOCK_BURST = 50
PROGRESS_EVERY_S = 10.0
DRAIN_EVERY = 256  # measure runs between two drains of the samples (one batch of `GPUDevice.measure_runs`)
SSP_CHECK_EVERY = 2  # the adaptive SSP stop is asked again after every this many SSP runs (after MIN_RUNS)


class Lockstep(Protocol):
    """How the ranks of a multi-GPU collection stay in step (implemented over torch.distributed by
    `fingrav.collect.distributed`). Every method is collective: all ranks call it, in the same order."""

    rank: int
    world_size: int

    def barrier(self) -> None:
        """Wait until every rank gets here."""

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's `obj` (picklable), on every rank."""

    def all_gather(self, obj: Any) -> list[Any]:
        """Every rank's `obj`, in rank order, on every rank."""

    def describe(self) -> dict[str, Any]:
        """JSON-able identity (rank, world size, backend) for provenance."""


class Solo:
    """The one-GPU `Lockstep`: nothing to wait for, nothing to exchange."""

    rank = 0
    world_size = 1

    def barrier(self) -> None:
        """Nothing to wait for."""

    def broadcast(self, obj: Any) -> Any:
        """`obj` itself."""
        return obj

    def all_gather(self, obj: Any) -> list[Any]:
        """[`obj`]."""
        return [obj]

    def describe(self) -> dict[str, Any]:
        """{"rank": 0, "world_size": 1}."""
        return {"rank": 0, "world_size": 1}


def merge_probes(probes: list[Probe]) -> Probe:
    """The most conservative stability probe of several ranks, for a plan every rank follows: the latest
    t_stable and t_recover, settled only when every rank settled; levels are rank 0's. One probe: itself."""
    if len(probes) == 1:
        return probes[0]
    first = probes[0]
    return first.model_copy(
        update={
            "t_stable_ns": max(p.t_stable_ns for p in probes),
            "t_recover_ns": max(p.t_recover_ns for p in probes),
            "settled": all(p.settled for p in probes),
        }
    )


def _subset(rec: ExecRecords, mask: np.ndarray) -> ExecRecords:
    return ExecRecords(rec.segment[mask], rec.exec_index[mask], rec.gpu_start_ns[mask], rec.gpu_end_ns[mask])


class _Recorder:
    """Accumulates the raw tables of one scenario in memory (numpy parts, concatenated at the end)."""

    def __init__(self, device: GPUDevice, sync: Lockstep | None = None) -> None:
        self.device = device
        self.sync: Lockstep = sync if sync is not None else Solo()
        self.runs: list[tuple[int, str, int, int, int, float | None, float | None]] = []
        # run ids (an array: one per record, per clock read, per truth row), records, segment names
        self.execs: list[tuple[np.ndarray, ExecRecords, np.ndarray]] = []
        self.clock: list[tuple[ClockReads, str, np.ndarray]] = []
        self.truth: list[tuple[np.ndarray, ExecRecords, np.ndarray, dict[str, dict[str, np.ndarray]]]] = []
        self.telemetry: list[tuple[int, str, str, ClockTelemetry]] = []
        self.samples: list[PowerSamples] = []
        self.issued = 0  # executions launched (stored or not)
        self.host_start = 0  # host clock at the start of the current run (ns)

    def run(
        self,
        run_id: int,
        phase: str,
        segments: list,
        names: list[str],
        idle_ns: int,
        delay_ns: int,
        truth_rows: Callable[[ExecRecords, np.ndarray], np.ndarray] | None = None,
        unstamped: bool = False,
        more: Callable[[int], int] | None = None,
        part: int | None = None,
    ) -> ExecRecords:
        """One run: sleep, a GPU-clock read, the segments back to back. `names` names each segment
        ("pred" | "main"). `truth_rows` selects (boolean mask over the records, given the records and their
        segment names) the executions whose ground truth is kept (default: all).
        Every rank waits for the others first (a no-op on one GPU). unstamped: one segment run as a user runs it
        (`GPUDevice.run_unstamped`): one record, stored with exec_index = count - 1 and the first execution's start
        (`fingrav.contracts.tables`), and on the simulator a truth row with the sustained truth; more / part: an
        adaptive unstamped run (`GPUDevice.run_unstamped`; `self.host_start` is the run's start for `more`).
        A stamped run is a batch of one (`measure`)."""
        if not unstamped:
            batch = MeasureRuns([segments], np.zeros(1, np.int64), int(idle_ns), np.array([delay_ns]), READ_GUARD_NS)
            return self.measure(np.array([run_id]), np.array([phase]), batch, names, truth_rows)
        dev = self.device
        self.sync.barrier()
        if idle_ns > 0:
            dev.sleep_ns(idle_ns)
        tel0 = dev.read_telemetry()  # clocks, clock-event reasons, limiter counters: outside the timed region
        e0 = dev.energy_mj()
        reads = dev.read_gpu_clock(1)  # METHOD.md step 2: a GPU timestamp just before the executions
        # The random delay comes after the reads: on the H200 the first power sample after such reads was
        # seen to avoid the next ~2 ms (results/h200/REPRODUCE.md), so reads right before the executions
        # would lock the sampling phase to the run start; a guard + random delay decorrelates them.
        dev.sleep_ns(READ_GUARD_NS + delay_ns)
        host_start = int(dev.host_time_ns())
        self.host_start = host_start
        ((handle, count),) = segments
        rec = dev.run_unstamped(handle, int(count), more=more, part=part)
        # the next run's idle counts from here (`GPUDevice.idle_left_ns`), not from the last stamped run's end
        dev.mark_busy_end()
        self.issued += int(rec.exec_index[-1]) + 1
        e1 = dev.energy_mj()
        tel1 = dev.read_telemetry()
        self.runs.append((run_id, phase, host_start, int(delay_ns), int(idle_ns), e0, e1))
        for when, tel in (("before", tel0), ("after", tel1)):
            if tel is not None:
                self.telemetry.append((run_id, phase, when, tel))
        seg_names = np.asarray(names, dtype=str)[rec.segment]
        self.execs.append((np.full(len(rec), run_id, np.int32), rec, seg_names))
        self.clock.append((reads, "run", np.array([run_id], np.int32)))
        self._keep_sustained_truth(run_id, rec, seg_names)
        return rec

    def _keep_sustained_truth(self, run_id: int, rec: ExecRecords, seg_names: np.ndarray) -> None:
        """The simulator's ground truth of the unstamped run just made: its sustained truth (none on a real GPU)."""
        sustained = getattr(self.device, "sustained_truth_of_last_run", None)
        if sustained is not None and (st := sustained()) is not None:
            truth = {
                ch: {
                    "power_mw": np.array([d["power_mw"]]),
                    "cycle_ns": np.array([d["cycle_ns"]]),
                    "energy_mj": np.array([d["power_mw"] * d["cycle_ns"] * MJ_PER_MW_NS]),
                    "cycle_energy_mj": np.array([d["power_mw"] * d["cycle_ns"] * MJ_PER_MW_NS]),
                }
                for ch, d in st.items()
            }
            self.truth.append((np.full(len(rec), run_id, np.int32), rec, seg_names, truth))

    def measure(
        self,
        run_ids: np.ndarray,
        phases: np.ndarray,
        batch: MeasureRuns,
        names: list[str],
        truth_rows: Callable[[ExecRecords, np.ndarray], np.ndarray] | None = None,
        idle_ns: int | None = None,
    ) -> ExecRecords:
        """Stamped runs `run_ids` (phases: each one's phase), one batch of the device (`GPUDevice.measure_runs`:
        idle, a GPU-clock read, the guard and the delay, the segments back to back). Every rank waits for the
        others first (a no-op on one GPU). `truth_rows` selects (boolean mask over the records, given the records
        and their segment names) the executions whose ground truth is kept; `idle_ns`: the idle recorded when the
        caller idled before the batch itself (phase targeting), else the batch's. Returns every run's records."""
        self.sync.barrier()
        res = self.device.measure_runs(batch)
        rec = res.records
        self.issued += len(rec)
        self.host_start = int(res.host_start_ns[-1])
        idle = int(batch.idle_ns if idle_ns is None else idle_ns)
        for i, run_id in enumerate(run_ids.tolist()):
            e0, e1 = float(res.energy_start_mj[i]), float(res.energy_end_mj[i])
            self.runs.append(
                (
                    int(run_id),
                    str(phases[i]),
                    int(res.host_start_ns[i]),
                    int(batch.delay_ns[i]),
                    idle,
                    None if np.isnan(e0) else e0,
                    None if np.isnan(e1) else e1,
                )
            )
            for when, tel in zip(("before", "after"), res.telemetry[i] if res.telemetry else (), strict=False):
                if tel is not None:
                    self.telemetry.append((int(run_id), str(phases[i]), when, tel))
        run_col = np.asarray(run_ids, np.int32)[res.run]
        seg_names = np.asarray(names, dtype=str)[rec.segment]
        self.execs.append((run_col, rec, seg_names))
        self.clock.append((res.reads, "run", np.asarray(run_ids, np.int32)))
        if res.truth is not None and truth_rows is not None:
            m = truth_rows(rec, seg_names)
            truth = {ch: {k: np.asarray(v)[m] for k, v in d.items()} for ch, d in res.truth.items()}
            self.truth.append((run_col[m], _subset(rec, m), seg_names[m], truth))
        return rec

    def burst(self, n: int = CLOCK_BURST) -> None:
        reads = self.device.read_gpu_clock(n)
        self.clock.append((reads, "burst", np.full(len(reads), -1, np.int32)))

    def write(
        self, raw_dir: Path, meta: dict[str, Any], truth_path: Path | None, reading_truth_path: Path | None = None
    ) -> None:
        """Every raw table of the scenario (`fingrav.contracts.tables`), each with the provenance `meta`."""
        raw_dir.mkdir(parents=True, exist_ok=True)
        self._write_runs(raw_dir / "runs.parquet", meta)
        self._write_executions(raw_dir / "executions.parquet", meta)
        self._write_clock(raw_dir / "clock.parquet", meta)
        self._write_samples(raw_dir / "samples.parquet", meta)
        if truth_path is not None and self.truth:
            self._write_truth(truth_path, meta)
        if self.telemetry:
            self._write_telemetry(raw_dir / TELEMETRY_FILE, meta)
        drain_truth = getattr(self.device, "drain_reading_truth", None)  # simulator only
        if reading_truth_path is not None and drain_truth is not None:
            rt = drain_truth()
            codes, names = rt.channel_codes()  # codes in name order: sorted by time, then channel name
            order = _time_channel_order(rt.t_ns, codes, len(names))
            chan = pa.DictionaryArray.from_arrays(codes[order], pa.array(list(names), pa.string()))
            cols = {"t_ns": rt.t_ns[order], "channel": chan, "power_mw": rt.power_mw[order]}
            rawio.write_table(reading_truth_path, "reading_truth", cols, meta)

    def _write_runs(self, path: Path, meta: dict[str, Any]) -> None:
        runs = np.array(self.runs, dtype=object)
        rawio.write_table(
            path,
            "runs",
            {
                "run": runs[:, 0].astype(np.int32),
                "phase": runs[:, 1].astype(str),
                "host_start_ns": runs[:, 2].astype(np.int64),
                "delay_ns": runs[:, 3].astype(np.int64),
                "idle_ns": runs[:, 4].astype(np.int64),
                "energy_start_mj": np.array([np.nan if v is None else v for v in runs[:, 5]], dtype=np.float64),
                "energy_end_mj": np.array([np.nan if v is None else v for v in runs[:, 6]], dtype=np.float64),
            },
            meta,
        )

    def _write_executions(self, path: Path, meta: dict[str, Any]) -> None:
        run_col = np.concatenate([i for i, _, _ in self.execs]).astype(np.int32)
        rawio.write_table(
            path,
            "executions",
            {
                "run": run_col,
                "segment": np.concatenate([n for _, _, n in self.execs]),
                "exec_index": np.concatenate([r.exec_index for _, r, _ in self.execs]).astype(np.int32),
                "gpu_start_ns": np.concatenate([r.gpu_start_ns for _, r, _ in self.execs]).astype(np.int64),
                "gpu_end_ns": np.concatenate([r.gpu_end_ns for _, r, _ in self.execs]).astype(np.int64),
            },
            meta,
        )

    def _write_clock(self, path: Path, meta: dict[str, Any]) -> None:
        clk = ClockReads.concat([c for c, _, _ in self.clock])
        rawio.write_table(
            path,
            "clock",
            {
                "host_before_ns": clk.host_before_ns,
                "gpu_ns": clk.gpu_ns,
                "host_after_ns": clk.host_after_ns,
                "source": np.concatenate([np.full(len(c), s) for c, s, _ in self.clock]),
                "run": np.concatenate([r for _, _, r in self.clock]).astype(np.int32),
            },
            meta,
        )

    def _write_samples(self, path: Path, meta: dict[str, Any]) -> None:
        smp = PowerSamples.concat(self.samples)
        # sorted by time, then channel name: sort integer channel codes (in name order), not the strings
        present_codes, present = smp.channel_codes()
        names = sorted({str(c) for c in self.device.describe().get("channels") or ()} | set(present))
        remap = np.array([names.index(n) for n in present], np.int32)
        codes = remap[present_codes] if len(present) else present_codes
        order = _time_channel_order(smp.t_ns, codes, len(names))
        rawio.write_table(
            path,
            "samples",
            {
                "t_ns": smp.t_ns[order],
                "channel": pa.DictionaryArray.from_arrays(codes[order], pa.array(names, pa.string())),
                "power_mw": smp.power_mw[order],
            },
            {**meta, "gaps": [list(map(int, g)) for g in smp.gaps]},
        )

    def _write_truth(self, path: Path, meta: dict[str, Any]) -> None:
        cols: dict[str, list[np.ndarray]] = {k: [] for k in rawio.SCHEMAS["truth"].names}
        for run_ids, rec, seg_names, truth in self.truth:
            for ch, d in truth.items():
                n = len(rec)
                cols["run"].append(run_ids)
                cols["segment"].append(seg_names)
                cols["exec_index"].append(rec.exec_index.astype(np.int32))
                cols["channel"].append(np.full(n, str(ch)))
                for key in ("power_mw", "energy_mj", "cycle_ns", "cycle_energy_mj"):
                    cols[key].append(np.asarray(d[key], np.float64))
        rawio.write_table(path, "truth", {k: np.concatenate(v) for k, v in cols.items()}, meta)

    def _write_telemetry(self, path: Path, meta: dict[str, Any]) -> None:
        t = self.telemetry
        rawio.write_table(
            path,
            "telemetry",
            {
                "run": np.array([r for r, *_ in t], np.int32),
                "phase": np.array([p for _, p, _, _ in t], dtype=object).astype(str),
                "when": np.array([w for _, _, w, _ in t], dtype=object).astype(str),
                "host_ns": np.array([x.host_ns for *_, x in t], np.int64),
                "read_ns": np.array([x.read_ns for *_, x in t], np.int64),
                "sm_mhz": np.array([np.nan if x.sm_mhz is None else x.sm_mhz for *_, x in t], np.float64),
                "mem_mhz": np.array([np.nan if x.mem_mhz is None else x.mem_mhz for *_, x in t], np.float64),
                "reasons": pa.array([x.reasons for *_, x in t], pa.int64()),
                "reason_names": np.array([";".join(x.reason_names) for *_, x in t], dtype=object).astype(str),
                "violation_json": np.array([json.dumps(x.violation) for *_, x in t], dtype=object).astype(str),
                "violation_unit": np.array([x.violation_unit for *_, x in t], dtype=object).astype(str),
                "fields_json": np.array([json.dumps(x.fields) for *_, x in t], dtype=object).astype(str),
            },
            meta,
        )


def _time_channel_order(t_ns: np.ndarray, codes: np.ndarray, n_names: int) -> np.ndarray:
    """The order that sorts rows by time, then channel code (= np.lexsort((codes, t_ns))): one stable sort of an
    int64 key, fast on the nearly sorted drains (lexsort where the key would overflow)."""
    t_rel = t_ns - (t_ns.min() if len(t_ns) else 0)
    if len(t_rel) and int(t_rel.max()) < (1 << 62) // max(n_names, 1):
        return np.argsort(t_rel * n_names + codes, kind="stable")
    return np.lexsort((codes, t_ns))


@dataclass(frozen=True)
class Kernels:
    """The scenario's prepared kernels: `main`, the optional predecessor `pred` run `pred_count` times before it."""

    main: KernelHandle
    pred: KernelHandle | None
    pred_count: int

    @classmethod
    def prepare(cls, device: GPUDevice, scenario: Scenario) -> Kernels:
        main = device.prepare(scenario.kernel)
        pred = device.prepare(scenario.predecessor.kernel) if scenario.predecessor else None
        return cls(main, pred, scenario.predecessor.count if scenario.predecessor else 0)

    @property
    def names(self) -> list[str]:
        """The segment names of a measure run ("pred", "main")."""
        return ["pred", "main"] if self.pred is not None else ["main"]

    def segments(self, n_main: int) -> list:
        """A measure run's segments: [predecessor x count,] main x `n_main`."""
        segs = [(self.main, n_main)]
        if self.pred is not None:
            segs.insert(0, (self.pred, self.pred_count))
        return segs

    def describe(self) -> dict[str, Any]:
        """The kernels' provenance ({"main", "predecessor"})."""
        return {
            "main": self.main.describe(),
            **({"predecessor": self.pred.describe()} if self.pred is not None else {}),
        }


@dataclass(frozen=True)
class Timing:
    """Step 1: the kernel's median execution time and launch-to-launch cycle (ns) after idle."""

    exec_time_ns: int
    cycle_ns: int

    def as_dict(self) -> dict[str, int]:
        return {"exec_time_ns": self.exec_time_ns, "cycle_ns": self.cycle_ns}


@dataclass(frozen=True)
class ReferenceSpec:
    """What the reference run needs (`_reference_run`): executions at least, the launch-to-launch cycle (ns), its
    shortest and longest length (ms) and CI target (%; the adaptive stop), the idle before it (ns). From the plan
    (`of_plan`), or, where it carries the stability probe, before the plan from the policy (`before_plan`)."""

    executions: int
    cycle_ns: int
    min_ms: float
    max_ms: float
    ci_pct: float | None
    idle_ns: int

    @classmethod
    def of_plan(cls, plan: Plan) -> ReferenceSpec:
        return cls(plan.reference_executions, plan.cycle_ns, plan.reference_ms, plan.reference_max_ms,
                   plan.reference_ci_pct, plan.idle_ns)  # fmt: skip

    @classmethod
    def before_plan(cls, policy: RunPolicy, cycle_ns: int, idle_ns: int, probe_ns: int = 0) -> ReferenceSpec:
        """The policy's reference run, at least `probe_ns` long (it carries a stability probe that long)."""
        f = reference_fields(policy, cycle_ns)
        executions = max(int(f["reference_executions"]), -(-int(probe_ns) // max(cycle_ns, 1)))
        min_ms = max(float(f["reference_ms"]), probe_ns / NS_PER_MS)
        return cls(executions, cycle_ns, min_ms, max(float(f["reference_max_ms"]), min_ms), f["reference_ci_pct"],
                   idle_ns)  # fmt: skip


@dataclass(frozen=True)
class ReferenceRun:
    """Step 4: the unstamped reference run: executions it ran and the adaptive run's decisions (the last one: why
    it stopped)."""

    executed: int
    decisions: list[ReferenceDecision] = field(default_factory=list)
    busy_ns: int = 0  # first start to last end on the GPU clock

    def plan_fields(self, unstamped: bool) -> dict[str, Any]:
        """plan.json's reference_unstamped / reference_executed / reference_stop."""
        return {
            "reference_unstamped": unstamped,
            "reference_executed": self.executed,
            "reference_stop": self.decisions[-1].to_summary() if self.decisions else None,
        }


def _time_kernel(rec: _Recorder, k: Kernels, policy: RunPolicy, settle_ns: int, name: str) -> Timing:
    """Step 1: the kernel alone after `settle_ns` of idle: warm-ups + timing_reps executions (this rank's)."""
    r = rec.run(0, "timing", [(k.main, policy.warmups + policy.timing_reps)], ["main"], settle_ns, 0)
    dur = r.duration_ns[policy.warmups :]
    exec_time = int(np.median(dur))
    starts = r.gpu_start_ns[policy.warmups :]
    cycle = int(np.median(np.diff(starts))) if len(starts) > 1 else exec_time
    logger.info("%s: %s takes %.1f us (cycle %.1f us)", name, k.main.label, exec_time / 1e3, cycle / 1e3)
    return Timing(exec_time, cycle)


def _stability_probe(
    rec: _Recorder, k: Kernels, policy: RunPolicy, noise_mw: float, settle_ns: int, cycle_ns: int, load_ns: int
) -> Probe:
    """Step 2: back to back for `load_ns` (run_policy.probe_ms or longer: `probe_load_ns`; METHOD.md step 4), then
    idle while its return to idle is watched (`probe_watch_ns`), between two drains of the samples; this rank's."""
    device = rec.device
    n_probe = max(policy.warmups + 2, -(-int(load_ns) // max(cycle_ns, 1)))
    device.sleep_ns(settle_ns)
    rec.samples.append(device.drain_samples())
    probe_rec = rec.run(1, "probe", [(k.main, n_probe)], ["main"], 0, 0)
    device.sleep_ns(probe_watch_ns(policy, settle_ns))
    rec.samples.append(device.drain_samples())
    return _probe(rec, probe_rec, n_probe, policy, noise_mw, settle_ns, cycle_ns)


class _ProbeInReference:
    """The stability probe read from the reference run (run_policy.probe_source): its first n_probe x cycle ns
    (the executions a probe run of `load_ns` would have: `probe_load_ns`) after the settle wait before it are the
    probe's load;
    after the run, idle is watched for `probe_watch_ns` as after a probe run (the first measure run's idle counts
    that time, `GPUDevice.idle_left_ns`), and the return to idle is timed from the run's end
    (`fingrav.collect.plan.analyze_probe`, load_end_ns). `settle_ns` gives the adaptive run its settling time
    once the window has been read (the first decision comes after reference_ms >= probe_ms); this rank's."""

    def __init__(
        self, rec: _Recorder, policy: RunPolicy, noise_mw: float, settle_ns: int, cycle_ns: int, load_ns: int
    ) -> None:
        self.rec, self.policy, self.noise_mw = rec, policy, noise_mw
        self.settle_ns_before, self.cycle_ns = settle_ns, cycle_ns
        self.n_probe = max(policy.warmups + 2, -(-int(load_ns) // max(cycle_ns, 1)))
        self._stable_ns: int | None = None

    def _analyze(self, load_end_ns: int | None, busy_ns: int) -> Probe:
        window = min(self.n_probe * max(self.cycle_ns, 1), busy_ns)
        probe = _probe_of_samples(self.rec, self.rec.host_start, window, self.n_probe, self.policy, self.noise_mw,
                                  self.settle_ns_before, self.cycle_ns, load_end_ns)  # fmt: skip
        return probe.model_copy(update={"source": "reference"})

    def settle_ns(self) -> int:
        """The probe window's t_stable_ns (ns after the run's start), read once from the samples drained so far."""
        if self._stable_ns is None:
            self.rec.samples.append(self.rec.device.drain_samples())
            self._stable_ns = self._analyze(None, self.n_probe * max(self.cycle_ns, 1)).t_stable_ns
        return self._stable_ns

    def finish(self, busy: int) -> Probe:
        """After the reference run (`busy` ns from its first start to its last end): watch its return to idle, then
        the probe (the load's end: the run's start + `busy`)."""
        device = self.rec.device
        device.sleep_ns(probe_watch_ns(self.policy, self.settle_ns_before))
        self.rec.samples.append(device.drain_samples())
        return self._analyze(self.rec.host_start + busy, busy)


def _probe_first(
    rec: _Recorder,
    k: Kernels,
    policy: RunPolicy,
    noise_mw: float,
    settle_ns: int,
    cycle_ns: int,
    name: str,
    load_ns: int,
) -> tuple[Probe, ReferenceRun | None]:
    """Step 2 before the plan: the stability probe run (`_stability_probe`; no reference run yet), or, where the
    reference run carries the probe (`probe_in_reference`), the reference run (step 4; run 1) and the probe read
    from its start (`_ProbeInReference`)."""
    if load_ns > policy.probe_ms * NS_PER_MS:
        msg = "%s: stability probe %.0f ms, not run_policy.probe_ms = %g: this sensor's settling and %d periods"
        logger.info(msg, name, load_ns / NS_PER_MS, policy.probe_ms, PROBE_MIN_PERIODS)
    if not probe_in_reference(policy):
        return _stability_probe(rec, k, policy, noise_mw, settle_ns, cycle_ns, load_ns), None
    pir = _ProbeInReference(rec, policy, noise_mw, settle_ns, cycle_ns, load_ns)
    spec = ReferenceSpec.before_plan(policy, cycle_ns, settle_ns, load_ns)
    reference = _reference_run(rec, spec, k, rec.sync, 1, name, pir.settle_ns)
    return pir.finish(reference.busy_ns), reference


def _log_plan(name: str, plan: Plan, k: Kernels) -> None:
    logger.info(
        "%s: plan %d SSE runs%s + %s SSP runs x (%s%d executions; SSE #%d, SSP #%d.. tail %d), idle %.1f ms%s",
        name,
        plan.sse_runs,
        f" + {plan.base_runs} base runs" if plan.base_runs else "",
        f"{plan.runs}" if plan.ssp_ci_pct is None else f"<= {plan.runs} (adaptive, ~{plan.ssp_runs_expected} expected)",
        f"{plan.predecessor_count} pred + " if k.pred is not None else "",
        plan.executions_per_run,
        plan.sse_index + 1,
        plan.ssp_index + 1,
        plan.tail,
        plan.idle_ns / 1e6,
        "; " + "; ".join(plan.notes) if plan.notes else "",
    )
    if (c := plan.cost) is not None:
        logger.info(
            "%s: expected GPU time %.1f s (probe %.1f, reference %.1f%s, SSE %.1f, SSP %.1f, other %.1f)%s",
            name,
            c.total_s,
            c.probe_s,
            c.reference_s,
            f"-{c.reference_max_s:.1f} adaptive" if c.reference_max_s > c.reference_s else "",
            c.sse_s,
            c.ssp_s,
            c.other_s,
            "; predecessor executions not counted" if k.pred is not None else "",
        )


def _reference_run(
    rec: _Recorder,
    spec: ReferenceSpec,
    k: Kernels,
    sync: Lockstep,
    run_id: int,
    name: str,
    settle_of: Callable[[], int],
) -> ReferenceRun:
    """Step 4: back to back for reference_ms and, adaptively, up to reference_max_ms (`_reference_more`; its
    statistics start `settle_of()` ns after the run's start), as a user runs it: no stamp between executions (the
    kernel, not the probe), where the device can."""
    decisions: list[ReferenceDecision] = []
    part = max(1, math.ceil(REFERENCE_PART_NS / max(spec.cycle_ns, 1)))
    adaptive = spec.max_ms > spec.min_ms
    more = _reference_more(rec, spec, sync, decisions, part, settle_of) if adaptive else None
    one = rec.run(
        run_id, "reference", [(k.main, spec.executions)], ["main"], spec.idle_ns, 0,
        unstamped=True, more=more, part=part,
    )  # fmt: skip
    executed = int(one.exec_index[-1]) + 1
    rec.samples.append(rec.device.drain_samples())
    last = decisions[-1] if decisions else None
    logger.info(
        "%s: reference run of %d executions (%.0f ms; shortest %.0f ms%s)",
        name,
        executed,
        (one.gpu_end_ns[-1] - one.gpu_start_ns[0]) / 1e6,
        spec.min_ms,
        f", stopped: {REFERENCE_REASONS[last.reason]}" if last is not None else "",
    )
    return ReferenceRun(executed, decisions, int(one.gpu_end_ns[-1] - one.gpu_start_ns[0]))


def _measure_runs(
    rec: _Recorder,
    plan: Plan,
    k: Kernels,
    rng: np.random.Generator,
    first_run_id: int,
    name: str,
    wall0: float,
    stops: list[SSPStopDecision] | None = None,
) -> int:
    """Step 5: SSE runs (warm-ups + 1 executions), their base runs (the warm-ups alone, `Plan.base_runs`) and SSP runs
    (to the SSP tail), in a random order, each after
    idle + a random delay in [0, sensor period); returns how many ran. With an adaptive SSP stop (plan.ssp_ci_pct)
    the SSP runs go in small batches, and after each `fingrav.analysis.ssp_stop.ssp_stop_decision` on the SSP LOIs
    so far (`_SSPLois`) says whether to go on; once it says stop, the SSP runs left are dropped (the SSE runs left
    still run). Every decision is appended to `stops`."""
    device = rec.device
    kinds = np.array([SSE] * plan.sse_runs + [SSP] * plan.runs + [BASE] * plan.base_runs)
    kinds = kinds[rng.permutation(len(kinds))]
    first = 0 if k.pred is not None else plan.sse_index  # with a predecessor, exec 0 is the interleaved one
    tail_end = plan.ssp_index + plan.tail

    def truth_rows(r: ExecRecords, seg: np.ndarray) -> np.ndarray:
        i = r.exec_index
        return (seg == "main") & ((i == plan.sse_index) | (i == first) | ((i >= plan.ssp_index) & (i < tail_end)))

    # in batches of DRAIN_EVERY runs (samples drained after each); several GPUs whose runs are not generated at once
    # (real GPUs) run one run per batch: a barrier before every run
    delays = rng.uniform(0, plan.delay_max_ns, len(kinds)).astype(np.int64)
    run_kinds = _run_kinds(k, plan)
    run_ids = np.arange(first_run_id, first_run_id + len(kinds))
    block = DRAIN_EVERY if (device.batch_runs or rec.sync.world_size == 1) else 1
    lois = _SSPLois(plan) if plan.ssp_ci_pct is not None and stops is not None else None
    aim = SseAim.of(plan, rng) if plan.sse_targeting and k.pred is None and rec.sync.world_size == 1 else None
    block = 1 if aim is not None else block  # each SSE run's delay is decided from the samples drained right before
    last_log = time.perf_counter()
    done = b0 = 0
    while b0 < len(kinds):
        b1 = min(b0 + block, len(kinds))
        if lois is not None:  # up to the next check: MIN_RUNS SSP runs first, then SSP_CHECK_EVERY more
            b1 = min(b1, _next_check(kinds, b0, MIN_RUNS if not stops else SSP_CHECK_EVERY))
        idle = plan.idle_ns
        if aim is not None and kinds[b0] == "sse":  # the aim idles itself, then drains and aims (targeting.SseAim)
            delays[b0], drained = aim.delay(device, int(delays[b0]))
            rec.samples.append(drained)
            idle = 0
        kind_index = np.array([RUN_KINDS.index(str(x)) for x in kinds[b0:b1]], dtype=np.int64)
        batch = MeasureRuns(run_kinds, kind_index, idle, delays[b0:b1], READ_GUARD_NS)
        rec.measure(run_ids[b0:b1], kinds[b0:b1], batch, k.names, truth_rows, plan.idle_ns)
        done += b1 - b0
        if lois is not None and stops is not None:
            keep = _ssp_check(rec, lois, stops, kinds, b1, name)
            if keep is not None:  # stopped: the SSP runs left are dropped, the SSE runs left still run
                kinds = np.concatenate([kinds[:b1], kinds[b1:][keep]])
                delays = np.concatenate([delays[:b1], delays[b1:][keep]])
                run_ids = np.arange(first_run_id, first_run_id + len(kinds))
        elif b1 % DRAIN_EVERY == 0:
            rec.samples.append(device.drain_samples())
        b0 = b1
        now = time.perf_counter()
        if now - last_log >= PROGRESS_EVERY_S or b1 == len(kinds):
            el = now - wall0
            eta = el / b1 * (len(kinds) - b1)
            logger.info("%s: run %d/%d, elapsed %.1f s, about %.1f s left", name, b1, len(kinds), el, eta)
            last_log = now
    return done


#: the measure runs' kinds in `_run_kinds`' order
RUN_KINDS = (SSE, SSP, BASE)


def _run_kinds(k: Kernels, plan: Plan) -> list[list[Any]]:
    """The segments of each kind of measure run, in RUN_KINDS order: an SSE run (warm-ups + 1), an SSP run, and where
    the plan has base runs a base run (the SSE run without its SSE execution)."""
    kinds = [k.segments(plan.sse_executions_per_run), k.segments(plan.executions_per_run)]
    return kinds + [k.segments(plan.sse_index)] if plan.base_runs else kinds


def _ssp_check(
    rec: _Recorder, lois: _SSPLois, stops: list[SSPStopDecision], kinds: np.ndarray, b1: int, name: str
) -> np.ndarray | None:
    """After the runs up to schedule index `b1`: the adaptive stop's decision on the SSP runs so far (appended to
    `stops`); the mask of the runs after `b1` to keep when every rank says stop and SSP runs are left, else None."""
    lois.add_last(rec)
    rec.samples.append(rec.device.drain_samples())
    d = lois.decide(rec)
    stops.append(d)
    if any(rec.sync.all_gather(d.extend)) or not (kinds[b1:] == "ssp").any():
        return None
    logger.info("%s: SSP runs stopped after %d: %s", name, d.runs, SSP_STOP_REASONS[d.reason])
    return kinds[b1:] != "ssp"


def _next_check(kinds: np.ndarray, b0: int, n_ssp: int) -> int:
    """The schedule index just after the `n_ssp`-th SSP run from `b0` on (its end when there are fewer)."""
    pos = np.flatnonzero(kinds[b0:] == "ssp")
    return len(kinds) if pos.size < n_ssp else b0 + int(pos[n_ssp - 1]) + 1


class _SSPLois:
    """The SSP LOIs of the runs so far, for the adaptive stop (a decision, not a measurement: the analysis makes the
    LOIs again from the raw tables). Each SSP run's tail, main executions ssp_index .. trail_index - 1 (start of
    the first to start of the one after the last), is mapped to the host clock by the run's own GPU-clock read; a
    "total" sample is one of its LOIs when its time minus the sensor's delay (and group delay, window / 2 + lag,
    where the trailing executions cover it: the analysis's centroid-aligned LOIs) falls in it."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        s = plan.sensor
        group = s.window_ns / 2 + s.lag_ns
        self.shift_ns = int(s.delay_ns + (group if group <= plan.trailing * plan.cycle_ns else 0))
        self.windows: list[tuple[int, int]] = []  # host-clock tail windows (ns) of the SSP runs so far

    def add_last(self, rec: _Recorder) -> None:
        """The tail windows of the SSP runs of the last measured batch (`_Recorder.measure`)."""
        run_col, r, seg = rec.execs[-1]
        reads, _, read_runs = rec.clock[-1]
        phase = {int(run): ph for run, ph, *_ in rec.runs[-len(read_runs) :]}
        mid = (reads.host_before_ns + reads.host_after_ns) // 2
        for i, run in enumerate(read_runs.tolist()):
            if phase.get(int(run)) != "ssp":
                continue
            m = (run_col == run) & (seg == "main")
            idx, start, end = r.exec_index[m], r.gpu_start_ns[m], r.gpu_end_ns[m]
            a = start[idx == self.plan.ssp_index]
            b = start[idx == self.plan.trail_index]
            if a.size == 0:
                continue
            b_ns = int(b[0]) if b.size else int(end[idx == idx.max()][0])
            off = int(mid[i]) - int(reads.gpu_ns[i])
            self.windows.append((int(a[0]) + off, b_ns + off))

    def decide(self, rec: _Recorder) -> SSPStopDecision:
        """`ssp_stop_decision` over the SSP runs so far, from every "total" sample drained so far."""
        smp = PowerSamples.concat(rec.samples)
        rec.samples[:] = [smp]
        tot = smp.is_channel("total")
        t, p = smp.t_ns[tot] - self.shift_ns, smp.power_mw[tot].astype(np.float64)
        order = np.argsort(t, kind="stable")
        t, c = t[order], np.concatenate(([0.0], np.cumsum(p[order])))
        w = np.array(self.windows, dtype=np.int64).reshape(-1, 2)
        lo, hi = np.searchsorted(t, w[:, 0], "left"), np.searchsorted(t, w[:, 1], "left")
        plan = self.plan
        return ssp_stop_decision(
            c[hi] - c[lo], hi - lo, int(plan.ssp_min_lois or 1), float(plan.ssp_ci_pct or 0.0), int(plan.runs)
        )


def _lockstep_fields(
    rec: _Recorder, sync: Lockstep, name: str, timing: Timing, probe: Probe, probes: list[Probe]
) -> dict[str, Any]:
    """Several GPUs: check that every rank issued the same runs and executions; plan.json's distributed fields."""
    counts = sync.all_gather((len(rec.runs), rec.issued))
    if len(set(counts)) != 1:
        raise DeviceError(f"{name}: ranks issued unequal (runs, executions): {counts}")
    return {
        "distributed": DistributedInfo.model_validate(sync.describe()),
        "rank": sync.rank,
        "world_size": sync.world_size,
        "rank_local": RankLocal(**timing.as_dict(), probe=probe),
        "probes_by_rank": probes,
    }


def _write_collection(
    rec: _Recorder,
    kernels: Kernels,
    scenario: Scenario,
    policy: RunPolicy,
    seed: int,
    plan: Plan,
    extra: dict[str, Any],
    raw_dir: Path,
    truth_path: str | Path | None,
    reading_truth_path: str | Path | None,
) -> Plan:
    """Every raw table with its provenance, then plan.json (the plan with `extra` and the provenance) and the
    manifest (the GPU's own calibration and the telemetry, where there are any); returns the plan written."""
    device = rec.device
    meta = provenance(
        device.describe(),
        config_hash=collection_hash(scenario, policy, seed),
        scenario=scenario.model_dump(mode="json"),
        kernels=kernels.describe(),
        stage="collect",
        **({"distributed": extra["distributed"]} if "distributed" in extra else {}),
    )
    rec.write(
        raw_dir,
        meta.to_json(),
        Path(truth_path) if truth_path is not None else None,
        Path(reading_truth_path) if reading_truth_path is not None else None,
    )
    plan = plan.model_copy(update={**extra, "provenance": meta})
    rawio.write_json(raw_dir / "plan.json", plan.to_json())
    rawio.write_manifest(raw_dir, (*SCENARIO_RAW_FILES, SCENARIO_CALIBRATION, TELEMETRY_FILE))
    return plan


def collect_scenario(
    device: GPUDevice,
    scenario: Scenario,
    policy: RunPolicy,
    calibration: Calibration,
    seed: int,
    raw_dir: str | Path,
    truth_path: str | Path | None = None,
    sync: Lockstep | None = None,
    reading_truth_path: str | Path | None = None,
) -> Plan:
    """Run METHOD.md's procedure for one scenario on `device` and write its raw files to `raw_dir`.

    1. time the kernel (warm-ups + timing_reps executions after idle; `_time_kernel`);
    2. stability probe: back-to-back executions for `policy.probe_ms` (longer where the sensor needs it:
       `probe_load_ns`), to find when power stops changing
       (`_stability_probe`), or, where the reference run carries it (`probe_in_reference`), 4. first and the
       probe read from its start (`_ProbeInReference`: no probe run, ~1 s less per scenario on the H200);
    3. plan runs / executions per run / idle from the guidance table, calibration and probe (`make_plan`);
    4. optionally a reference run (back to back for reference_ms; `_reference_run`);
    5. SSE and SSP runs, shuffled: idle + random delay in [0, sensor period), a GPU-clock read,
       [predecessor x count] + kernel x N (N = warm-ups + 1 for SSE runs, to the SSP tail + 1 for SSP runs;
       `_measure_runs`).

    truth_path / reading_truth_path (simulator): where the true kernel power per execution and the noise-free
    reading of every sample go (`fingrav.layout.SweepLayout.truth` / `reading_truth`).
    sync: several GPUs in lockstep (module docstring); `seed` must then be the same on every rank. None:
    one GPU. Returns this rank's plan (the plan fields are rank 0's; rank, rank_local, distributed and provenance
    are its own).
    """
    sync = sync if sync is not None else Solo()
    rng = np.random.default_rng([seed, zlib.crc32(scenario.name.encode())])
    sensor = PlanSensor.of(calibration.total)
    noise_mw = float(calibration.total.noise_mw or 0.0)
    kernels = Kernels.prepare(device, scenario)
    rec = _Recorder(device, sync)
    wall0 = time.perf_counter()

    device.start_sampling()
    rec.burst()
    # several GPUs: every rank idles as long as the slowest sensor needs (the same schedule everywhere)
    settle = max(sync.all_gather(sensor.settle_ns + sensor.period_ns))
    local_timing = _time_kernel(rec, kernels, policy, settle, scenario.name)
    # several GPUs: rank 0's timing decides every count from here on (never each rank's own clock)
    exec_time, cycle = sync.broadcast((local_timing.exec_time_ns, local_timing.cycle_ns))
    # several GPUs: every rank's probe as long as the slowest sensor needs (the same executions everywhere)
    load_ns = max(sync.all_gather(probe_load_ns(policy, sensor)))
    probe, reference = _probe_first(rec, kernels, policy, noise_mw, settle, cycle, scenario.name, load_ns)
    run_id = 2
    # 3. plan (several GPUs: rank 0 plans from the most conservative probe of all ranks and broadcasts it)
    probes = sync.all_gather(probe)
    # the plan's price only: the device's power limit, limit cycle and host gap, the predecessor's modelled cycle
    desc = device.describe()
    timing = timing_of_device(desc)
    pred = scenario.predecessor
    pred_cycle = predecessor_cycle_ns(desc, pred.kernel, sync.world_size) if pred is not None else 0.0
    plan = sync.broadcast(
        make_plan(exec_time, cycle, sensor, merge_probes(probes), policy, kernels.pred_count, pred_cycle, timing)
    )
    _log_plan(scenario.name, plan, kernels)
    if reference is None and plan.reference_executions:
        settle_of = lambda: plan.settle_time_ns()[0]  # noqa: E731
        reference = _reference_run(rec, ReferenceSpec.of_plan(plan), kernels, sync, run_id, scenario.name, settle_of)
        run_id += 1
    stops: list[SSPStopDecision] = []
    n_runs = _measure_runs(rec, plan, kernels, rng, run_id, scenario.name, wall0, stops)
    device.sleep_ns(settle)
    rec.burst()
    rec.samples.append(device.stop_sampling())
    multi = sync.world_size > 1
    extra = _lockstep_fields(rec, sync, scenario.name, local_timing, probe, probes) if multi else {}
    if reference is not None:
        extra.update(reference.plan_fields(bool(device.unstamped_runs)))
    if stops:
        extra["ssp_stop"] = SSPStop(**stops[-1].to_dict())
    plan = _write_collection(rec, kernels, scenario, policy, seed, plan, extra, Path(raw_dir), truth_path,
                             reading_truth_path)  # fmt: skip
    logger.info("%s: collected %d runs in %.1f s wall", scenario.name, n_runs, time.perf_counter() - wall0)
    return plan


def _reference_more(
    rec: _Recorder,
    spec: ReferenceSpec,
    sync: Lockstep,
    decisions: list[ReferenceDecision],
    part: int,
    settle_of: Callable[[], int],
) -> Callable[[int], int]:
    """The adaptive reference run's `more` (`GPUDevice.run_unstamped`): drain the samples, ask
    `fingrav.analysis.sustained.reference_decision` whether to go on (on the samples from `settle_of()` ns after the
    run's start), and go on by `part` executions while it says so (several GPUs in lockstep: while any rank's says
    so, so that every rank runs the same executions). Every decision is appended to `decisions`."""
    device = rec.device
    min_ns, max_ns = int(spec.min_ms * NS_PER_MS), int(spec.max_ms * NS_PER_MS)

    def more(done: int) -> int:
        rec.samples.append(device.drain_samples())
        smp = PowerSamples.concat(rec.samples)
        rec.samples[:] = [smp]
        start = rec.host_start
        settle_ns = settle_of()
        tot = smp.is_channel("total") & (smp.t_ns >= start)
        d = reference_decision(
            smp.t_ns[tot],
            smp.power_mw[tot],
            start,
            int(device.host_time_ns()),
            settle_ns,
            min_ns,
            max_ns,
            float(spec.ci_pct or 1.0),
        )
        decisions.append(d)
        go = any(sync.all_gather(d.extend))
        logger.debug("reference run: %d executions, %s (%s)", done, d.reason, "going on" if go else "stopping")
        return part if go else 0

    return more


def _probe(
    rec: _Recorder,
    probe_rec: ExecRecords,
    n: int,
    policy: RunPolicy,
    noise_mw: float,
    idle_before_ns: int,
    cycle_ns: int,
) -> Probe:
    """Analyze the probe run's "total" samples. Busy interval on the host clock: from the run's last
    clock read (just before launch) for the GPU-measured busy length; idle level from the
    `idle_before_ns` slept before it."""
    busy = int(probe_rec.gpu_end_ns[-1] - probe_rec.gpu_start_ns[0])
    return _probe_of_samples(rec, rec.runs[-1][2], busy, n, policy, noise_mw, idle_before_ns, cycle_ns)


def _probe_of_samples(
    rec: _Recorder,
    host_start: int,
    busy_ns: int,
    n: int,
    policy: RunPolicy,
    noise_mw: float,
    idle_before_ns: int,
    cycle_ns: int,
    load_end_ns: int | None = None,
) -> Probe:
    """`analyze_probe` on the "total" samples so far: the probe window [host_start, host_start + busy_ns] (host
    ns), the idle before it from half of `idle_before_ns`, and, where the load goes on past the window (the probe read
    from the reference run), its end `load_end_ns`. A probe too short for the sensor is a ConfigError naming
    run_policy.probe_ms."""
    smp = PowerSamples.concat(rec.samples)
    rec.samples[:] = [smp]
    tot = smp.is_channel("total") & (smp.t_ns >= host_start - idle_before_ns // 2)
    try:
        return analyze_probe(
            smp.t_ns[tot], smp.power_mw[tot], host_start, host_start + busy_ns, n, policy.stability_tol_pct, noise_mw,
            cycle_ns, load_end_ns=load_end_ns,
        )  # fmt: skip
    except ValueError as err:  # too short a probe for this sensor: the field to change, no traceback
        raise ConfigError(f"run_policy.probe_ms = {policy.probe_ms:g}: {err}") from None
