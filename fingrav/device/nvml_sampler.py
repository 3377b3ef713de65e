"""NVML power sampling in its own process (no torch): the "total" and "memory" channels of NVIDIA GPUs.

GPU-side module: standard library + numpy. pynvml (package ``nvidia-ml-py``) is imported lazily, by
module name, so that tests can hand in a fake (``SamplerConfig.nvml_module``).

What is read (see shared/H200.md for measured numbers)
------------------------------------------------------
* channel ``total``: ``nvmlDeviceGetSamples(handle, NVML_TOTAL_POWER_SAMPLES, last_ts_us)``, the
  driver's buffer of (timestamp, mW) power samples. Timestamps are host wall-clock microseconds since
  the epoch (the clock of ``time.time_ns()``); they are converted to ns. On an H200 a new value arrives
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

Errors
------
Every NVML error is wrapped exactly once, here (``nvml_errors``), into ``fingrav.errors``:
``BackendUnavailableError`` when the library, driver or device is missing, ``DeviceError`` otherwise.
A poll that fails is retried at the next period; ``max_consecutive_errors`` failures in a row stop the
sampler, and the next drain raises the DeviceError in the parent.

Process
-------
``NVMLSampler`` runs ``sampler_main`` in a child started with the multiprocessing *spawn* context, so
that the poll loop neither perturbs the kernel-launch loop (no GIL sharing) nor is delayed by it. The
parent talks to it over a Pipe: ``start`` / ``drain`` / ``stop`` / ``close``; a drain polls NVML once
more before answering, so samples published up to the request are included. ``mode="thread"`` runs the
very same ``sampler_main`` in a thread of the calling process (used by the tests, with a fake pynvml
installed in ``sys.modules``).

Note for scripts: *spawn* re-imports the parent's ``__main__`` module in the child, so keep heavy
imports (torch) inside ``main()`` and guard the entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

from fingrav.device.common import PowerSamples
from fingrav.errors import BackendUnavailableError, DeviceError, FingravError

logger = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'fingrav[nvidia]' (the official nvidia-ml-py package, which provides `pynvml`)"
#: intervals needed before the median period is trusted for gap detection
MIN_INTERVALS_FOR_GAPS = 8
#: intervals the median period is taken over
PERIOD_HISTORY = 256

# NVML constants, with the values of nvidia-ml-py, for modules that lack some of them
_NVML_SUCCESS = 0
_ERR_NOT_SUPPORTED = 3
_ERR_NO_PERMISSION = 4
_ERR_NOT_FOUND = 6
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_GPU_NOT_FOUND = 28
_TOTAL_POWER_SAMPLES = 0
_FI_DEV_POWER_AVERAGE = 185
_POWER_SCOPE_MEMORY = 2

CHANNEL_NOTES = {
    "total": "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES): the driver's buffered power samples, mW, "
    "host wall-clock timestamps",
    "memory": "field NVML_FI_DEV_POWER_AVERAGE, scopeId NVML_POWER_SCOPE_MEMORY: an AVERAGE over an "
    "undocumented window (changes ~every 100 ms on H200), recorded when it changes",
}


# --------------------------------------------------------------------------- the library and its errors
def load_nvml(module_name: str = "pynvml") -> Any:
    """Import pynvml (or a stand-in named `module_name`); BackendUnavailableError when missing."""
    try:
        nvml = importlib.import_module(module_name)
    except ImportError as exc:
        raise BackendUnavailableError(
            f"NVML backend: cannot import {module_name!r} ({exc}); {INSTALL_HINT}"
        ) from exc
    if nvml is None or not hasattr(nvml, "nvmlInit"):
        raise BackendUnavailableError(
            f"NVML backend: {module_name!r} is not NVIDIA's pynvml (no nvmlInit); {INSTALL_HINT}"
        )
    return nvml


def nvml_code(nvml: Any, name: str, default: int) -> int:
    """An NVML constant from `nvml`, or its nvidia-ml-py value when the module lacks it."""
    value = getattr(nvml, name, default)
    return int(value) if isinstance(value, int) else default


def _error_text(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ calls into the library, which may be gone
        text = ""
    code = getattr(exc, "value", None)
    text = text or type(exc).__name__
    return f"{text} (NVML error {code})" if code is not None else text


def wrap_nvml_error(nvml: Any, exc: BaseException, what: str) -> FingravError:
    """The fingrav error for an NVMLError raised by `what` (a call description)."""
    code = getattr(exc, "value", None)
    text = _error_text(exc)
    if code in (nvml_code(nvml, "NVML_ERROR_LIBRARY_NOT_FOUND", _ERR_LIBRARY_NOT_FOUND),
                nvml_code(nvml, "NVML_ERROR_DRIVER_NOT_LOADED", _ERR_DRIVER_NOT_LOADED)):
        return BackendUnavailableError(
            f"{what}: the NVIDIA driver / libnvidia-ml.so.1 is not available ({text}); "
            "is this a machine with an NVIDIA GPU and its driver installed?"
        )
    if code == nvml_code(nvml, "NVML_ERROR_GPU_NOT_FOUND", _ERR_GPU_NOT_FOUND):
        return BackendUnavailableError(f"{what}: no such NVIDIA GPU ({text})")
    if code == nvml_code(nvml, "NVML_ERROR_NO_PERMISSION", _ERR_NO_PERMISSION):
        return DeviceError(f"{what} failed: {text}; the user lacks the permission for this NVML query")
    if code == nvml_code(nvml, "NVML_ERROR_GPU_IS_LOST", _ERR_GPU_IS_LOST):
        return DeviceError(f"{what} failed: {text}; the GPU fell off the bus or needs a reset")
    return DeviceError(f"{what} failed: {text}")


@contextlib.contextmanager
def nvml_errors(nvml: Any, what: str) -> Iterator[None]:
    """Turn an NVMLError raised inside the block into one fingrav error (the only place that does)."""
    err_cls = getattr(nvml, "NVMLError", None)
    try:
        yield
    except FingravError:
        raise
    except Exception as exc:
        if err_cls is not None and isinstance(exc, err_cls):
            raise wrap_nvml_error(nvml, exc, what) from exc
        raise


def nvml_call(nvml: Any, name: str, *args: Any) -> Any:
    """`nvml.<name>(*args)` with errors wrapped; a function the installed pynvml lacks is a DeviceError."""
    fn = getattr(nvml, name, None)
    if fn is None:
        raise DeviceError(f"pynvml has no {name}(): nvidia-ml-py is too old; {INSTALL_HINT}")
    with nvml_errors(nvml, name):
        return fn(*args)


def is_nvml_error(nvml: Any, exc: BaseException, code_name: str, default: int) -> bool:
    """True when `exc` is an NVMLError with the code `code_name`."""
    err_cls = getattr(nvml, "NVMLError", None)
    return (err_cls is not None and isinstance(exc, err_cls)
            and getattr(exc, "value", None) == nvml_code(nvml, code_name, default))


def init_nvml(nvml: Any) -> None:
    """nvmlInit with a clear message when the driver is missing."""
    nvml_call(nvml, "nvmlInit")


def shutdown_nvml(nvml: Any) -> None:
    """nvmlShutdown, logging (not raising) a failure: used on the way out."""
    try:
        nvml_call(nvml, "nvmlShutdown")
    except FingravError as exc:
        logger.warning("nvmlShutdown: %s", exc)


def normalize_uuid(uuid: str) -> str:
    """'GPU-1a2b...' / '1A2B...' -> '1a2b...' (NVML prefixes GPU-/MIG-, CUDA prints none)."""
    u = uuid.strip().lower()
    for prefix in ("gpu-", "mig-"):
        if u.startswith(prefix):
            u = u[len(prefix):]
    return u


def open_handle(nvml: Any, index: int | None = 0, uuid: str | None = None) -> tuple[int, Any]:
    """(NVML index, handle) of the GPU with this `uuid` (preferred) or NVML `index`.

    NVML indices ignore CUDA_VISIBLE_DEVICES; a UUID names the same GPU in CUDA and NVML."""
    count = int(nvml_call(nvml, "nvmlDeviceGetCount"))
    if count <= 0:
        raise BackendUnavailableError("NVML backend: the NVIDIA driver is loaded but NVML sees no GPU")
    if uuid:
        want = normalize_uuid(uuid)
        seen = []
        for i in range(count):
            handle = nvml_call(nvml, "nvmlDeviceGetHandleByIndex", i)
            got = str(nvml_call(nvml, "nvmlDeviceGetUUID", handle))
            seen.append(got)
            if normalize_uuid(got) == want:
                return i, handle
        raise BackendUnavailableError(f"NVML backend: no GPU with UUID {uuid!r} (NVML sees {seen})")
    index = 0 if index is None else int(index)
    if not 0 <= index < count:
        raise BackendUnavailableError(f"NVML backend: GPU index {index} does not exist (NVML sees {count} GPUs)")
    return index, nvml_call(nvml, "nvmlDeviceGetHandleByIndex", index)


def value_of(value: Any, value_type: int) -> float:
    """The number in a c_nvmlValue_t union, read through its NVML_VALUE_TYPE_* tag."""
    member = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
        int(value_type), "uiVal"
    )
    return float(getattr(value, member))


def read_memory_power(nvml: Any, handle: Any) -> tuple[int, float] | None:
    """(field timestamp in us, memory-scope average power in mW), or None when the GPU answers
    'not supported' for it. NVML errors of the call itself are wrapped (DeviceError)."""
    field_id = nvml_code(nvml, "NVML_FI_DEV_POWER_AVERAGE", _FI_DEV_POWER_AVERAGE)
    scope = nvml_code(nvml, "NVML_POWER_SCOPE_MEMORY", _POWER_SCOPE_MEMORY)
    fv = nvml_call(nvml, "nvmlDeviceGetFieldValues", handle, [(field_id, scope)])[0]
    ret = int(getattr(fv, "nvmlReturn", _NVML_SUCCESS))
    if ret != _NVML_SUCCESS:
        if ret == nvml_code(nvml, "NVML_ERROR_NOT_SUPPORTED", _ERR_NOT_SUPPORTED):
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


# --------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class SamplerConfig:
    """Settings of one sampler (JSON-able; travels to the child process).

    nvml_index / uuid: the GPU (uuid preferred when given); interval_ms: period of the drains of the
    NVML sample buffer (<= 50 ms, or samples are lost); memory: poll the memory-scope average power
    field as channel "memory"; memory_interval_ms: its poll period; gap_factor: an interval longer
    than this x the median period is a gap; history_ms: on start, also keep samples stamped up to this
    long before the start; max_consecutive_errors: failed polls in a row that stop the sampler;
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
            logger.warning("interval_ms=%.1f > 50 ms: the NVML sample buffer may overflow between drains",
                           self.interval_ms)
        if self.memory_interval_ms <= 0:
            raise ValueError(f"memory_interval_ms={self.memory_interval_ms}: must be > 0")
        if self.gap_factor <= 1.0:
            raise ValueError(f"gap_factor={self.gap_factor}: must be > 1")
        if self.max_consecutive_errors < 1:
            raise ValueError("max_consecutive_errors must be >= 1")

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------- gap detection
class GapDetector:
    """Incremental check of one channel's sample timestamps for holes.

    feed() the timestamps in order; an interval longer than `factor` x the median of the last
    `history` intervals is a gap. Intervals seen before `min_intervals` are known wait and are checked
    as soon as the median exists. take() returns the gaps found since the last take()."""

    def __init__(self, factor: float = 2.5, min_intervals: int = MIN_INTERVALS_FOR_GAPS,
                 history: int = PERIOD_HISTORY) -> None:
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
                logger.warning("NVML power samples: gap of %.1f ms (median period %.1f ms)",
                               (b - a) / 1e6, period / 1e6)
        self._unchecked.clear()

    def take(self) -> list[tuple[int, int]]:
        out, self._gaps = self._gaps, []
        return out


# --------------------------------------------------------------------------- the poller (pure logic)
class PowerPoller:
    """Drains the NVML power sample buffer of one GPU; the logic of the sampler, usable in-process.

    `nvml`: the pynvml module (or a fake); `handle`: its device handle; `clock_ns`: the host clock
    (time.time_ns, the clock NVML stamps samples with). Call start(), then poll() every
    `config.interval_ms`, and take() whenever the samples are wanted."""

    def __init__(self, nvml: Any, handle: Any, config: SamplerConfig,
                 clock_ns: Callable[[], int] = time.time_ns) -> None:
        self.nvml = nvml
        self.handle = handle
        self.config = config
        self.clock_ns = clock_ns
        self._sample_type = nvml_code(nvml, "NVML_TOTAL_POWER_SAMPLES", _TOTAL_POWER_SAMPLES)
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
        self.stats: dict[str, Any] = {
            "polls": 0, "samples": 0, "memory_samples": 0, "not_found": 0, "duplicates": 0,
            "errors": 0, "memory_errors": 0, "gaps": 0, "max_poll_ns": 0, "max_poll_interval_ns": 0,
            "late_polls": 0, "max_batch": 0, "period_ns": None, "memory_disabled": None, "warnings": [],
        }
        self._last_poll_ns: int | None = None

    @property
    def running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Begin a sampling period: only samples stamped after now - history_ms are kept."""
        now = self.clock_ns()
        self._last_ts_us = max(0, (now - int(self.config.history_ms * 1e6)) // 1000)
        self._gaps.reset()
        self._mem_last = None
        self._mem_due_ns = 0
        self._last_poll_ns = None
        self._running = True

    def stop(self) -> None:
        self._running = False

    def _warn(self, msg: str) -> None:
        logger.warning(msg)
        warnings = self.stats["warnings"]
        if len(warnings) < 50:
            warnings.append(msg)

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
        now = self.clock_ns()
        if self._last_poll_ns is not None:
            gap = now - self._last_poll_ns
            self.stats["max_poll_interval_ns"] = max(self.stats["max_poll_interval_ns"], gap)
            if gap > 3 * self.config.interval_ms * 1e6:
                self.stats["late_polls"] += 1
        self._last_poll_ns = now
        self.stats["polls"] += 1
        n_new = 0
        try:
            n_new = self._poll_total()
        except FingravError as exc:
            self._failed(exc, "nvmlDeviceGetSamples(TOTAL_POWER)")
        else:
            self._consecutive_errors = 0
        if self._memory and now >= self._mem_due_ns:
            self._mem_due_ns = now + int(self.config.memory_interval_ms * 1e6)
            self._poll_memory(now)
        self.stats["max_poll_ns"] = max(self.stats["max_poll_ns"], time.perf_counter_ns() - t0)
        return n_new

    def _poll_total(self) -> int:
        nvml = self.nvml
        try:
            value_type, samples = nvml.nvmlDeviceGetSamples(self.handle, self._sample_type, self._last_ts_us)
        except Exception as exc:
            if is_nvml_error(nvml, exc, "NVML_ERROR_NOT_FOUND", _ERR_NOT_FOUND):
                self.stats["not_found"] += 1  # no sample newer than last_ts: normal
                return 0
            err_cls = getattr(nvml, "NVMLError", None)
            if err_cls is not None and isinstance(exc, err_cls):
                raise wrap_nvml_error(nvml, exc, "nvmlDeviceGetSamples(NVML_TOTAL_POWER_SAMPLES)") from exc
            raise
        if not samples:
            return 0
        self.stats["max_batch"] = max(self.stats["max_batch"], len(samples))
        pairs = sorted({int(s.timeStamp): value_of(s.sampleValue, value_type) for s in samples}.items())
        fresh = [(ts, v) for ts, v in pairs if ts > self._last_ts_us]
        self.stats["duplicates"] += len(samples) - len(fresh)
        if not fresh:
            return 0
        self._last_ts_us = fresh[-1][0]
        t_ns = [ts * 1000 for ts, _ in fresh]
        self._t.extend(t_ns)
        self._p.extend(v for _, v in fresh)
        self._gaps.feed(t_ns)
        self.stats["samples"] += len(fresh)
        self.stats["period_ns"] = self._gaps.period_ns
        return len(fresh)

    def _poll_memory(self, now: int) -> None:
        try:
            got = read_memory_power(self.nvml, self.handle)
        except FingravError as exc:
            got = exc  # type: ignore[assignment]
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
        if self._mem_last is not None and mw == self._mem_last:
            return
        self._mem_last = mw
        self._mt.append(ts_us * 1000 if ts_us > 0 else now)
        self._mp.append(mw)
        self.stats["memory_samples"] += 1

    def take(self) -> PowerSamples:
        """The samples collected since the last take(): "total" then "memory", each in time order,
        with the gaps found since the last take()."""
        t = np.asarray(self._t + self._mt, dtype=np.int64)
        ch = np.array(["total"] * len(self._t) + ["memory"] * len(self._mt), dtype=object)
        p = np.asarray(self._p + self._mp, dtype=np.float64)
        self._t, self._p, self._mt, self._mp = [], [], [], []
        gaps = self._gaps.take()
        self.stats["gaps"] += len(gaps)
        return PowerSamples(t, ch, p, gaps)


# --------------------------------------------------------------------------- the sampler's loop
def run_loop(conn: Any, poller: PowerPoller, interval_ms: float) -> None:
    """Serve requests from `conn` and poll every `interval_ms` while sampling.

    Requests: ("start",) -> ("ok", stats); ("drain",) / ("stop",) -> ("samples", PowerSamples, stats);
    ("stats",) -> ("ok", stats); ("close",) -> ("ok", stats), then return. After a fatal poll error,
    requests that want samples are answered ("error", "DeviceError", message)."""
    period = interval_ms * 1e-3
    next_poll = time.monotonic()
    while True:
        timeout = max(0.0, next_poll - time.monotonic()) if poller.running else None
        try:
            ready = conn.poll(timeout)
        except (EOFError, OSError):
            return
        if ready:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            cmd = msg[0] if isinstance(msg, tuple | list) and msg else msg
            if cmd == "close":
                conn.send(("ok", poller.stats))
                return
            if cmd == "start":
                poller.fatal = None
                poller.start()
                next_poll = time.monotonic()
                conn.send(("ok", poller.stats))
            elif cmd in ("drain", "stop"):
                if poller.running:
                    with contextlib.suppress(DeviceError):
                        poller.poll()
                if poller.fatal is not None:
                    conn.send(("error", "DeviceError", poller.fatal))
                    poller.take()
                    continue
                if cmd == "stop":
                    poller.stop()
                conn.send(("samples", poller.take(), poller.stats))
            elif cmd == "stats":
                conn.send(("ok", poller.stats))
            else:
                conn.send(("error", "DeviceError", f"NVML sampler: unknown request {msg!r}"))
            continue
        if not poller.running:
            continue
        with contextlib.suppress(DeviceError):  # recorded in poller.fatal, reported at the next drain
            poller.poll()
        next_poll += period
        now = time.monotonic()
        if next_poll < now:  # late (descheduled): do not burst to catch up, the buffer holds seconds
            next_poll = now + period


def sampler_main(conn: Any, config: SamplerConfig) -> None:
    """Entry point of the sampler (child process or thread): set NVML up, answer ("ready", info) or
    ("error", kind, message), then serve requests until "close" or until the parent goes away."""
    nvml = None
    initialized = False
    try:
        try:
            nvml = load_nvml(config.nvml_module)
            init_nvml(nvml)
            initialized = True
            index, handle = open_handle(nvml, config.nvml_index, config.uuid)
            poller = PowerPoller(nvml, handle, config)
        except FingravError as exc:
            conn.send(("error", type(exc).__name__, str(exc)))
            return
        except Exception as exc:  # anything else: report it rather than die silently
            conn.send(("error", "DeviceError", f"NVML sampler failed to start: {type(exc).__name__}: {exc}"))
            return
        conn.send(("ready", {"nvml_index": index, "config": config.as_dict()}))
        run_loop(conn, poller, config.interval_ms)
    finally:
        if initialized:
            shutdown_nvml(nvml)
        with contextlib.suppress(Exception):
            conn.close()


# --------------------------------------------------------------------------- the parent's side
_ERRORS: dict[str, type[FingravError]] = {
    "BackendUnavailableError": BackendUnavailableError,
    "DeviceError": DeviceError,
}


class NVMLSampler:
    """The parent's handle on the sampler process (or thread, `mode="thread"`).

    open() starts the child (done by start() when needed) and waits for it to be ready; start() begins
    a sampling period; drain() returns the samples logged since the last drain; stop() ends the period
    and returns what was not drained; close() ends the child. The child stays alive between periods, idle
    (blocked on the pipe), so that a stopped sampler costs nothing. `stats` holds the child's counters
    as of the last answer (polls, samples, gaps, late polls, max poll time in ns, warnings, ...)."""

    def __init__(self, config: SamplerConfig, mode: Literal["process", "thread"] = "process",
                 start_timeout_s: float = 60.0, reply_timeout_s: float = 30.0) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"mode={mode!r}: 'process' or 'thread'")
        self.config = config
        self.mode = mode
        self.start_timeout_s = start_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self.stats: dict[str, Any] = {}
        self.info: dict[str, Any] = {}
        self._conn: Any = None
        self._worker: Any = None
        self._sampling = False
        self._warned = 0

    @property
    def alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    @property
    def sampling(self) -> bool:
        return self._sampling

    def open(self) -> dict[str, Any]:
        """Start the child and wait until NVML is set up there; returns its ready info."""
        if self._conn is not None:
            return self.info
        if self.mode == "process":
            ctx = multiprocessing.get_context("spawn")
            parent, child = ctx.Pipe(duplex=True)
            worker: Any = ctx.Process(target=sampler_main, args=(child, self.config), name="fingrav-nvml-sampler",
                                      daemon=True)
        else:
            parent, child = multiprocessing.Pipe(duplex=True)
            worker = threading.Thread(target=sampler_main, args=(child, self.config), name="fingrav-nvml-sampler",
                                      daemon=True)
        worker.start()
        if self.mode == "process":
            child.close()  # the child holds its own copy
        self._conn, self._worker = parent, worker
        try:
            kind, payload = self._receive(self.start_timeout_s, "start")
        except BaseException:
            self._abandon()
            raise
        self.info = payload
        logger.info("NVML sampler ready (%s mode, NVML index %s, every %.1f ms, memory channel %s)",
                    self.mode, payload.get("nvml_index"), self.config.interval_ms, self.config.memory)
        return self.info

    def _receive(self, timeout_s: float, what: str) -> tuple[str, Any]:
        conn = self._conn
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                if conn.poll(min(max(left, 0.0), 0.5)):
                    reply = conn.recv()
                    break
            except (EOFError, OSError) as exc:
                raise DeviceError(f"NVML sampler ({what}): the sampler {self.mode} went away") from exc
            if not self.alive:
                code = getattr(self._worker, "exitcode", None)
                raise DeviceError(f"NVML sampler ({what}): the sampler {self.mode} died (exit code {code})")
            if left <= 0:
                raise DeviceError(f"NVML sampler ({what}): no answer within {timeout_s:.0f} s")
        if reply[0] == "error":
            raise _ERRORS.get(reply[1], DeviceError)(reply[2])
        if len(reply) >= 3 and isinstance(reply[-1], dict):
            self._take_stats(reply[-1])
        elif reply[0] == "ok" and isinstance(reply[1], dict):
            self._take_stats(reply[1])
        return reply[0], reply[1]

    def _take_stats(self, stats: dict[str, Any]) -> None:
        self.stats = stats
        warnings = stats.get("warnings", [])
        for msg in warnings[self._warned:]:
            logger.warning("NVML sampler: %s", msg)
        self._warned = len(warnings)

    def _request(self, cmd: str) -> tuple[str, Any]:
        if self._conn is None:
            self.open()
        try:
            self._conn.send((cmd,))
        except (OSError, EOFError, BrokenPipeError) as exc:
            raise DeviceError(f"NVML sampler ({cmd}): the sampler {self.mode} went away") from exc
        return self._receive(self.reply_timeout_s, cmd)

    def start(self) -> None:
        self._request("start")
        self._sampling = True

    def drain(self) -> PowerSamples:
        if self._conn is None:
            return PowerSamples.empty()
        kind, samples = self._request("drain")
        return samples if kind == "samples" else PowerSamples.empty()

    def stop(self) -> PowerSamples:
        if self._conn is None:
            return PowerSamples.empty()
        self._sampling = False
        kind, samples = self._request("stop")
        return samples if kind == "samples" else PowerSamples.empty()

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask the child to exit; terminate it (this process's own child, by handle) if it does not."""
        if self._conn is None:
            return
        try:
            self._conn.send(("close",))
            if self._conn.poll(timeout_s):
                reply = self._conn.recv()
                if reply and reply[0] == "ok" and isinstance(reply[1], dict):
                    self._take_stats(reply[1])
        except (OSError, EOFError, BrokenPipeError):
            pass
        self._abandon(timeout_s)

    def _abandon(self, timeout_s: float = 5.0) -> None:
        worker, conn = self._worker, self._conn
        self._worker = self._conn = None
        self._sampling = False
        if worker is not None:
            worker.join(timeout_s)
            if self.mode == "process" and worker.is_alive():
                logger.warning("NVML sampler process did not exit; terminating it")
                worker.terminate()
                worker.join(timeout_s)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> NVMLSampler:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
