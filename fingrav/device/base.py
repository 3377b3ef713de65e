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


@dataclass
class PowerSamples:
    """Power samples in long format (one row per channel and sample), host clock.

    gaps: list of (t_from_ns, t_to_ns) where the backend knows it lost samples
    (e.g. the NVML buffer overflowed between two drains)."""

    t_ns: np.ndarray
    channel: np.ndarray  # str (fixed-width unicode; object arrays are accepted)
    power_mw: np.ndarray  # float64
    gaps: list[tuple[int, int]] = field(default_factory=list)

    @staticmethod
    def empty() -> PowerSamples:
        return PowerSamples(np.zeros(0, np.int64), np.zeros(0, str), np.zeros(0, np.float64))

    def __len__(self) -> int:
        return len(self.t_ns)

    @staticmethod
    def concat(parts: Sequence[PowerSamples]) -> PowerSamples:
        parts = [p for p in parts if p is not None]
        if not parts:
            return PowerSamples.empty()
        if len(parts) == 1:  # nothing to join: no copy (these arrays hold millions of rows)
            return parts[0]
        return PowerSamples(
            np.concatenate([p.t_ns for p in parts]).astype(np.int64),
            np.concatenate([np.asarray(p.channel, dtype=str) for p in parts]),
            np.concatenate([p.power_mw for p in parts]).astype(np.float64),
            [g for p in parts for g in p.gaps],
        )


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

    #: whether `run_unstamped` really runs without stamps between executions
    unstamped_runs: bool = False

    def run_unstamped(self, handle: KernelHandle, count: int, more: Callable[[int], int] | None = None) -> ExecRecords:
        """`count` back-to-back executions of one kernel launched as a user launches them, with no stamp between
        them: one record from the first start to the last end, exec_index = the executions run - 1.

        more: an adaptive run (`fingrav.collect.runner`). Once the first `count` executions are under way, the
        device calls `more(done)` each time a part of the run has finished on the GPU (`done`: executions
        finished so far) and appends as many executions as it returns, back to back, until it returns 0. GPUs
        that queue work ahead keep the next part queued while `more` runs, so the GPU never idles inside the run
        (the run may end up one part longer than the last `more` asked for). part: executions per part (the
        device's own choice when None).

        Devices that cannot run without stamps (`unstamped_runs` False) run the executions stamped, one `execute`
        per part (with a launch gap between parts), and return the same one record."""
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

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the device (library handles, processes)."""

    def __enter__(self) -> GPUDevice:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
