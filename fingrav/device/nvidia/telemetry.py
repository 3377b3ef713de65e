"""NVML clock and clock-event (throttle) telemetry, discovered at run time: what a limiter did during a run.

GPU-side module: standard library only (pynvml is handed in). `NVMLTelemetry(nvml, handle)` finds out ONCE which of
these the driver and the installed nvidia-ml-py offer, then `read()` reads them (a
`fingrav.device.base.ClockTelemetry`):

* SM and memory clocks: ``nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM / NVML_CLOCK_MEM)`` (MHz);
* the current clock-event reasons: ``nvmlDeviceGetCurrentClocksEventReasons`` (driver >= 535), else the older name
  ``nvmlDeviceGetCurrentClocksThrottleReasons`` (a binding without the new name, or a driver without its symbol:
  NVML_ERROR_FUNCTION_NOT_FOUND), decoded through the module's own ``nvmlClocksEventReason*`` /
  ``nvmlClocksThrottleReason*`` constants (an unknown bit is named by its hex value);
* the violation counters: ``nvmlDeviceGetViolationStatus(handle, policy)`` for every ``NVML_PERF_POLICY_*`` the
  module defines (POWER, THERMAL, SYNC_BOOST, BOARD_LIMIT, ...), cumulative ``violationTime`` in ns;
* field values (``nvmlDeviceGetFieldValues``, one call for all): the names in `FIELD_NAMES`, looked up on the module
  with getattr (never their numbers: field IDs moved between driver versions, and some names are aliases of one
  ID, e.g. NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP = NVML_FI_DEV_PERF_POLICY_POWER); one answer per ID;
* the die temperature: ``nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU)`` (C), kept among the fields as
  `TEMPERATURE` (below the power limit a kernel's power follows the die's temperature: results/h200-card-state).

Each item is probed once: NVML_ERROR_NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND, a name the module lacks or
a field whose per-field status is not SUCCESS makes it absent, with the reason (`describe()["absent"]`). Errors are
wrapped once, by `fingrav.device.nvidia.library` (`nvml_call`, `wrap_nvml_error`). A read that fails for one item
records the message in `ClockTelemetry.errors` and reads the rest: telemetry never fails a collection.

Cost: one read is 2 clock calls + 1 reasons call + one call per supported perf policy + 1 field-values call + 1
temperature call. Against the fake (tests/device/test_nvml_telemetry.py) a read takes ~100 us (p50; 13 fields); on
hardware each NVML call can take from microseconds to milliseconds under load (nvmlDeviceGetTotalEnergyConsumption:
~3 ms on an H200), so the cost MUST be measured there: every record carries it (`read_ns`), and `experiments/peers.py`
reports it. Read it before and after a run, never inside the timed region.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any

from fingrav.device.base import ClockTelemetry
from fingrav.device.hostclock import host_ns
from fingrav.device.nvidia.library import is_nvml_error, nvml_call, nvml_code, wrap_nvml_error
from fingrav.device.nvidia.poller import value_of
from fingrav.errors import FingravError

logger = logging.getLogger(__name__)

#: clocks read, as (record key, NVML clock-type constant name)
CLOCKS: tuple[tuple[str, str], ...] = (("sm", "NVML_CLOCK_SM"), ("mem", "NVML_CLOCK_MEM"))
#: the current clock-event reasons functions, the newer name first
REASON_FUNCTIONS: tuple[str, ...] = (
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
)
#: the module constants that name reason bits (nvmlClocksEventReasonSwPowerCap = 0x4, ...), newer family first
REASON_CONSTANT = re.compile(r"^nvmlClocks(Event|Throttle)Reason([A-Za-z]+)$")
#: reason constants that are not one reason: the empty and full masks, and deprecated aliases of another bit
REASON_NOT_A_BIT = frozenset({"None", "All", "UserDefinedClocks"})
#: the perf-policy constants of nvmlDeviceGetViolationStatus that are not a policy
POLICY_PREFIX = "NVML_PERF_POLICY_"
POLICY_NOT_A_POLICY = frozenset({"COUNT"})
#: field values read when the module defines the name and the GPU answers it: (name, unit); first name wins an ID
FIELD_NAMES: tuple[tuple[str, str], ...] = (
    ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_POWER_CAP", "ns"),
    ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SYNC_BOOST", "ns"),
    ("NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN", "ns"),
    ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN", "ns"),
    ("NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_POWER", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_THERMAL", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_SYNC_BOOST", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_RELIABILITY", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS", "ns"),
    ("NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS", "ns"),
    ("NVML_FI_DEV_POWER_INSTANT", "mW"),
    ("NVML_FI_DEV_POWER_AVERAGE", "mW"),
    ("NVML_FI_DEV_POWER_CURRENT_LIMIT", "mW"),
    ("NVML_FI_DEV_MEMORY_TEMP", "C"),
)
#: the die temperature (C, ``nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU)``), read with the fields and
#: kept among them under this name: below the power limit a kernel's power follows it (results/h200-card-state)
TEMPERATURE = "NVML_TEMPERATURE_GPU"
#: fields with a power scope (scopeId NVML_POWER_SCOPE_GPU); the others take scopeId 0
POWER_SCOPED = frozenset({"NVML_FI_DEV_POWER_INSTANT", "NVML_FI_DEV_POWER_AVERAGE", "NVML_FI_DEV_POWER_CURRENT_LIMIT"})
#: probe errors that mean "this GPU / driver / binding does not offer it" (absent), not a fault
ABSENT_CODES = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_FUNCTION_NOT_FOUND")


def reason_bits(nvml: Any) -> dict[int, str]:
    """{bit: name} of the clock-event reasons the module defines ("sw_power_cap", "hw_slowdown", ...): one name per
    single-bit constant, the ``nvmlClocksEventReason*`` family preferred over the deprecated ``*ThrottleReason*``."""
    found: list[tuple[int, str, int]] = []
    for attr in dir(nvml):
        m = REASON_CONSTANT.match(attr)
        if m is None or m.group(2) in REASON_NOT_A_BIT:
            continue
        value = getattr(nvml, attr)
        if not isinstance(value, int) or value <= 0 or value & (value - 1):
            continue  # not one bit
        found.append((0 if m.group(1) == "Event" else 1, _snake(m.group(2)), value))
    bits: dict[int, str] = {}
    for _family, name, value in sorted(found):
        bits.setdefault(value, name)
    return dict(sorted(bits.items()))


def decode_reasons(mask: int, bits: dict[int, str]) -> tuple[str, ...]:
    """The names of the bits set in `mask`, lowest bit first; a bit the module does not name is its hex value."""
    out, bit = [], 1
    mask = int(mask)
    while bit <= mask:
        if mask & bit:
            out.append(bits.get(bit, f"0x{bit:x}"))
        bit <<= 1
    return tuple(out)


def _snake(camel: str) -> str:
    """'SwPowerCap' -> 'sw_power_cap'."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", camel).lower()


class NVMLTelemetry:
    """Run-time discovery (in the constructor) and reads (`read`) of one GPU's clock and clock-event telemetry.

    nvml: the pynvml module (or the fake); handle: its device handle; clock_ns: the host clock stamped on each read
    (`fingrav.device.hostclock.host_ns`, the clock of `GPUDevice.host_time_ns`)."""

    def __init__(self, nvml: Any, handle: Any, clock_ns: Callable[[], int] = host_ns) -> None:
        self.nvml = nvml
        self.handle = handle
        self.clock_ns = clock_ns
        self.absent: dict[str, str] = {}
        self.clocks: dict[str, int] = {}
        self.reasons_function: str | None = None
        self.bits = reason_bits(nvml)
        self.policies: dict[str, int] = {}
        self.fields: dict[str, tuple[int, int, str]] = {}  # name -> (field ID, scope ID, unit)
        self.aliases: dict[str, str] = {}  # field name -> the name its ID is read under
        self.temperature: int | None = None  # NVML_TEMPERATURE_GPU, when nvmlDeviceGetTemperature answers
        self.read_failures = 0
        self._discover()
        logger.info(
            "NVML telemetry: clocks %s, reasons %s, violation policies %s, %d fields (%d absent items)",
            sorted(self.clocks),
            self.reasons_function,
            sorted(self.policies),
            len(self.fields),
            len(self.absent),
        )

    # -- discovery --------------------------------------------------------------------------
    def _probe(self, what: str, name: str, *args: Any) -> tuple[bool, Any]:
        """(True, value) when `nvml.<name>(*args)` answers; (False, None) with `what` recorded as absent when the
        module lacks it or NVML says it is not offered. Other NVML errors are absent too, and logged louder."""
        if not callable(getattr(self.nvml, name, None)):
            self.absent[what] = f"pynvml has no {name}() (nvidia-ml-py too old)"
            return False, None
        try:
            return True, nvml_call(self.nvml, name, *args)
        except FingravError as exc:
            cause = exc.__cause__
            if cause is None or not any(is_nvml_error(self.nvml, cause, code) for code in ABSENT_CODES):
                logger.warning("NVML telemetry: %s failed when probed, left out: %s", what, exc)
            self.absent[what] = str(exc)
            return False, None

    def _discover(self) -> None:
        for key, const in CLOCKS:
            clock_type = getattr(self.nvml, const, None)
            if not isinstance(clock_type, int):
                self.absent[f"clock_{key}"] = f"pynvml has no {const}"
                continue
            ok, _ = self._probe(f"clock_{key}", "nvmlDeviceGetClockInfo", self.handle, clock_type)
            if ok:
                self.clocks[key] = clock_type
        for name in REASON_FUNCTIONS:
            ok, _ = self._probe(f"reasons:{name}", name, self.handle)
            if ok:
                self.reasons_function = name
                break
        for attr in sorted(a for a in dir(self.nvml) if a.startswith(POLICY_PREFIX)):
            policy = attr[len(POLICY_PREFIX) :]
            value = getattr(self.nvml, attr)
            if policy in POLICY_NOT_A_POLICY or not isinstance(value, int):
                continue
            ok, _ = self._probe(f"violation:{policy.lower()}", "nvmlDeviceGetViolationStatus", self.handle, value)
            if ok:
                self.policies[policy.lower()] = value
        self._discover_fields()
        sensor = getattr(self.nvml, "NVML_TEMPERATURE_GPU", None)
        if not isinstance(sensor, int):
            self.absent[TEMPERATURE] = "pynvml has no NVML_TEMPERATURE_GPU"
        elif self._probe(TEMPERATURE, "nvmlDeviceGetTemperature", self.handle, sensor)[0]:
            self.temperature = sensor

    def _discover_fields(self) -> None:
        by_id: dict[int, str] = {}
        wanted: list[tuple[str, int, int, str]] = []
        scope_gpu = nvml_code(self.nvml, "NVML_POWER_SCOPE_GPU", 0)
        for name, unit in FIELD_NAMES:
            fid = getattr(self.nvml, name, None)
            if not isinstance(fid, int):
                self.absent[f"field:{name}"] = "not defined by this pynvml"
                continue
            if fid in by_id:
                self.aliases[name] = by_id[fid]
                continue
            by_id[fid] = name
            wanted.append((name, fid, scope_gpu if name in POWER_SCOPED else 0, unit))
        if not wanted:
            return
        ok, values = self._probe(
            "field_values", "nvmlDeviceGetFieldValues", self.handle, [(f, s) for _, f, s, _ in wanted]
        )
        if not ok:
            for name, *_ in wanted:
                self.absent[f"field:{name}"] = self.absent["field_values"]
            return
        success = nvml_code(self.nvml, "NVML_SUCCESS")
        for (name, fid, scope, unit), fv in zip(wanted, values, strict=True):
            ret = int(getattr(fv, "nvmlReturn", success))
            if ret == success:
                self.fields[name] = (fid, scope, unit)
            else:
                self.absent[f"field:{name}"] = f"per-field status {ret}"

    # -- identity ---------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """What was found (JSON-able): clocks, the reasons function and its bit names, violation policies, fields
        with their units and IDs as this pynvml defines them, aliases, and every absent item with the reason."""
        return {
            "clocks": sorted(self.clocks),
            "reasons_function": self.reasons_function,
            "reason_bits": {f"0x{bit:x}": name for bit, name in self.bits.items()},
            "violation_policies": sorted(self.policies),
            "violation_unit": "ns",
            "fields": {
                name: {"id": fid, "scope": scope, "unit": unit} for name, (fid, scope, unit) in self.fields.items()
            },
            "field_aliases": dict(self.aliases),
            "temperature": None if self.temperature is None else f"{TEMPERATURE} (C): nvmlDeviceGetTemperature",
            "absent": dict(self.absent),
            "read_failures": self.read_failures,
        }

    # -- reads ------------------------------------------------------------------------------
    def read(self) -> ClockTelemetry:
        """One reading of everything discovered; an item that fails is None / missing, with its message in
        `errors` (counted in `read_failures`, the first few logged)."""
        t0 = time.perf_counter_ns()
        stamp = int(self.clock_ns())
        errors: dict[str, str] = {}
        clocks: dict[str, float | None] = {}
        for key, clock_type in self.clocks.items():
            clocks[key] = self._read_item(errors, f"clock_{key}", "nvmlDeviceGetClockInfo", clock_type)
        reasons = None
        if self.reasons_function is not None:
            got = self._read_item(errors, "reasons", self.reasons_function)
            reasons = None if got is None else int(got)
        violation: dict[str, int] = {}
        for policy, value in self.policies.items():
            got = self._read_item(errors, f"violation:{policy}", "nvmlDeviceGetViolationStatus", value)
            if got is not None:
                violation[policy] = int(got.violationTime)
        fields = self._read_fields(errors)
        if self.temperature is not None:
            got = self._read_item(errors, TEMPERATURE, "nvmlDeviceGetTemperature", self.temperature)
            if got is not None:
                fields[TEMPERATURE] = float(got)
        if errors:
            self.read_failures += 1
            if self.read_failures <= 5:
                logger.warning("NVML telemetry read: %s", "; ".join(f"{k}: {v}" for k, v in errors.items()))
        return ClockTelemetry(
            host_ns=stamp,
            read_ns=time.perf_counter_ns() - t0,
            sm_mhz=clocks.get("sm"),
            mem_mhz=clocks.get("mem"),
            reasons=reasons,
            reason_names=decode_reasons(reasons, self.bits) if reasons is not None else (),
            violation=violation,
            violation_unit="ns",
            fields=fields,
            errors=errors,
        )

    def _read_item(self, errors: dict[str, str], what: str, name: str, *args: Any) -> Any:
        try:
            return nvml_call(self.nvml, name, self.handle, *args)
        except FingravError as exc:
            errors[what] = str(exc)
            return None

    def _read_fields(self, errors: dict[str, str]) -> dict[str, float]:
        if not self.fields:
            return {}
        names = list(self.fields)
        ids = [(self.fields[n][0], self.fields[n][1]) for n in names]
        try:
            values = nvml_call(self.nvml, "nvmlDeviceGetFieldValues", self.handle, ids)
        except FingravError as exc:
            errors["field_values"] = str(exc)
            return {}
        success = nvml_code(self.nvml, "NVML_SUCCESS")
        err_cls = getattr(self.nvml, "NVMLError", None)
        out: dict[str, float] = {}
        for name, fv in zip(names, values, strict=True):
            ret = int(getattr(fv, "nvmlReturn", success))
            if ret != success:  # the per-field status is an NVML return code: wrapped like any other
                exc: BaseException = err_cls(ret) if err_cls is not None else RuntimeError(ret)
                errors[f"field:{name}"] = str(wrap_nvml_error(self.nvml, exc, f"nvmlDeviceGetFieldValues({name})"))
                continue
            try:
                out[name] = value_of(fv.value, getattr(fv, "valueType", 1))
            except FingravError as exc:
                errors[f"field:{name}"] = str(exc)
        return out
