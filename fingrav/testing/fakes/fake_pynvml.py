"""A fake of NVIDIA's `pynvml` (package nvidia-ml-py 13.x) for tests without a GPU.

Same names as the real module for what fingrav uses: constants (NVML_SUCCESS, NVML_ERROR_*,
NVML_TOTAL_POWER_SAMPLES, NVML_FI_DEV_POWER_AVERAGE / _INSTANT, NVML_POWER_SCOPE_*, NVML_VALUE_TYPE_*),
`NVMLError` whose constructor returns the per-code subclass (`NVMLError(6)` is an `NVMLError_NotFound`,
`.value` holds the code), ctypes structures laid out as the real ones (`c_nvmlValue_t`, `c_nvmlSample_t`
with `.timeStamp` / `.sampleValue.uiVal`, `c_nvmlFieldValue_t` with `.nvmlReturn`, `.timestamp`,
`.valueType`, `.value`), and the functions (nvmlInit, nvmlDeviceGetSamples, nvmlDeviceGetFieldValues,
nvmlDeviceGetTotalEnergyConsumption, ...; the clock-event telemetry: nvmlDeviceGetClockInfo,
nvmlDeviceGetCurrentClocksEventReasons / ThrottleReasons, nvmlDeviceGetViolationStatus, the CLOCKS_EVENT_REASON /
PERF_POLICY fields, with `missing_functions` / `unsupported` for drivers that lack some). Behaviour follows the
real library:

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

# clocks and clock-event (throttle) telemetry (fingrav.device.nvidia.telemetry), values of nvidia-ml-py 13.x
NVML_CLOCK_GRAPHICS = 0
NVML_CLOCK_SM = 1
NVML_CLOCK_MEM = 2
NVML_TEMPERATURE_GPU = 0

NVML_PERF_POLICY_POWER = 0
NVML_PERF_POLICY_THERMAL = 1
NVML_PERF_POLICY_SYNC_BOOST = 2
NVML_PERF_POLICY_BOARD_LIMIT = 3
NVML_PERF_POLICY_LOW_UTILIZATION = 4
NVML_PERF_POLICY_RELIABILITY = 5
NVML_PERF_POLICY_TOTAL_APP_CLOCKS = 10
NVML_PERF_POLICY_TOTAL_BASE_CLOCKS = 11
NVML_PERF_POLICY_COUNT = 12

NVML_FI_DEV_PERF_POLICY_POWER = 74
NVML_FI_DEV_PERF_POLICY_THERMAL = 75
NVML_FI_DEV_PERF_POLICY_SYNC_BOOST = 76
NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT = 77
NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION = 78
NVML_FI_DEV_PERF_POLICY_RELIABILITY = 79
NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS = 80
NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS = 81
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_FI_DEV_POWER_CURRENT_LIMIT = 190
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP = NVML_FI_DEV_PERF_POLICY_POWER
NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST = NVML_FI_DEV_PERF_POLICY_SYNC_BOOST
NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN = 269
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN = 270
NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN = 271

nvmlClocksEventReasonGpuIdle = 0x0000000000000001
nvmlClocksEventReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksEventReasonUserDefinedClocks = nvmlClocksEventReasonApplicationsClocksSetting  # deprecated alias
nvmlClocksEventReasonSwPowerCap = 0x0000000000000004
nvmlClocksEventReasonHwSlowdown = 0x0000000000000008
nvmlClocksEventReasonSyncBoost = 0x0000000000000010
nvmlClocksEventReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksEventReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksEventReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksEventReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksEventReasonNone = 0x0000000000000000
nvmlClocksEventReasonAll = 0x00000000000001FF
nvmlClocksThrottleReasonGpuIdle = 0x0000000000000001
nvmlClocksThrottleReasonApplicationsClocksSetting = 0x0000000000000002
nvmlClocksThrottleReasonUserDefinedClocks = nvmlClocksThrottleReasonApplicationsClocksSetting
nvmlClocksThrottleReasonSwPowerCap = 0x0000000000000004
nvmlClocksThrottleReasonHwSlowdown = 0x0000000000000008
nvmlClocksThrottleReasonSyncBoost = 0x0000000000000010
nvmlClocksThrottleReasonSwThermalSlowdown = 0x0000000000000020
nvmlClocksThrottleReasonHwThermalSlowdown = 0x0000000000000040
nvmlClocksThrottleReasonHwPowerBrakeSlowdown = 0x0000000000000080
nvmlClocksThrottleReasonDisplayClockSetting = 0x0000000000000100
nvmlClocksThrottleReasonBoardLimit = 0x0000000000000200
nvmlClocksThrottleReasonReliability = 0x0000000000000400
nvmlClocksThrottleReasonNone = 0x0000000000000000
nvmlClocksThrottleReasonAll = 0x00000000000007FF

#: the reason bits whose time each perf policy's violation counter (and field) counts, in the fake
VIOLATION_BITS = {
    NVML_PERF_POLICY_POWER: nvmlClocksEventReasonSwPowerCap,
    NVML_PERF_POLICY_THERMAL: nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksEventReasonHwThermalSlowdown,
    NVML_PERF_POLICY_SYNC_BOOST: nvmlClocksEventReasonSyncBoost,
    NVML_PERF_POLICY_BOARD_LIMIT: nvmlClocksThrottleReasonBoardLimit,
    NVML_PERF_POLICY_LOW_UTILIZATION: nvmlClocksEventReasonGpuIdle,
    NVML_PERF_POLICY_RELIABILITY: nvmlClocksThrottleReasonReliability,
}
FIELD_BITS = {
    NVML_FI_DEV_PERF_POLICY_POWER: VIOLATION_BITS[NVML_PERF_POLICY_POWER],
    NVML_FI_DEV_PERF_POLICY_THERMAL: VIOLATION_BITS[NVML_PERF_POLICY_THERMAL],
    NVML_FI_DEV_PERF_POLICY_SYNC_BOOST: VIOLATION_BITS[NVML_PERF_POLICY_SYNC_BOOST],
    NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT: VIOLATION_BITS[NVML_PERF_POLICY_BOARD_LIMIT],
    NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION: VIOLATION_BITS[NVML_PERF_POLICY_LOW_UTILIZATION],
    NVML_FI_DEV_PERF_POLICY_RELIABILITY: VIOLATION_BITS[NVML_PERF_POLICY_RELIABILITY],
    NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: nvmlClocksEventReasonSwThermalSlowdown,
    NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: nvmlClocksEventReasonHwThermalSlowdown,
    NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: nvmlClocksEventReasonHwPowerBrakeSlowdown,
}


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


class c_nvmlViolationTime_t(Structure):  # noqa: N801
    _fields_ = [("referenceTime", c_ulonglong), ("violationTime", c_ulonglong)]


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
    # steps of the host's wall clock (NTP): [(true ns since t0, step ns)]; the driver stamps every sample (and the
    # memory field) with the wall clock, `wall_ns`, while `clock_ns` keeps the true (monotonic) time
    clock_steps: list[tuple[int, int]] = field(default_factory=list)
    # jumps of the energy counter: [(true ns since t0, mJ added: negative goes backwards, e.g. a reset)]
    energy_jumps: list[tuple[int, int]] = field(default_factory=list)
    # clocks and clock-event telemetry (nvmlDeviceGetClockInfo, nvmlDeviceGetCurrentClocksEventReasons /
    # ThrottleReasons, nvmlDeviceGetViolationStatus, the CLOCKS_EVENT_REASON / PERF_POLICY fields): `clock_events`
    # [(from ns, to ns since t0, reasons bitmask)] are the intervals in which those reasons are active (the SM clock
    # is `throttled_sm_mhz` then); a violation counter is the ns spent so far in intervals with its bits
    # (VIOLATION_BITS, FIELD_BITS); `violation_policies`: the perf policies nvmlDeviceGetViolationStatus answers
    # (others: NOT_SUPPORTED); `telemetry_fields`: the field IDs that answer (None: every one the fake knows);
    # `missing_functions`: functions this driver lacks (a call raises FUNCTION_NOT_FOUND, as pynvml does when
    # libnvidia-ml exports no such symbol); `unsupported`: functions that answer NOT_SUPPORTED
    sm_mhz: int = 1980
    throttled_sm_mhz: int = 1410
    mem_mhz: int = 3201
    gpu_temp_c: int = 41  # nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)
    clock_events: list[tuple[int, int, int]] = field(default_factory=list)
    violation_policies: tuple[int, ...] = (NVML_PERF_POLICY_POWER, NVML_PERF_POLICY_THERMAL)
    telemetry_fields: tuple[int, ...] | None = None
    missing_functions: set[str] = field(default_factory=set)
    unsupported: set[str] = field(default_factory=set)
    # state
    t0_ns: int = 0
    initialized: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if not self.t0_ns:
            self.t0_ns = int(self.clock_ns())

    def wall_ns(self, true_ns: int) -> int:
        """The wall clock at true time `true_ns`: the true time plus every `clock_steps` step made by then."""
        return int(true_ns) + sum(step for at, step in self.clock_steps if true_ns - self.t0_ns >= at)

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
        """Count the call; raise FUNCTION_NOT_FOUND / NOT_SUPPORTED when `fn` is missing / unsupported, else the
        next injected error for `fn`, if any."""
        self.calls[fn] = self.calls.get(fn, 0) + 1
        if fn in self.missing_functions:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        if fn in self.unsupported:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        queue = self.errors.get(fn)
        if queue:
            raise NVMLError(queue.pop(0))


def _from_env() -> FakeGPU:
    raw = os.environ.get("FAKE_PYNVML_CONFIG")
    if not raw:
        return FakeGPU()
    cfg = json.loads(raw)
    for key in ("missing_functions", "unsupported"):
        if key in cfg:
            cfg[key] = set(cfg[key])
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
    # 121 W since t0, plus a large boot-time offset: mJ = W * ms (+ the injected jumps made by now)
    rel = int(s.clock_ns()) - s.t0_ns
    return 10_000_000_000 + int(121.0 * rel / 1e6) + sum(mj for at, mj in s.energy_jumps if rel >= at)


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
            ts_us = s.wall_ns(t_ns) // 1000
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
        v.timestamp = s.wall_ns(now) // 1000
        v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT
        if field_id == NVML_FI_DEV_POWER_AVERAGE and scope == NVML_POWER_SCOPE_MEMORY:
            if s.field_errors:
                v.nvmlReturn = s.field_errors.pop(0)
            elif not s.memory_supported:
                v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
            else:
                t_upd, mw = s.memory_value_mw(now)
                v.timestamp = s.wall_ns(t_upd) // 1000
                v.value.uiVal = int(mw)
                v.nvmlReturn = NVML_SUCCESS
        elif field_id in (NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT) and scope == NVML_POWER_SCOPE_GPU:
            v.value.uiVal = int(s.power_mw(now))
            v.nvmlReturn = NVML_SUCCESS
        elif field_id == NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION:
            v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
            v.value.ullVal = nvmlDeviceGetTotalEnergyConsumption(handle)
            v.nvmlReturn = NVML_SUCCESS
        elif _telemetry_field(s, v, field_id, now):
            v.nvmlReturn = NVML_SUCCESS
        else:
            v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED
    return values


# ---------------------------------------------------------------------------------- clock-event telemetry
def _rel_ns(s: FakeGPU, now_ns: int) -> int:
    return int(now_ns) - s.t0_ns


def _active_reasons(s: FakeGPU, rel_ns: int) -> int:
    mask = 0
    for start, end, bits in s.clock_events:
        if start <= rel_ns < end:
            mask |= int(bits)
    return mask


def _time_in_ns(s: FakeGPU, rel_ns: int, bits: int) -> int:
    """ns spent from t0 to `rel_ns` in clock events with any of `bits`."""
    return sum(max(0, min(end, rel_ns) - max(start, 0)) for start, end, mask in s.clock_events if int(mask) & bits)


def _telemetry_field(s: FakeGPU, v: c_nvmlFieldValue_t, field_id: int, now_ns: int) -> bool:
    """Fill a telemetry field (violation time in ns, power limit in mW, memory temperature in C); False when the
    fake does not answer `field_id`."""
    if s.telemetry_fields is not None and field_id not in s.telemetry_fields:
        return False
    if field_id in FIELD_BITS:
        v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
        v.value.ullVal = _time_in_ns(s, _rel_ns(s, now_ns), FIELD_BITS[field_id])
    elif field_id == NVML_FI_DEV_POWER_CURRENT_LIMIT:
        v.value.uiVal = 700_000
    elif field_id == NVML_FI_DEV_MEMORY_TEMP:
        v.value.uiVal = 45
    else:
        return False
    return True


def nvmlDeviceGetClockInfo(handle: Any, type: int) -> int:  # noqa: N802, A002 - pynvml's signature
    s = _needs_init("nvmlDeviceGetClockInfo")
    _handle_index(handle)
    if type == NVML_CLOCK_MEM:
        return s.mem_mhz
    if type in (NVML_CLOCK_SM, NVML_CLOCK_GRAPHICS):
        return s.throttled_sm_mhz if _active_reasons(s, _rel_ns(s, s.clock_ns())) & ~1 else s.sm_mhz
    raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)


def nvmlDeviceGetTemperature(handle: Any, sensor: int) -> int:  # noqa: N802 - pynvml's signature
    s = _needs_init("nvmlDeviceGetTemperature")
    _handle_index(handle)
    if sensor != NVML_TEMPERATURE_GPU:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return s.gpu_temp_c


def nvmlDeviceGetCurrentClocksEventReasons(handle: Any) -> int:  # noqa: N802
    s = _needs_init("nvmlDeviceGetCurrentClocksEventReasons")
    _handle_index(handle)
    return _active_reasons(s, _rel_ns(s, s.clock_ns()))


def nvmlDeviceGetCurrentClocksThrottleReasons(handle: Any) -> int:  # noqa: N802 - deprecated name, same answer
    s = _needs_init("nvmlDeviceGetCurrentClocksThrottleReasons")
    _handle_index(handle)
    return _active_reasons(s, _rel_ns(s, s.clock_ns()))


def nvmlDeviceGetViolationStatus(device: Any, perfPolicyType: int) -> c_nvmlViolationTime_t:  # noqa: N802, N803
    s = _needs_init("nvmlDeviceGetViolationStatus")
    _handle_index(device)
    if perfPolicyType not in s.violation_policies:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    now = int(s.clock_ns())
    out = c_nvmlViolationTime_t()
    out.referenceTime = s.wall_ns(now) // 1000
    out.violationTime = _time_in_ns(s, _rel_ns(s, now), VIOLATION_BITS.get(perfPolicyType, 0))
    return out
