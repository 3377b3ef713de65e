"""A fake of NVIDIA's `pynvml` (package nvidia-ml-py 13.x) for tests without a GPU.

Same names as the real module for what fingrav uses: constants (NVML_SUCCESS, NVML_ERROR_*,
NVML_TOTAL_POWER_SAMPLES, NVML_FI_DEV_POWER_AVERAGE / _INSTANT, NVML_POWER_SCOPE_*, NVML_VALUE_TYPE_*),
`NVMLError` whose constructor returns the per-code subclass (`NVMLError(6)` is an `NVMLError_NotFound`,
`.value` holds the code), ctypes structures laid out as the real ones (`c_nvmlValue_t`, `c_nvmlSample_t`
with `.timeStamp` / `.sampleValue.uiVal`, `c_nvmlFieldValue_t` with `.nvmlReturn`, `.timestamp`,
`.valueType`, `.value`), and the functions (nvmlInit, nvmlDeviceGetSamples, nvmlDeviceGetFieldValues,
nvmlDeviceGetTotalEnergyConsumption, ...). Behaviour follows the real library:

* `nvmlDeviceGetSamples(h, NVML_TOTAL_POWER_SAMPLES, last_ts_us)` returns
  `(NVML_VALUE_TYPE_UNSIGNED_INT, [c_nvmlSample_t, ...])` for the samples still in the driver's ring
  buffer with timeStamp > last_ts_us, timestamps in host wall-clock us; raises NVMLError_NotFound when
  there is none.
* the buffer holds `buffer_size` samples: draining less often than `buffer_size * period_ms` loses
  samples (a gap), like the real one.

The state is module-global (`STATE`, a `FakeGPU`); `configure(**kwargs)` resets it with new settings.
A child process (spawn) that imports this module reads its settings from the environment variable
`FAKE_PYNVML_CONFIG` (JSON with the same keys), so tests can configure the fake in a sampler process.
"""

from __future__ import annotations

import json
import math
import os
import random
import string
import sys
import threading
import time
from collections.abc import Callable
from ctypes import (
    Structure,
    Union,
    c_double,
    c_int,
    c_int64,
    c_longlong,
    c_uint,
    c_uint32,
    c_ulong,
    c_ulonglong,
    c_ushort,
)
from dataclasses import dataclass, field
from typing import Any

FAKE = True  # lets a test tell the fake from the real module

# ---------------------------------------------------------------------------------- constants (real values)
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_UNKNOWN = 999

NVML_VALUE_TYPE_DOUBLE = 0
NVML_VALUE_TYPE_UNSIGNED_INT = 1
NVML_VALUE_TYPE_UNSIGNED_LONG = 2
NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3
NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4
NVML_VALUE_TYPE_SIGNED_INT = 5
NVML_VALUE_TYPE_UNSIGNED_SHORT = 6

NVML_TOTAL_POWER_SAMPLES = 0
NVML_GPU_UTILIZATION_SAMPLES = 1
NVML_MEMORY_UTILIZATION_SAMPLES = 2
NVML_ENC_UTILIZATION_SAMPLES = 3
NVML_DEC_UTILIZATION_SAMPLES = 4
NVML_PROCESSOR_CLK_SAMPLES = 5
NVML_MEMORY_CLK_SAMPLES = 6
NVML_MODULE_POWER_SAMPLES = 7

NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION = 83
NVML_FI_DEV_POWER_AVERAGE = 185
NVML_FI_DEV_POWER_INSTANT = 186

NVML_POWER_SCOPE_GPU = 0
NVML_POWER_SCOPE_MODULE = 1
NVML_POWER_SCOPE_MEMORY = 2


# ---------------------------------------------------------------------------------- errors (as the real module)
class NVMLError(Exception):
    _valClassMapping: dict[int, type] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_GPU_NOT_FOUND: "GPU not found",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value: int):  # noqa: N804 - mirrors pynvml
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return NVMLError._errcode_to_string.get(self.value, f"NVML Error with code {self.value}")

    def __eq__(self, other: object) -> bool:
        return self.value == getattr(other, "value", None)

    __hash__ = Exception.__hash__


def _extract_errors_as_classes() -> None:
    """NVML_ERROR_NOT_FOUND -> class NVMLError_NotFound(NVMLError), as pynvml does."""
    this = sys.modules[__name__]
    for err_name in [x for x in dir(this) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this, err_name)

        def gen_new(val: int) -> Callable[..., Any]:
            def new(typ: type, *args: Any) -> Any:
                return NVMLError.__new__(typ, val)

            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = __name__
        setattr(this, class_name, cls)
        NVMLError._valClassMapping[err_val] = cls


_extract_errors_as_classes()


def nvmlErrorString(result: int) -> str:  # noqa: N802
    return NVMLError._errcode_to_string.get(result, "Unknown Error")


# ---------------------------------------------------------------------------------- structures (as the real module)
class c_nvmlValue_t(Union):  # noqa: N801
    _fields_ = [
        ("dVal", c_double),
        ("uiVal", c_uint),
        ("ulVal", c_ulong),
        ("ullVal", c_ulonglong),
        ("sllVal", c_longlong),
        ("siVal", c_int),
        ("usVal", c_ushort),
    ]


class c_nvmlSample_t(Structure):  # noqa: N801
    _fields_ = [("timeStamp", c_ulonglong), ("sampleValue", c_nvmlValue_t)]


class c_nvmlFieldValue_t(Structure):  # noqa: N801
    _fields_ = [
        ("fieldId", c_uint32),
        ("scopeId", c_uint32),
        ("timestamp", c_int64),
        ("latencyUsec", c_int64),
        ("valueType", c_uint),
        ("nvmlReturn", c_uint),
        ("value", c_nvmlValue_t),
    ]


class c_nvmlDevice_t:  # noqa: N801 - the real one is a ctypes pointer; an opaque object is enough
    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<fake nvmlDevice {self.index}>"


# ---------------------------------------------------------------------------------- the simulated GPU
def _default_power_mw(t_ns: int) -> float:
    """121 W idle with a slow 5 W ripple: values change from sample to sample."""
    return 121_000.0 + 5_000.0 * math.sin(t_ns / 1e9)


@dataclass
class FakeGPU:
    """Settings and state of the fake driver (all GPUs alike).

    period_ms / jitter_ms: spacing of the power samples (uniform jitter, deterministic per sample);
    buffer_size: samples the driver keeps; delay_ms: a sample becomes visible this long after its stamp;
    power_mw: f(t_ns) -> mW; memory_supported / memory_mw / memory_update_ms: the memory-scope average
    power field; energy_supported; clock_ns: the host clock (time.time_ns; tests may drive it);
    init_error: NVML code nvmlInit raises; errors: {function name: [codes raised by its next calls]};
    field_errors: per-field nvmlReturn codes for the next memory-field reads; drop: sample indices that
    are never published (holes without overflow); serial_error: code nvmlDeviceGetSerial raises.
    """

    device_count: int = 1
    name: str = "NVIDIA H200 (fake)"
    uuids: tuple[str, ...] = ("GPU-00000000-1111-2222-3333-444444444444", "GPU-55555555-6666-7777-8888-999999999999")
    period_ms: float = 20.0
    jitter_ms: float = 0.0
    buffer_size: int = 120
    delay_ms: float = 0.0
    power_mw: Callable[[int], float] = _default_power_mw
    memory_supported: bool = True
    memory_mw: float = 40_500.0
    memory_update_ms: float = 100.0
    energy_supported: bool = True
    clock_ns: Callable[[], int] = time.time_ns
    init_error: int | None = None
    errors: dict[str, list[int]] = field(default_factory=dict)
    field_errors: list[int] = field(default_factory=list)
    drop: set[int] = field(default_factory=set)
    serial_error: int | None = NVML_ERROR_NO_PERMISSION
    seed: int = 0
    # sampler faults real drivers show: {sample index: "zero" | "all_ones" | "conflict" (the sample is delivered
    # twice, the copy with another value) | "backwards" (stamped 1 ms before the previous sample)}; value_type:
    # the NVML_VALUE_TYPE the buffer claims
    faults: dict[int, str] = field(default_factory=dict)
    value_type: int = 1
    # state
    t0_ns: int = 0
    initialized: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.t0_ns:
            self.t0_ns = int(self.clock_ns())

    # sample k is stamped at t0 + k * period (+ jitter); integer ns
    def sample_time_ns(self, k: int) -> int:
        t = self.t0_ns + k * int(round(self.period_ms * 1e6))  # integers: epoch ns overflow float precision
        if self.jitter_ms:
            t += int(random.Random(self.seed * 1_000_003 + k).uniform(-self.jitter_ms, self.jitter_ms) * 1e6)
        return t

    def latest_index(self, now_ns: int) -> int:
        """Index of the newest sample visible at `now_ns` (-1 if none)."""
        visible = now_ns - int(self.delay_ms * 1e6)
        k = int((visible - self.t0_ns) // (self.period_ms * 1e6))
        while self.sample_time_ns(k + 1) <= visible:
            k += 1
        while k >= 0 and self.sample_time_ns(k) > visible:
            k -= 1
        return k

    def buffered(self, now_ns: int) -> list[int]:
        """Indices of the samples still in the driver's ring buffer."""
        last = self.latest_index(now_ns)
        if last < 0:
            return []
        first = max(0, last - self.buffer_size + 1)
        return [k for k in range(first, last + 1) if k not in self.drop]

    def memory_value_mw(self, now_ns: int) -> tuple[int, float]:
        """(time of the last update, value) of the memory-scope average: changes every update."""
        n = int((now_ns - self.t0_ns) // (self.memory_update_ms * 1e6))
        return self.t0_ns + int(n * self.memory_update_ms * 1e6), self.memory_mw + 100.0 * (n % 7)

    def check(self, fn: str) -> None:
        """Count the call; raise the next injected error for `fn`, if any."""
        self.calls[fn] = self.calls.get(fn, 0) + 1
        queue = self.errors.get(fn)
        if queue:
            raise NVMLError(queue.pop(0))


def _from_env() -> FakeGPU:
    raw = os.environ.get("FAKE_PYNVML_CONFIG")
    if not raw:
        return FakeGPU()
    cfg = json.loads(raw)
    if "drop" in cfg:
        cfg["drop"] = set(cfg["drop"])
    if "uuids" in cfg:
        cfg["uuids"] = tuple(cfg["uuids"])
    return FakeGPU(**cfg)


STATE: FakeGPU = _from_env()


def configure(**kwargs: Any) -> FakeGPU:
    """Replace the fake driver's state with a fresh one built from `kwargs` (FakeGPU fields)."""
    global STATE
    STATE = FakeGPU(**kwargs)
    return STATE


def _handle_index(handle: Any) -> int:
    if not isinstance(handle, c_nvmlDevice_t) or not 0 <= handle.index < STATE.device_count:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return handle.index


def _needs_init(fn: str) -> FakeGPU:
    s = STATE
    if not s.initialized:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)
    s.check(fn)
    return s


# ---------------------------------------------------------------------------------- the API
def nvmlInit() -> None:  # noqa: N802
    s = STATE
    s.calls["nvmlInit"] = s.calls.get("nvmlInit", 0) + 1
    if s.init_error is not None:
        raise NVMLError(s.init_error)
    s.check("nvmlInit")
    s.initialized += 1


def nvmlInitWithFlags(flags: int) -> None:  # noqa: N802
    nvmlInit()


def nvmlShutdown() -> None:  # noqa: N802
    s = _needs_init("nvmlShutdown")
    s.initialized -= 1


def nvmlSystemGetDriverVersion() -> str:  # noqa: N802
    _needs_init("nvmlSystemGetDriverVersion")
    return "580.159.04"


def nvmlSystemGetNVMLVersion() -> str:  # noqa: N802
    _needs_init("nvmlSystemGetNVMLVersion")
    return "13.580.159.04"


def nvmlSystemGetCudaDriverVersion() -> int:  # noqa: N802
    _needs_init("nvmlSystemGetCudaDriverVersion")
    return 13000


def nvmlDeviceGetCount() -> int:  # noqa: N802
    return _needs_init("nvmlDeviceGetCount").device_count


def nvmlDeviceGetHandleByIndex(index: int) -> c_nvmlDevice_t:  # noqa: N802
    s = _needs_init("nvmlDeviceGetHandleByIndex")
    if not 0 <= int(index) < s.device_count:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return c_nvmlDevice_t(int(index))


def nvmlDeviceGetHandleByUUID(uuid: str | bytes) -> c_nvmlDevice_t:  # noqa: N802
    s = _needs_init("nvmlDeviceGetHandleByUUID")
    u = uuid.decode() if isinstance(uuid, bytes) else uuid
    for i in range(s.device_count):
        if s.uuids[i] == u:
            return c_nvmlDevice_t(i)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetName(handle: Any) -> str:  # noqa: N802
    s = _needs_init("nvmlDeviceGetName")
    _handle_index(handle)
    return s.name


def nvmlDeviceGetUUID(handle: Any) -> str:  # noqa: N802
    s = _needs_init("nvmlDeviceGetUUID")
    return s.uuids[_handle_index(handle)]


def nvmlDeviceGetSerial(handle: Any) -> str:  # noqa: N802
    s = _needs_init("nvmlDeviceGetSerial")
    _handle_index(handle)
    if s.serial_error is not None:
        raise NVMLError(s.serial_error)
    return f"165{_handle_index(handle):010d}"


def nvmlDeviceGetPowerManagementLimit(handle: Any) -> int:  # noqa: N802
    _needs_init("nvmlDeviceGetPowerManagementLimit")
    _handle_index(handle)
    return 700_000


def nvmlDeviceGetEnforcedPowerLimit(handle: Any) -> int:  # noqa: N802
    _needs_init("nvmlDeviceGetEnforcedPowerLimit")
    _handle_index(handle)
    return 700_000


def nvmlDeviceGetPowerUsage(handle: Any) -> int:  # noqa: N802
    s = _needs_init("nvmlDeviceGetPowerUsage")
    _handle_index(handle)
    return int(s.power_mw(int(s.clock_ns())))


def nvmlDeviceGetTotalEnergyConsumption(handle: Any) -> int:  # noqa: N802
    s = _needs_init("nvmlDeviceGetTotalEnergyConsumption")
    _handle_index(handle)
    if not s.energy_supported:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    # 121 W since t0, plus a large boot-time offset: mJ = W * ms
    return 10_000_000_000 + int(121.0 * (int(s.clock_ns()) - s.t0_ns) / 1e6)


def nvmlDeviceGetSamples(device: Any, sampling_type: int, timeStamp: int) -> tuple[int, list[c_nvmlSample_t]]:  # noqa: N802, N803
    s = _needs_init("nvmlDeviceGetSamples")
    _handle_index(device)
    with s.lock:
        now = int(s.clock_ns())
        if sampling_type != NVML_TOTAL_POWER_SAMPLES:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        out = []
        for k in s.buffered(now):
            t_ns = s.sample_time_ns(k)
            ts_us = t_ns // 1000
            if ts_us <= int(timeStamp):
                continue
            fault = s.faults.get(k)
            if fault == "backwards" and k > 0:
                ts_us = s.sample_time_ns(k - 1) // 1000 - 1000
            sample = c_nvmlSample_t()
            sample.timeStamp = ts_us
            value = int(round(s.power_mw(t_ns)))
            sample.sampleValue.uiVal = {"zero": 0, "all_ones": 0xFFFFFFFF}.get(fault or "", value)
            out.append(sample)
            if fault == "conflict":
                twin = c_nvmlSample_t()
                twin.timeStamp = ts_us
                twin.sampleValue.uiVal = value + 50_000
                out.append(twin)
    if not out:
        raise NVMLError(NVML_ERROR_NOT_FOUND)
    return s.value_type, out


def nvmlDeviceGetFieldValues(handle: Any, fieldIds: list[Any]) -> list[c_nvmlFieldValue_t]:  # noqa: N802, N803
    s = _needs_init("nvmlDeviceGetFieldValues")
    _handle_index(handle)
    now = int(s.clock_ns())
    values = (c_nvmlFieldValue_t * len(fieldIds))()
    for i, fid in enumerate(fieldIds):
        try:
            field_id, scope = fid
        except TypeError:
            field_id, scope = fid, 0
        v = values[i]
        v.fieldId, v.scopeId = field_id, scope
        v.timestamp = now // 1000
        v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT
        if field_id == NVML_FI_DEV_POWER_AVERAGE and scope == NVML_POWER_SCOPE_MEMORY:
            if s.field_errors:
                v.nvmlReturn = s.field_errors.pop(0)
            elif not s.memory_supported:
                v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
            else:
                t_upd, mw = s.memory_value_mw(now)
                v.timestamp = t_upd // 1000
                v.value.uiVal = int(mw)
                v.nvmlReturn = NVML_SUCCESS
        elif field_id in (NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT) and scope == NVML_POWER_SCOPE_GPU:
            v.value.uiVal = int(s.power_mw(now))
            v.nvmlReturn = NVML_SUCCESS
        elif field_id == NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
            v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            v.value.ullVal = nvmlDeviceGetTotalEnergyConsumption(handle)
            v.nvmlReturn = NVML_SUCCESS
        else:
            v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
    return values
