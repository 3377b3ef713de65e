"""The one abstract GPU device every backend implements (simulated, NVML, amdsmi, replay).

GPU-side module: imports only numpy (backends add torch and their vendor library, lazily).

Clocks
------
* **host clock** (`*_host_ns`, `t_ns`): the clock the power samples are stamped with. For NVML this is
  host wall-clock (`time.time_ns()`), which is what nvmlDeviceGetSamples stamps; for the simulator a
  virtual host clock. `host_time_ns()` reads it.
* **GPU clock** (`gpu_*_ns`): what the GPU stamps executions with (`%globaltimer`, `s_memrealtime`, ...).
  It has an unknown offset and drift against the host clock; fingrav fits them (clock sync).

Power samples are always (t_ns on the host clock, channel, power_mw). Channel "total" is always present
and comes first in `channels`.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

#: input sets (separately allocated inputs) every kernel a device prepares rotates through at least, execution j of
#: a run using set j mod sets: where a kernel's inputs sit in memory moves a memory-bound kernel's execution time by
#: 0.3-0.6 % (sd) from one preparation to the next on an H200 (results/h200-card-state); four sets average four
#: placements, and the analysis measures their spread (`fingrav.analysis.placement`). The torch devices allocate
#: them (`fingrav.device.torch_device`), the simulator models them (`fingrav.device.sim`).
PLACEMENT_SETS = 4


@dataclass(frozen=True)
class ClockReads:
    """GPU-timestamp reads bracketed by host-clock reads (all int64 ns, same length)."""

    host_before_ns: np.ndarray
    gpu_ns: np.ndarray
    host_after_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.gpu_ns)

    @staticmethod
    def concat(parts: Sequence[ClockReads]) -> ClockReads:
        return ClockReads(
            np.concatenate([p.host_before_ns for p in parts]).astype(np.int64),
            np.concatenate([p.gpu_ns for p in parts]).astype(np.int64),
            np.concatenate([p.host_after_ns for p in parts]).astype(np.int64),
        )


@dataclass(frozen=True)
class ExecRecords:
    """Executions of one `GPUDevice.execute` call, in launch order.

    segment: index into the `segments` argument of `execute` (int32);
    exec_index: index of the execution within its segment (int32);
    gpu_start_ns / gpu_end_ns: GPU-clock stamps bracketing each execution (int64).
    """

    segment: np.ndarray
    exec_index: np.ndarray
    gpu_start_ns: np.ndarray
    gpu_end_ns: np.ndarray

    def __len__(self) -> int:
        return len(self.segment)

    @property
    def duration_ns(self) -> np.ndarray:
        return self.gpu_end_ns - self.gpu_start_ns

    @staticmethod
    def concat(parts: Sequence[ExecRecords]) -> ExecRecords:
        if not parts:
            z32, z64 = np.zeros(0, np.int32), np.zeros(0, np.int64)
            return ExecRecords(z32, z32.copy(), z64, z64.copy())
        return ExecRecords(
            np.concatenate([p.segment for p in parts]).astype(np.int32),
            np.concatenate([p.exec_index for p in parts]).astype(np.int32),
            np.concatenate([p.gpu_start_ns for p in parts]).astype(np.int64),
            np.concatenate([p.gpu_end_ns for p in parts]).astype(np.int64),
        )


class PowerSamples:
    """Power samples in long format (one row per channel and sample), host clock.

    t_ns: int64 ns; channel: each row's channel name (str: fixed-width unicode; object arrays are accepted);
    power_mw: float64. gaps: list of (t_from_ns, t_to_ns) where the backend knows it lost samples
    (e.g. the NVML buffer overflowed between two drains).

    A backend with many samples may give the channels as codes instead (`PowerSamples.coded`: int codes into a
    tuple of names): `channel` then builds the names on first use, and `channel_codes` / `is_channel` /
    `concat` work on the codes (no string arrays of millions of rows)."""

    __slots__ = ("t_ns", "power_mw", "gaps", "_channel", "_codes", "_names")

    def __init__(
        self,
        t_ns: np.ndarray,
        channel: np.ndarray | None,
        power_mw: np.ndarray,
        gaps: list[tuple[int, int]] | None = None,
    ) -> None:
        self.t_ns = t_ns
        self.power_mw = power_mw
        self.gaps = list(gaps) if gaps is not None else []
        self._channel = channel
        self._codes: np.ndarray | None = None
        self._names: tuple[str, ...] | None = None

    @staticmethod
    def coded(
        t_ns: np.ndarray,
        codes: np.ndarray,
        names: Sequence[str],
        power_mw: np.ndarray,
        gaps: list[tuple[int, int]] | None = None,
    ) -> PowerSamples:
        """Samples whose channels are `codes` (ints) into `names`."""
        out = PowerSamples(t_ns, None, power_mw, gaps)
        out._codes = np.asarray(codes)
        out._names = tuple(str(n) for n in names)
        return out

    @property
    def channel(self) -> np.ndarray:
        """Each row's channel name (str array)."""
        if self._channel is None:
            assert self._codes is not None and self._names is not None
            self._channel = np.asarray(self._names, dtype=str)[self._codes]
        return self._channel

    def channel_codes(self) -> tuple[np.ndarray, tuple[str, ...]]:
        """(int32 codes, names): the channels as codes into their sorted names."""
        if self._codes is not None and self._names is not None:
            order = np.argsort(np.asarray(self._names, dtype=str))
            remap = np.empty(len(self._names), np.int32)
            remap[order] = np.arange(len(self._names), dtype=np.int32)
            return remap[self._codes], tuple(sorted(self._names))
        names, codes = np.unique(np.asarray(self.channel, dtype=str), return_inverse=True)
        return codes.astype(np.int32), tuple(str(n) for n in names)

    def is_channel(self, name: str) -> np.ndarray:
        """Boolean mask of the rows of channel `name`."""
        if self._codes is not None and self._names is not None:
            if name not in self._names:
                return np.zeros(len(self._codes), bool)
            return self._codes == self._names.index(name)
        return np.asarray(self.channel) == name

    def take(self, index: np.ndarray) -> PowerSamples:
        """The rows `index` (an index array or boolean mask), gaps kept."""
        if self._channel is None and self._codes is not None and self._names is not None:
            return PowerSamples.coded(
                self.t_ns[index], self._codes[index], self._names, self.power_mw[index], self.gaps
            )
        return PowerSamples(self.t_ns[index], self.channel[index], self.power_mw[index], self.gaps)

    @staticmethod
    def empty() -> PowerSamples:
        return PowerSamples(np.zeros(0, np.int64), np.zeros(0, str), np.zeros(0, np.float64))

    def __len__(self) -> int:
        return len(self.t_ns)

    def __repr__(self) -> str:
        return f"PowerSamples({len(self)} rows, gaps={self.gaps!r})"

    @staticmethod
    def concat(parts: Sequence[PowerSamples]) -> PowerSamples:
        parts = [p for p in parts if p is not None]
        if not parts:
            return PowerSamples.empty()
        if len(parts) == 1:  # nothing to join: no copy (these arrays hold millions of rows)
            return parts[0]
        gaps = [g for p in parts for g in p.gaps]
        t_ns = np.concatenate([p.t_ns for p in parts]).astype(np.int64)
        power = np.concatenate([p.power_mw for p in parts]).astype(np.float64)
        names = {p._names for p in parts if len(p)}
        if len(names) == 1 and all(p._codes is not None or not len(p) for p in parts):
            (n,) = names
            codes = np.concatenate([p._codes if p._codes is not None else np.zeros(0, np.int8) for p in parts])
            return PowerSamples.coded(t_ns, codes, n, power, gaps)
        return PowerSamples(t_ns, np.concatenate([np.asarray(p.channel, dtype=str) for p in parts]), power, gaps)


@dataclass(frozen=True)
class ClockTelemetry:
    """Clock and clock-event (throttle) state of one GPU at one instant (`GPUDevice.read_telemetry`).

    host_ns: the host clock at the read (`GPUDevice.host_time_ns`, ns); read_ns: how long the read took (ns, host);
    sm_mhz / mem_mhz: the current SM (AMD: GFX) and memory clocks (MHz), None where the GPU does not say;
    reasons: the vendor's bitmask of active clock-event reasons (NVML ``nvmlClocksEventReason*``), None where the
    vendor has none (amdsmi); reason_names: the active reasons decoded (amdsmi: its violation status's ``active_*``
    flags that are set); violation: cumulative limiter / slowdown counters by name, in `violation_unit` (NVML
    ``nvmlDeviceGetViolationStatus`` per perf policy: "power", "thermal", ... in ns; amdsmi
    ``amdsmi_get_violation_status`` accumulators, "acc_counter" the reference they count against); fields: other
    values by name (NVML field values, e.g. "NVML_FI_DEV_POWER_INSTANT"; amdsmi ``per_*`` percentages): their
    units are in the backend's ``describe()["telemetry"]``; errors: item -> message for what failed in this read
    (the rest was still read). Counters are cumulative: a run's share is `counters_since(reading before it)`."""

    host_ns: int
    read_ns: int
    sm_mhz: float | None = None
    mem_mhz: float | None = None
    reasons: int | None = None
    reason_names: tuple[str, ...] = ()
    violation: dict[str, int] = field(default_factory=dict)
    violation_unit: str = "ns"
    fields: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def counters_since(self, earlier: ClockTelemetry) -> dict[str, int]:
        """Increase of each violation counter read both now and at `earlier` (in `violation_unit`)."""
        return {k: int(v) - int(earlier.violation[k]) for k, v in self.violation.items() if k in earlier.violation}

    def as_dict(self) -> dict[str, Any]:
        """JSON-able form (lists for tuples)."""
        return {
            "host_ns": int(self.host_ns),
            "read_ns": int(self.read_ns),
            "sm_mhz": self.sm_mhz,
            "mem_mhz": self.mem_mhz,
            "reasons": self.reasons,
            "reason_names": list(self.reason_names),
            "violation": dict(self.violation),
            "violation_unit": self.violation_unit,
            "fields": dict(self.fields),
            "errors": dict(self.errors),
        }


@dataclass(frozen=True)
class MeasureRuns:
    """A batch of measure runs for `GPUDevice.measure_runs`, each run after the same protocol: idle for `idle_ns`
    (the GPU's: the host's time since the previous run ended counts towards it, `GPUDevice.idle_left_ns`) with the
    telemetry read in its second half (`GPUDevice.idle_reading_telemetry`), read the energy counter, one GPU-clock
    read, idle for `guard_ns` + its own delay, its segments back to back (`execute`), then the energy counter and the
    telemetry again.

    kinds: the segments of each kind of run (e.g. SSE and SSP runs: the same kernels, other counts);
    kind: (R,) which kind each run is (index into `kinds`), in run order; delay_ns: (R,) each run's random delay."""

    kinds: Sequence[Sequence[tuple[KernelHandle, int]]]
    kind: np.ndarray
    idle_ns: int
    delay_ns: np.ndarray
    guard_ns: int

    def __len__(self) -> int:
        return len(self.kind)

    def segments(self, r: int) -> list[tuple[KernelHandle, int]]:
        """The segments of run `r`."""
        return list(self.kinds[int(self.kind[r])])


@dataclass(frozen=True)
class MeasuredRuns:
    """What `GPUDevice.measure_runs` measured, per run (R,) and per execution (n, in launch order).

    host_start_ns: the host clock right before each run's executions (after its delay); energy_start_mj /
    energy_end_mj: the energy counter after the idle and after the executions (NaN where the device has none);
    reads: the one GPU-clock read of each run; records: every run's executions (`ExecRecords`, `segment` indexing
    the run's own segments); run: (n,) the run (index into the batch) of each record; telemetry: per run the
    readings before and after (None where the device offers none); truth: simulator only, aligned with `records`
    (`GPUDevice.ground_truth_of_last_execute`), else None."""

    host_start_ns: np.ndarray
    energy_start_mj: np.ndarray
    energy_end_mj: np.ndarray
    reads: ClockReads
    records: ExecRecords
    run: np.ndarray
    telemetry: list[tuple[ClockTelemetry | None, ClockTelemetry | None]] | None = None
    truth: dict[str, dict[str, np.ndarray]] | None = None


class KernelHandle(abc.ABC):
    """A prepared kernel (inputs allocated, library handles created). Backend-specific."""

    label: str

    def describe(self) -> dict[str, Any]:
        """JSON-able facts about the prepared kernel for provenance (the collect stage records them in the plan as
        `kernels.main` / `kernels.predecessor`): at least the label; backends add what `prepare` found out
        (e.g. the SDPA backend torch chose)."""
        return {"label": self.label}


class GPUDevice(abc.ABC):
    """One GPU as the collector sees it. All times in ns; power in mW; energy in mJ.

    Methods block until the GPU work they start has finished (`execute`, `spin`), so that the
    host clock after the call is later than every GPU end stamp it returns.
    """

    backend: str = "abstract"

    # -- identity -------------------------------------------------------------------------
    @property
    @abc.abstractmethod
    def channels(self) -> tuple[str, ...]:
        """Power channels, "total" first (e.g. ("total", "memory") or ("total", "xcd", "iod", "hbm"))."""

    @abc.abstractmethod
    def describe(self) -> dict[str, Any]:
        """JSON-able identity for provenance: name, vendor, driver, library versions, index, serial..."""

    # -- time -----------------------------------------------------------------------------
    @abc.abstractmethod
    def host_time_ns(self) -> int:
        """Now on the host clock (the clock power samples are stamped with)."""

    @abc.abstractmethod
    def sleep_ns(self, duration_ns: int) -> None:
        """Idle the GPU and the host for `duration_ns`."""

    #: host clock (ns) when the device's last measure run finished (`mark_busy_end`); None before the first
    _busy_end_host_ns: int | None = None

    def mark_busy_end(self) -> None:
        """Note that the GPU went idle now (the end of a run), for `idle_left_ns`."""
        self._busy_end_host_ns = int(self.host_time_ns())

    def idle_left_ns(self, idle_ns: int) -> int:
        """The part of an `idle_ns` idle still to wait before the next run (ns, 0 … idle_ns): the GPU has been idle
        since the last run ended (`mark_busy_end`) while the host drained samples and decided what to run next, and
        that time counts towards the idle instead of adding to it (on the H200 ~14 ms per run: results/h200-state).
        The full idle when no run has ended yet."""
        idle_ns = int(idle_ns)
        if self._busy_end_host_ns is None:
            return idle_ns
        return max(0, min(idle_ns, idle_ns - (int(self.host_time_ns()) - self._busy_end_host_ns)))

    def idle_reading_telemetry(self, idle_ns: int) -> ClockTelemetry | None:
        """The idle before a measure run, with the run's "before" telemetry read inside it: sleep until half of the
        idle is left (the host's time since the last run ended counts, `idle_left_ns`), `read_telemetry`, then sleep
        to the idle's end. The GPU idles `idle_ns` as before, but a read no longer adds to it: on the H200 an NVML
        read before a run took 8.7 ms median, 38 ms p90, the longest part of each run's cost beyond its idle, delay
        and executions (results/h200-db6: 21.7 of 1069 GPU-s in the SSP runs); read after the idle it was paid on
        top. Only a read longer than half the idle still adds its excess. Returns what `read_telemetry` returns."""
        idle_ns = int(idle_ns)
        if idle_ns <= 0:
            return self.read_telemetry()
        left = self.idle_left_ns(idle_ns)
        end_ns = int(self.host_time_ns()) + left
        self.sleep_ns(max(0, left - idle_ns // 2))
        tel = self.read_telemetry()
        self.sleep_ns(max(0, end_ns - int(self.host_time_ns())))
        return tel

    @abc.abstractmethod
    def read_gpu_clock(self, n: int) -> ClockReads:
        """`n` GPU-timestamp reads, each bracketed by host-clock reads (one launch + sync each)."""

    # -- work -----------------------------------------------------------------------------
    @abc.abstractmethod
    def prepare(self, kernel: Any) -> KernelHandle:
        """Allocate inputs for a `fingrav.config` kernel model; random data, never zeros."""

    @abc.abstractmethod
    def execute(self, segments: Sequence[tuple[KernelHandle, int]]) -> ExecRecords:
        """Run the segments back to back, each `count` executions of its kernel, every execution
        stamped with the GPU clock at start and end. Blocks until done."""

    def measure_runs(self, batch: MeasureRuns) -> MeasuredRuns:
        """Run a batch of measure runs (`MeasureRuns`: its protocol) one after the other. This default runs them one
        by one through `idle_reading_telemetry` (the idle, less the host's time since the previous run ended, with
        the telemetry read inside it), `energy_mj`, `read_gpu_clock` and `execute`; the simulator
        generates a whole batch with array operations (the same protocol, the same model)."""
        starts, e0s, e1s, reads, recs, tels, truths = [], [], [], [], [], [], []
        for r in range(len(batch)):
            tel0 = self.idle_reading_telemetry(int(batch.idle_ns))
            e0 = self.energy_mj()
            reads.append(self.read_gpu_clock(1))
            self.sleep_ns(int(batch.guard_ns) + int(batch.delay_ns[r]))
            starts.append(int(self.host_time_ns()))
            recs.append(self.execute(batch.segments(r)))
            self.mark_busy_end()
            e1 = self.energy_mj()
            tels.append((tel0, self.read_telemetry()))
            e0s.append(np.nan if e0 is None else e0)
            e1s.append(np.nan if e1 is None else e1)
            truths.append(self.ground_truth_of_last_execute())
        truth = None
        if truths and all(t is not None for t in truths):
            truth = {ch: {k: np.concatenate([t[ch][k] for t in truths]) for k in truths[0][ch]} for ch in truths[0]}
        return MeasuredRuns(
            np.asarray(starts, np.int64),
            np.asarray(e0s, np.float64),
            np.asarray(e1s, np.float64),
            ClockReads.concat(reads) if reads else ClockReads(*(np.zeros(0, np.int64),) * 3),
            ExecRecords.concat(recs),
            np.repeat(np.arange(len(recs)), [len(r) for r in recs]),
            tels,
            truth,
        )

    #: whether `measure_runs` generates a batch at once (no host between its runs: one barrier per batch suffices)
    batch_runs: bool = False

    #: whether `run_unstamped` really runs without stamps between executions
    unstamped_runs: bool = False

    def run_unstamped(
        self, handle: KernelHandle, count: int, more: Callable[[int], int] | None = None, part: int | None = None
    ) -> ExecRecords:
        """`count` back-to-back executions of one kernel launched as a user launches them, with no stamp between
        them: one record from the first start to the last end, exec_index = the executions run - 1.

        more: an adaptive run (`fingrav.collect.runner`). Once the first `count` executions are under way, the
        device calls `more(done)` each time a part of the run has finished on the GPU (`done`: executions
        finished so far) and appends as many executions as it returns, back to back, until it returns 0. GPUs
        that queue work ahead keep the next part queued while `more` runs, so the GPU never idles inside the run
        (the run may end up one part longer than the last `more` asked for). part: executions per part (the
        device's own choice when None).

        Devices that cannot run without stamps (`unstamped_runs` False) run the executions stamped, one `execute`
        per part (with a launch gap between parts), and return the same one record (`part` is `more`'s to choose
        here)."""
        rec = self.execute([(handle, int(count))])
        start, end, total = rec.gpu_start_ns[:1], rec.gpu_end_ns[-1:], int(count)
        while more is not None and (n := int(more(total))) > 0:
            part = self.execute([(handle, n)])
            end, total = part.gpu_end_ns[-1:], total + n
        return ExecRecords(np.zeros(1, np.int32), np.full(1, total - 1, np.int32), start, end)

    @abc.abstractmethod
    def spin(self, duration_ns: int) -> ExecRecords:
        """A controllable constant load (e.g. FMAs on all SMs) lasting `duration_ns` of GPU time;
        one record. Used to characterize the sensor."""

    # -- power ----------------------------------------------------------------------------
    @abc.abstractmethod
    def start_sampling(self) -> None:
        """Start logging power on every channel."""

    @abc.abstractmethod
    def drain_samples(self) -> PowerSamples:
        """Samples logged since the last drain (or start). Samples stamped up to now are complete
        once the sensor's reporting delay has passed."""

    @abc.abstractmethod
    def stop_sampling(self) -> PowerSamples:
        """Stop logging; return what was not drained yet."""

    def energy_mj(self) -> float | None:
        """Cumulative energy counter in mJ, or None when the device has none."""
        return None

    def read_telemetry(self) -> ClockTelemetry | None:
        """Clocks, clock-event (throttle) reasons and limiter counters now (`ClockTelemetry`), or None when the
        device offers none (the simulator, replay). Meant to be read right before and after a run, outside the
        timed region: a read takes several vendor-library calls (its cost is in `ClockTelemetry.read_ns`)."""
        return None

    def ground_truth_of_last_execute(self) -> dict[str, dict[str, np.ndarray]] | None:
        """Simulator only: the true power of the executions the last `execute` returned, aligned
        with its records: {channel: {"power_mw": cycle-mean power (start of the execution to the
        start of the next one in the same call; start to end for the last), "energy_mj": energy
        between start and end}}. Real backends return None. Written to a separate truth file that
        only validation reads, never the analysis."""
        return None

    # -- reuse across scenarios -----------------------------------------------------------
    def release_kernels(self) -> None:  # noqa: B027 - optional hook
        """Free every kernel `prepare` made on this device: its inputs, outputs and cached graphs (a large GEMM's
        input sets are GBs), now rather than when the last reference to its handle goes, so that a device kept open
        across scenarios (`fingrav.stages.collect.KeptDevice`) holds none of a finished scenario's memory when the
        next scenario prepares its own kernels. Handles prepared before are invalid afterwards. Default: nothing to
        free (the device caches nothing per kernel)."""

    def reset_for_next_scenario(self) -> None:
        """Make this open device measure the next scenario as a newly opened one would (a device kept open across
        scenarios, `fingrav.stages.collect.KeptDevice`): its kernels released (`release_kernels`) and the idle
        bookkeeping forgotten (`_busy_end_host_ns`: the next scenario's first run idles in full, as on a new
        device). Call it with sampling stopped. Backends that keep more per-open state reset it too (the torch
        device its seed counter and launch mode, the simulator all of its state). Only the device object is reset,
        never the GPU itself."""
        self.release_kernels()
        self._busy_end_host_ns = None

    def begin_scenario(self, name: str) -> None:  # noqa: B027 - optional hook
        """Called before scenario `name` is collected on this device (`fingrav.stages.collect.KeptDevice`), opened for
        it or kept open. A real GPU needs nothing; the simulator keys its random streams to the scenario, as a real
        sensor's noise is new in every scenario."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device (library handles, processes)."""

    def __enter__(self) -> GPUDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
