"""NVML power polling: the "total" and "memory" channels of NVIDIA GPUs, the vendor poller of the sampler host.

GPU-side module: standard library + numpy. pynvml is handed in (`PowerPoller`) or imported by module name
in the sampler process (`open_poller`, ``NVMLSamplerConfig.nvml_module``), so tests can use a fake.

What is read (see shared/H200.md for measured numbers)
------------------------------------------------------
* channel ``total``: ``nvmlDeviceGetSamples(handle, NVML_TOTAL_POWER_SAMPLES, last_ts_us)``, the
  driver's buffer of (timestamp, mW) power samples. Timestamps are host wall-clock microseconds since
  the epoch (the clock of ``time.time_ns()``); they are converted to ns on the host clock
  (`fingrav.device.hostclock`: CLOCK_MONOTONIC, never stepped) with the wall - host offset measured at
  every poll. On an H200 a new value arrives
  every ~20 ms and the buffer holds a few seconds, so the poller drains it every ``interval_ms``
  (default 10 ms; keep it <= 50 ms) with the last timestamp seen, drops anything already seen
  (de-duplication by timestamp) and treats NVML_ERROR_NOT_FOUND ("no sample newer than last_ts") as
  "nothing new". This is the instantaneous-ish stream fingrav profiles with.
* channel ``memory`` (where supported): field ``NVML_FI_DEV_POWER_AVERAGE`` with scopeId
  ``NVML_POWER_SCOPE_MEMORY`` read through ``nvmlDeviceGetFieldValues`` every ``memory_interval_ms``.
  **It is an average** (window not documented; the value changes every ~100 ms on an H200), not an
  instantaneous sample. A value is recorded only when it changes (plus the first read), stamped with
  the field's own timestamp (host wall clock, us) or, when that is 0, the host time of the read.

Gaps
----
The "total" timestamps are checked for holes: an interval longer than ``gap_factor`` (2.5) x the
median of the last intervals is reported as a gap ``(t_before_ns, t_after_ns)`` in
``PowerSamples.gaps`` (the buffer overflowed because a drain came too late, or the driver stopped
publishing). Until ``MIN_INTERVALS_FOR_GAPS`` intervals are known the check is deferred, not skipped:
earlier intervals are checked as soon as the median exists. Time before the first sample after
``start`` and after the last one before ``stop`` is not checked.

Faults (`fingrav.device.screening`: set aside, counted in ``stats``, warned about; never silent)
-----------------------------------------------------------------------------------------------
Non-physical values (0, the all-ones sentinels, > 5 kW, not finite), one timestamp with two different values
(both set aside), a batch out of time order (counted: the ring buffer may wrap), an unknown value type (a
DeviceError: reading the wrong union member gives plausible garbage). A step of the wall clock (NTP,
settimeofday) changes the wall - host offset: the samples of the poll that noticed it are set aside (they may
be stamped on either side of the step), the time since the previous poll is a gap, and after a step back the
time until the driver's stamps pass the last one seen again (its samples cannot be told from those already
read) is a gap too; samples stamped after the step are mapped with the new offset.

Errors
------
NVML errors are wrapped once, by `fingrav.device.nvidia.library`. A poll that fails is retried at the
next period; ``max_consecutive_errors`` failures in a row stop the poller (DeviceError), and the sampler
host reports it at the next drain.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fingrav.device.base import PowerSamples
from fingrav.device.hostclock import WallClock, host_ns
from fingrav.device.nvidia.library import (
    init_nvml,
    is_nvml_error,
    load_nvml,
    nvml_call,
    nvml_code,
    nvml_errors,
    open_handle,
    shutdown_nvml,
    wrap_nvml_error,
)
from fingrav.device.sampler_host import PollSchedule
from fingrav.device.screening import FaultLog, physical_mw
from fingrav.errors import DeviceError, FingravError

logger = logging.getLogger(__name__)

#: intervals needed before the median period is trusted for gap detection
MIN_INTERVALS_FOR_GAPS = 8
#: intervals the median period is taken over
PERIOD_HISTORY = 256

CHANNEL_NOTES = {
    "total": "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES): the driver's buffered power samples, mW, "
    "host wall-clock timestamps",
    "memory": "field NVML_FI_DEV_POWER_AVERAGE, scopeId NVML_POWER_SCOPE_MEMORY: an AVERAGE over an "
    "undocumented window (changes ~every 100 ms on H200), recorded when it changes",
}


# --------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class NVMLSamplerConfig:
    """Settings of one NVML sampler (JSON-able; travels to the sampler process).

    nvml_index / uuid: the GPU (uuid preferred when given); interval_ms: period of the drains of the
    NVML sample buffer (ms, <= 50, or samples are lost); memory: poll the memory-scope average power
    field as channel "memory"; memory_interval_ms: its poll period (ms); gap_factor: an interval longer
    than this x the median period is a gap; history_ms: on start, also keep samples stamped up to this
    long (ms) before the start; max_consecutive_errors: failed polls in a row that stop the sampler;
    nvml_module: module to import as pynvml (tests: a fake).
    """

    nvml_index: int = 0
    uuid: str | None = None
    interval_ms: float = 10.0
    memory: bool = False
    memory_interval_ms: float = 20.0
    gap_factor: float = 2.5
    history_ms: float = 0.0
    max_consecutive_errors: int = 5
    nvml_module: str = "pynvml"

    def __post_init__(self) -> None:
        if not 0.1 <= self.interval_ms <= 1000.0:
            raise ValueError(f"interval_ms={self.interval_ms}: must be within [0.1, 1000]")
        if self.interval_ms > 50.0:
            logger.warning(
                "interval_ms=%.1f > 50 ms: the NVML sample buffer may overflow between drains", self.interval_ms
            )
        if self.memory_interval_ms <= 0:
            raise ValueError(f"memory_interval_ms={self.memory_interval_ms}: must be > 0")
        if self.gap_factor <= 1.0:
            raise ValueError(f"gap_factor={self.gap_factor}: must be > 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be >= 1")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def schedule(self) -> PollSchedule:
        """Poll every `interval_ms`; when late, the next poll is one period from now (the buffer holds
        seconds: no need to catch up)."""
        return PollSchedule(period_ns=int(self.interval_ms * 1e6), spin_ns=0, catch_up=False)


# --------------------------------------------------------------------------- NVML reads
VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def value_of(value: Any, value_type: int) -> float:
    """The number in a c_nvmlValue_t union, read through its NVML_VALUE_TYPE_* tag; an unknown tag is a
    DeviceError (reading the wrong union member would give plausible garbage)."""
    member = VALUE_MEMBERS.get(int(value_type))
    if member is None:
        raise DeviceError(f"NVML returned samples of unknown value type {value_type!r}")
    return float(getattr(value, member))


def read_memory_power(nvml: Any, handle: Any) -> tuple[int, float] | None:
    """(field timestamp in us, memory-scope average power in mW), or None when the GPU answers
    'not supported' for it. NVML errors of the call itself are wrapped (DeviceError)."""
    field_id = nvml_code(nvml, "NVML_FI_DEV_POWER_AVERAGE")
    scope = nvml_code(nvml, "NVML_POWER_SCOPE_MEMORY")
    fv = nvml_call(nvml, "nvmlDeviceGetFieldValues", handle, [(field_id, scope)])[0]
    success = nvml_code(nvml, "NVML_SUCCESS", 0)
    ret = int(getattr(fv, "nvmlReturn", success))
    if ret != success:
        if ret == nvml_code(nvml, "NVML_ERROR_NOT_SUPPORTED"):
            return None
        # the per-field status is an NVML return code too: wrap it the same way
        err_cls = getattr(nvml, "NVMLError", None)
        exc: BaseException = err_cls(ret) if err_cls is not None else RuntimeError(ret)
        raise wrap_nvml_error(nvml, exc, "nvmlDeviceGetFieldValues(POWER_AVERAGE, scope MEMORY)")
    return int(getattr(fv, "timestamp", 0) or 0), value_of(fv.value, getattr(fv, "valueType", 1))


def memory_power_supported(nvml: Any, handle: Any) -> bool:
    """Whether the memory-scope average power field answers with a non-zero value on this GPU."""
    if not hasattr(nvml, "nvmlDeviceGetFieldValues"):
        return False
    try:
        got = read_memory_power(nvml, handle)
    except FingravError as exc:
        logger.info("memory power channel not available: %s", exc)
        return False
    if got is None:
        return False
    if got[1] <= 0:
        logger.info("memory power field answers 0 W: treating the memory channel as unsupported")
        return False
    return True


# --------------------------------------------------------------------------- gap detection
class GapDetector:
    """Incremental check of one channel's sample timestamps (ns) for holes.

    feed() the timestamps in order; an interval longer than `factor` x the median of the last
    `history` intervals is a gap. Intervals seen before `min_intervals` are known wait and are checked
    as soon as the median exists. take() returns the gaps found since the last take()."""

    def __init__(
        self, factor: float = 2.5, min_intervals: int = MIN_INTERVALS_FOR_GAPS, history: int = PERIOD_HISTORY
    ) -> None:
        self.factor = float(factor)
        self.min_intervals = int(min_intervals)
        self._dts: deque[int] = deque(maxlen=int(history))
        self._prev: int | None = None
        self._unchecked: list[tuple[int, int]] = []
        self._gaps: list[tuple[int, int]] = []
        self.total_gaps = 0

    def reset(self) -> None:
        """Forget the previous timestamp (a new start); the period history is kept."""
        self._prev = None
        self._unchecked.clear()

    @property
    def period_ns(self) -> int | None:
        """Median interval of the recent history, or None while fewer than `min_intervals` are known."""
        if len(self._dts) < self.min_intervals:
            return None
        return int(statistics.median(self._dts))

    def feed(self, t_ns: Iterator[int] | list[int] | np.ndarray) -> None:
        for t in t_ns:
            t = int(t)
            if self._prev is not None and t > self._prev:
                self._dts.append(t - self._prev)
                self._unchecked.append((self._prev, t))
            self._prev = t if self._prev is None else max(self._prev, t)
        period = self.period_ns
        if period is None or not self._unchecked:
            return
        limit = self.factor * period
        for a, b in self._unchecked:
            if b - a > limit:
                self._gaps.append((a, b))
                self.total_gaps += 1
                logger.warning(
                    "NVML power samples: gap of %.1f ms (median period %.1f ms)", (b - a) / 1e6, period / 1e6
                )
        self._unchecked.clear()

    def add(self, t_before_ns: int, t_after_ns: int) -> None:
        """A gap known from elsewhere (e.g. a wall-clock step): reported with the others."""
        self._gaps.append((int(t_before_ns), int(t_after_ns)))
        self.total_gaps += 1

    def take(self) -> list[tuple[int, int]]:
        out, self._gaps = self._gaps, []
        return out


# --------------------------------------------------------------------------- the poller
def new_stats() -> dict[str, Any]:
    """A `PowerPoller`'s counters at start (what its describe() and the sampler host report)."""
    return {
        "polls": 0,
        "samples": 0,
        "memory_samples": 0,
        "not_found": 0,
        "duplicates": 0,
        "errors": 0,
        "memory_errors": 0,
        "gaps": 0,
        "max_poll_ns": 0,
        "max_poll_interval_ns": 0,
        "late_polls": 0,
        "max_batch": 0,
        "period_ns": None,
        "memory_disabled": None,
        "warnings": [],
    }


class PowerPoller:
    """Drains the NVML power sample buffer of one GPU: the `fingrav.device.sampler_host.Poller` of NVML,
    usable in-process too.

    `nvml`: the pynvml module (or a fake); `handle`: its device handle; `clock_ns`: the wall clock NVML stamps
    samples with (time.time_ns); `host_ns`: the host clock the samples are put on (`fingrav.device.hostclock`;
    a test that drives both by hand passes the same clock); nvml_index: reported by describe(); owns_library:
    close() shuts NVML down (set by `open_poller`). Call start(), then poll() every `config.interval_ms`, and
    take() whenever the samples are wanted."""

    def __init__(
        self,
        nvml: Any,
        handle: Any,
        config: NVMLSamplerConfig,
        clock_ns: Callable[[], int] = time.time_ns,
        *,
        host_ns: Callable[[], int] = host_ns,
        nvml_index: int | None = None,
        owns_library: bool = False,
    ) -> None:
        self.nvml = nvml
        self.handle = handle
        self.config = config
        self.clock_ns = clock_ns
        self.host_ns = host_ns
        self._wall = WallClock(clock_ns, host_ns)
        self._blind_until_us: int | None = None  # after a wall-clock step back: stamps up to here are ambiguous
        self._blind_from_ns: int | None = None
        self.nvml_index = config.nvml_index if nvml_index is None else nvml_index
        self.schedule = config.schedule
        self._owns_library = owns_library
        self._sample_type = nvml_code(nvml, "NVML_TOTAL_POWER_SAMPLES")
        self._gaps = GapDetector(config.gap_factor)
        self._memory = bool(config.memory)
        self._running = False
        self._last_ts_us = 0
        self._t: list[int] = []
        self._p: list[float] = []
        self._mt: list[int] = []
        self._mp: list[float] = []
        self._mem_last: float | None = None
        self._mem_due_ns = 0
        self._consecutive_errors = 0
        self.fatal: str | None = None
        self.stats: dict[str, Any] = new_stats()
        self.faults = FaultLog("NVML sampler", self.stats)
        self._last_poll_ns: int | None = None

    @property
    def running(self) -> bool:
        return self._running

    def describe(self) -> dict[str, Any]:
        """What the sampler host sends the parent once ready."""
        return {"nvml_index": self.nvml_index, "config": self.config.as_dict()}

    def start(self) -> None:
        """Begin a sampling period: only samples stamped after now - history_ms are kept."""
        self.fatal = None
        self._wall.update()
        self._blind_from_ns = None
        now = self.clock_ns()
        self._last_ts_us = max(0, (now - int(self.config.history_ms * 1e6)) // 1000)
        self._gaps.reset()
        self._mem_last = None
        self._mem_due_ns = 0
        self._last_poll_ns = None
        self._running = True

    def stop(self) -> None:
        self._running = False

    def close(self) -> None:
        """Shut NVML down when this poller opened it (`open_poller`)."""
        if self._owns_library:
            self._owns_library = False
            shutdown_nvml(self.nvml)

    def _warn(self, msg: str) -> None:
        self.faults.warn(msg)

    def _failed(self, exc: FingravError, what: str) -> None:
        self.stats["errors"] += 1
        self._consecutive_errors += 1
        self._warn(f"{what}: {exc} ({self._consecutive_errors} failure(s) in a row)")
        if self._consecutive_errors >= self.config.max_consecutive_errors:
            self.fatal = f"NVML sampler stopped after {self._consecutive_errors} failed polls in a row: {exc}"
            self._running = False
            raise DeviceError(self.fatal) from exc

    def poll(self) -> int:
        """One drain of the sample buffer (and of the memory field when due). Returns the number of new
        "total" samples. NOT_FOUND (nothing new) is normal; other NVML errors are counted, and the
        `max_consecutive_errors`-th in a row raises DeviceError (and stops the poller)."""
        if not self._running:
            return 0
        t0 = time.perf_counter_ns()
        now = self.host_ns()
        previous = self._last_poll_ns
        if previous is not None:
            gap = now - previous
            self.stats["max_poll_interval_ns"] = max(self.stats["max_poll_interval_ns"], gap)
            if gap > 3 * self.config.interval_ms * 1e6:
                self.stats["late_polls"] += 1
        self._last_poll_ns = now
        self.stats["polls"] += 1
        n_new, kept = 0, len(self._t)
        since = previous if previous is not None else now
        stepped = self._clock_stepped(since)
        try:
            n_new = self._poll_total(stepped)
        except FingravError as exc:
            self._failed(exc, "nvmlDeviceGetSamples(TOTAL_POWER)")
        else:
            self._consecutive_errors = 0
        if self._clock_stepped(since):  # a step during the read: what it kept may be stamped on either side
            stepped = True
            self.stats["clock_step_samples"] = self.stats.get("clock_step_samples", 0) + len(self._t) - kept
            self.stats["samples"] -= len(self._t) - kept
            del self._t[kept:], self._p[kept:]
            self._gaps.reset()  # it was fed those stamps; the step's own gap covers the hole
            n_new = 0
        if self._memory and now >= self._mem_due_ns:
            self._mem_due_ns = now + int(self.config.memory_interval_ms * 1e6)
            self._poll_memory(now, stepped)
        self.stats["max_poll_ns"] = max(self.stats["max_poll_ns"], time.perf_counter_ns() - t0)
        return n_new

    def _clock_stepped(self, since_ns: int) -> bool:
        """Whether the wall clock NVML stamps with stepped since the last check (counted, warned about; the time
        from `since_ns`, the previous poll, is a gap until a sample stamped after the step is kept)."""
        step = self._wall.update()
        if step is None:
            return False
        self.faults.count("clock_steps")
        self._warn(
            f"the host's wall clock stepped by {step / 1e6:+.3f} ms: NVML stamps its samples with it, so the "
            "samples read around the step are set aside and the time is a gap"
        )
        self._blind_from_ns = since_ns if self._blind_from_ns is None else min(self._blind_from_ns, since_ns)
        return True

    def _poll_total(self, stepped: bool = False) -> int:
        """Read the samples newer than the last one seen, screen them (`_screen`) and keep the fresh ones on the
        host clock, unless the wall clock stepped (`stepped`: none is kept). Returns how many were kept."""
        batch = self._read_total()
        if batch is None:
            return 0
        fresh = self._screen(*batch)
        self.faults.report()
        if stepped:  # stamped before or after a wall-clock step: no way to tell, so none is kept
            self.stats["clock_step_samples"] = self.stats.get("clock_step_samples", 0) + len(fresh)
            return 0
        if not fresh:
            return 0
        t_ns = [self._wall.to_host(ts * 1000) for ts, _ in fresh]
        if self._blind_from_ns is not None:  # the first sample after a wall-clock step closes its gap
            self._gaps.add(self._blind_from_ns, t_ns[0])
            self._blind_from_ns = None
        self._t.extend(t_ns)
        self._p.extend(v for _, v in fresh)
        self._gaps.feed(t_ns)
        self.stats["samples"] += len(fresh)
        self.stats["period_ns"] = self._gaps.period_ns
        return len(fresh)

    def _read_total(self) -> tuple[Any, Any] | None:
        """(value type, samples) of nvmlDeviceGetSamples since the last timestamp seen; None when there is none
        newer (NVML_ERROR_NOT_FOUND: normal) or the batch is empty; other NVML errors wrapped."""
        nvml = self.nvml
        try:
            value_type, samples = nvml.nvmlDeviceGetSamples(self.handle, self._sample_type, self._last_ts_us)
        except Exception as exc:
            if is_nvml_error(nvml, exc, "NVML_ERROR_NOT_FOUND"):
                self.stats["not_found"] += 1  # no sample newer than last_ts: normal
                return None
            with nvml_errors(nvml, "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)"):
                raise
        if not samples:
            return None
        self.stats["max_batch"] = max(self.stats["max_batch"], len(samples))
        return value_type, samples

    def _screen(self, value_type: Any, samples: Any) -> list[tuple[int, float]]:
        """The batch's new (timestamp us, mW) pairs in time order: samples delivered before are dropped, one
        timestamp with different values or a non-physical value is set aside and counted, time going backwards
        inside the batch is counted (the driver's ring buffer may legitimately wrap); every timestamp seen, kept or
        set aside, is never read again."""
        by_ts: dict[int, set[float]] = {}
        order: list[int] = []
        prev: int | None = None
        for smp in samples:
            ts, v = int(smp.timeStamp), value_of(smp.sampleValue, value_type)
            if prev is not None and ts < prev:
                self.faults.count("time_backwards")
            prev = ts
            if ts <= self._last_ts_us:  # delivered before
                self.stats["duplicates"] += 1
                continue
            if ts not in by_ts:
                by_ts[ts] = set()
                order.append(ts)
            by_ts[ts].add(v)
        pairs = []
        for ts in sorted(order):
            values = by_ts[ts]
            if len(values) > 1:  # one timestamp, different values: neither can be trusted
                self.faults.count("conflicting_duplicates")
                continue
            (v,) = values
            if not physical_mw(v):
                self.faults.count("nonphysical")
                continue
            pairs.append((ts, v))
        if order:
            self._last_ts_us = max(self._last_ts_us, max(order))
        return pairs

    def _poll_memory(self, now: int, stepped: bool = False) -> None:
        got: tuple[int, float] | FingravError | None
        try:
            got = read_memory_power(self.nvml, self.handle)
        except FingravError as exc:
            got = exc
        if isinstance(got, FingravError) or got is None:
            self.stats["memory_errors"] += 1
            why = str(got) if got is not None else "not supported"
            self._warn(f"memory power read failed: {why}")
            if self.stats["memory_errors"] >= self.config.max_consecutive_errors:
                self._memory = False
                self.stats["memory_disabled"] = why
                self._warn(f"memory power channel disabled after {self.stats['memory_errors']} failures")
            return
        ts_us, mw = got
        if stepped or (self._mem_last is not None and mw == self._mem_last):
            return  # (across a wall-clock step its stamp cannot be placed)
        self._mem_last = mw
        self._mt.append(self._wall.to_host(ts_us * 1000) if ts_us > 0 else now)
        self._mp.append(mw)
        self.stats["memory_samples"] += 1

    def take(self) -> PowerSamples:
        """The samples collected since the last take(): "total" then "memory", each in time order,
        with the gaps found since the last take() (an open one after a wall-clock step up to now)."""
        if self._blind_from_ns is not None:
            now = self.host_ns()
            self._gaps.add(self._blind_from_ns, now)
            self._blind_from_ns = now
        t = np.asarray(self._t + self._mt, dtype=np.int64)
        ch = np.array(["total"] * len(self._t) + ["memory"] * len(self._mt), dtype=object)
        p = np.asarray(self._p + self._mp, dtype=np.float64)
        self._t, self._p, self._mt, self._mp = [], [], [], []
        gaps = self._gaps.take()
        self.stats["gaps"] += len(gaps)
        return PowerSamples(t, ch, p, gaps)


def open_poller(config: NVMLSamplerConfig) -> PowerPoller:
    """The sampler host's factory (runs in the sampler process): import and initialize NVML, open the GPU
    and return its poller, which shuts NVML down when closed."""
    nvml = load_nvml(config.nvml_module)
    init_nvml(nvml)
    try:
        index, handle = open_handle(nvml, config.nvml_index, config.uuid)
        return PowerPoller(nvml, handle, config, nvml_index=index, owns_library=True)
    except BaseException:
        shutdown_nvml(nvml)
        raise
