"""A fake ``amdsmi`` module for fingrav's tests: no AMD GPU, no ROCm, no ``libamd_smi.so``.

What it imitates
----------------
amdsmi **7.0.2** (the PyPI wheel of ROCm 7.0, ``amd_smi_lib`` 26.0): function names, signatures, the keys,
units and ``"N/A"`` conventions of the returned dictionaries, the exception classes and the ways
``import amdsmi`` fails. Checked against these sources (ROCm/amdsmi on GitHub):

* ``py-interface/amdsmi_interface.py`` (commit 4bc305a66c4a, the ROCm 6.4 line of the same API):
  ``amdsmi_init(flag=AmdSmiInitFlags.INIT_AMD_GPUS)``, ``amdsmi_shut_down()``,
  ``amdsmi_get_processor_handles()``, ``amdsmi_get_gpu_metrics_info(h)`` (every value passed through
  ``_validate_if_max_uint``: a field the ASIC does not fill is the string ``"N/A"``),
  ``amdsmi_get_energy_count(h)`` -> ``{"energy_accumulator", "counter_resolution", "timestamp"}`` (the key
  was ``"power"`` before 6.2.1), ``amdsmi_get_power_info(h, sensor_ind=0)`` (values equal to 0xFFFF become
  ``"N/A"``), ``amdsmi_get_gpu_asic_info``, ``amdsmi_get_gpu_driver_info``, ``amdsmi_get_lib_version``.
* ``CHANGELOG.md``, "amd_smi_lib for ROCm 7.0.0": ``amdsmi_get_power_info`` also returns ``socket_power``;
  GPU metrics 1.8 (new per-XCP violation counters; still no per-component power or energy).
* ``include/amd_smi/amdsmi.h``, ``amdsmi_gpu_metrics_t``: ``current_socket_power`` and
  ``average_socket_power`` in W (integers), ``energy_accumulator`` in ticks of 15.259 uJ (2**-16 J; the
  ``counter_resolution`` amdsmi_get_energy_count reports, in uJ), ``firmware_timestamp`` "PMFW attached
  timestamp (10ns resolution)", ``system_clock_counter`` "driver attached timestamp (in ns)".
* ``amdsmi_interface.py`` of amdsmi 7.0.2 (the wheel): ``amdsmi_get_clock_info(h, AmdSmiClkType)`` -> ``clk``,
  ``min_clk``, ``max_clk``, ``clk_locked``, ``clk_deep_sleep``; ``amdsmi_get_violation_status(h)`` (amdsmi >= 6.3,
  MI300 and later) -> ``reference_timestamp``, ``violation_timestamp``, ``acc_counter``, ``acc_/per_/active_`` +
  prochot_thrm, ppt_pwr (PVIOL), socket_thrm (TVIOL), vr_thrm, hbm_thrm, and per-partition lists.
* ``py-interface/amdsmi_exception.py``: ``AmdSmiException`` > ``AmdSmiLibraryException(err_code)``
  (``err_code``, ``err_info``, ``get_error_code()``) > ``AmdSmiRetryException`` / ``AmdSmiTimeoutException``;
  ``AmdSmiParameterException``; status numbers from ``py-interface/amdsmi_wrapper.py``.
* ``py-interface/amdsmi_wrapper.py``: with ``libamd_smi.so`` missing, the wheel prints the ``OSError`` and
  "Unable to find amdsmi library try installing amd-smi-lib from your package manager", then dies on
  ``KeyError: 'libamd_smi.so'`` (older wrappers raise the ``OSError`` itself); bindings newer than the
  library die on ``AttributeError: ...libamd_smi.so: undefined symbol: amdsmi_...``.

What is NOT real
----------------
* The component energy accumulators (``components``; fingrav reads ``xcd_energy_acc``, ``aid_energy_acc``,
  ``hbm_energy_acc``) do not exist in ``amdsmi_get_gpu_metrics_info`` of any amdsmi release through 7.0
  (gpu_metrics <= 1.8). The names copy the MI300A HSMP metrics table (``amdsmi_get_hsmp_metrics_table``:
  ``xcd_energy_acc``, ``aid_energy_acc``, ``hbm_energy_acc``, CPU-side, kJ strings). They are here so that
  fingrav's component channels can be tested; on a real MI300X the sampler reports "total" only.
* Handles are plain objects, not ctypes pointers; the ``amdsmi_get_gpu_metrics_header_info`` keys
  (``structure_size``, ``format_revision``, ``content_revision``) follow the C struct
  ``amd_metrics_table_header_t``; ``__version__`` stands in for the installed wheel's version.

Time model
----------
``configure()`` sets an epoch on the fake's clock (``time.time_ns`` unless ``set_clock`` gave another).
The power management firmware publishes a new metrics table every ``firmware_period_ns`` (first one at the
epoch + ``firmware_phase_ns``), except inside ``firmware_stalls``; every read returns the latest published
table. Power is a constant (W) or piecewise-constant steps ``[(t_ns_from_epoch, W), ...]``; energies are
exact integrals of it, floored to whole counter ticks. ``truth_power_mw`` gives the exact mean.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import math
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

__version__ = "7.0.2"

PowerSpec = float | Sequence[tuple[int, float]]

NA = "N/A"
FIRMWARE_TICK_NS = 10  # firmware_timestamp resolution

# -------------------------------------------------------------------------------- constants, exceptions
# Status numbers as in amdsmi_wrapper.py (amdsmi_status_t).
AMDSMI_STATUS_SUCCESS = 0
AMDSMI_STATUS_INVAL = 1
AMDSMI_STATUS_NOT_SUPPORTED = 2
AMDSMI_STATUS_RETRY = 9
AMDSMI_STATUS_NO_PERM = 10
AMDSMI_STATUS_IO = 12
AMDSMI_STATUS_INIT_ERROR = 18
AMDSMI_STATUS_BUSY = 30
AMDSMI_STATUS_NOT_FOUND = 31
AMDSMI_STATUS_NOT_INIT = 32
AMDSMI_STATUS_DRIVER_NOT_LOADED = 34
AMDSMI_STATUS_NO_DATA = 40
AMDSMI_STATUS_NO_DRV = 51
AMDSMI_STATUS_UNKNOWN_ERROR = 0xFFFFFFFF


class AmdSmiRetCode(IntEnum):
    SUCCESS = AMDSMI_STATUS_SUCCESS
    ERR_INVAL = AMDSMI_STATUS_INVAL
    ERR_NOT_SUPPORTED = AMDSMI_STATUS_NOT_SUPPORTED
    RETRY = AMDSMI_STATUS_RETRY
    ERR_NO_PERM = AMDSMI_STATUS_NO_PERM
    ERR_IO = AMDSMI_STATUS_IO
    INIT_ERROR = AMDSMI_STATUS_INIT_ERROR
    ERR_BUSY = AMDSMI_STATUS_BUSY
    ERR_NOT_FOUND = AMDSMI_STATUS_NOT_FOUND
    NOT_INIT = AMDSMI_STATUS_NOT_INIT
    DRIVER_NOT_LOADED = AMDSMI_STATUS_DRIVER_NOT_LOADED
    NO_DATA = AMDSMI_STATUS_NO_DATA
    NO_DRV = AMDSMI_STATUS_NO_DRV
    UNKNOWN_ERROR = AMDSMI_STATUS_UNKNOWN_ERROR


_ERR_INFO = {
    AMDSMI_STATUS_INVAL: "AMDSMI_STATUS_INVAL - Invalid parameters",
    AMDSMI_STATUS_NOT_SUPPORTED: "AMDSMI_STATUS_NOT_SUPPORTED - Feature not supported",
    AMDSMI_STATUS_RETRY: "AMDSMI_STATUS_RETRY - Retry operation",
    AMDSMI_STATUS_NO_PERM: "AMDSMI_STATUS_NO_PERM - Permission Denied",
    AMDSMI_STATUS_IO: "AMDSMI_STATUS_IO - I/O Error",
    AMDSMI_STATUS_INIT_ERROR: "AMDSMI_STATUS_INIT_ERROR - Initialization error",
    AMDSMI_STATUS_BUSY: "AMDSMI_STATUS_BUSY - Device busy",
    AMDSMI_STATUS_NOT_FOUND: "AMDSMI_STATUS_NOT_FOUND - Device Not found",
    AMDSMI_STATUS_NOT_INIT: "AMDSMI_STATUS_NOT_INIT - Device not initialized",
    AMDSMI_STATUS_DRIVER_NOT_LOADED: "AMDSMI_STATUS_DRIVER_NOT_LOADED - Driver not loaded",
    AMDSMI_STATUS_NO_DATA: "AMDSMI_STATUS_NO_DATA - No data was found for given input",
    AMDSMI_STATUS_NO_DRV: "AMDSMI_STATUS_NO_DRV - No driver",
}


class AmdSmiClkType(IntEnum):
    """amdsmi_interface.AmdSmiClkType (amdsmi_wrapper.AMDSMI_CLK_TYPE_*; GFX is SYS's value)."""

    SYS = 0
    GFX = 0
    DF = 1
    DCEF = 2
    SOC = 3
    MEM = 4
    PCIE = 5
    VCLK0 = 6
    VCLK1 = 7
    DCLK0 = 8
    DCLK1 = 9


#: the violation kinds of amdsmi_get_violation_status (acc_<kind>, per_<kind>, active_<kind>), amdsmi 6.4-7.0
VIOLATION_KINDS = ("prochot_thrm", "ppt_pwr", "socket_thrm", "vr_thrm", "hbm_thrm")


class AmdSmiInitFlags(IntEnum):
    INIT_ALL_PROCESSORS = 0xFFFFFFFF
    INIT_AMD_CPUS = 1
    INIT_AMD_GPUS = 2
    INIT_AMD_APUS = 3
    INIT_NON_AMD_CPUS = 4
    INIT_NON_AMD_GPUS = 8


class AmdSmiException(Exception):
    """Base smi exception class."""


class AmdSmiLibraryException(AmdSmiException):
    """An error status returned by libamd_smi (``err_code`` is the amdsmi_status_t value)."""

    def __init__(self, err_code: int) -> None:
        err_code = abs(int(err_code))
        super().__init__(err_code)
        self.err_code = err_code
        self.err_info = _ERR_INFO.get(err_code, "AMDSMI_STATUS_UNKNOWN_ERROR - An unknown error occurred")

    def __str__(self) -> str:
        return f"An error occured with code: {self.err_code}({self.err_info})"

    def get_error_code(self) -> int:
        return self.err_code

    def get_error_info(self) -> str:
        return self.err_info


class AmdSmiRetryException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(AMDSMI_STATUS_RETRY)


class AmdSmiTimeoutException(AmdSmiLibraryException):
    def __init__(self) -> None:
        super().__init__(8)


class AmdSmiParameterException(AmdSmiException):
    def __init__(self, received_value: Any, expected_type: Any, msg: str | None = None) -> None:
        super().__init__(msg)
        self.err_msg = msg or (
            f"Invalid parameter:\nActual type: {type(received_value)}\nExpected type: {expected_type}"
        )

    def __str__(self) -> str:
        return self.err_msg


class ProcessorHandle:
    """Stands in for ``amdsmi_wrapper.amdsmi_processor_handle`` (a ctypes void pointer)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<fake amdsmi_processor_handle {self.index}>"


# -------------------------------------------------------------------------------- configuration
@dataclass
class FakeConfig:
    """The fake GPU(s). Times in ns from the epoch, power in W, energy ticks of ``counter_resolution_uj``."""

    num_gpus: int = 1
    power_w: PowerSpec = 300.0
    # Hypothetical per-component accumulators in the metrics table: field name -> power spec (W).
    components: dict[str, PowerSpec] = field(default_factory=dict)
    counter_resolution_uj: float = 15.3
    energy_bits: int = 64
    energy_start_ticks: int = 987_654_321
    firmware_period_ns: int = 1_000_000
    firmware_phase_ns: int = 0
    firmware_start_ticks: int = 4_000_000_000
    firmware_stalls: list[tuple[int, int]] = field(default_factory=list)
    driver_clock_offset_ns: int = -1_700_000_000_000_000_000  # system_clock_counter: boot-time clock
    na_fields: tuple[str, ...] = ("average_socket_power",)  # fields the ASIC leaves at UINT_MAX
    init_error: int | None = None  # err_code amdsmi_init raises, e.g. AMDSMI_STATUS_DRIVER_NOT_LOADED
    market_name: str = "AMD Instinct MI300X"
    target_graphics_version: str = "gfx942"
    driver_version: str = "6.10.5"
    lib_version: tuple[int, int, int, str] = (26, 0, 2, "26.0.2+fake")
    metrics_header: tuple[int, int, int] = (1624, 1, 6)  # structure_size, format_revision, content_revision
    # clocks and violation status (amdsmi_get_clock_info; amdsmi_get_violation_status, amdsmi >= 6.3, MI300 and
    # later): GFX clock `gfx_mhz` (`throttled_gfx_mhz` while a violation is active), MEM clock `mem_mhz`;
    # `violations` {kind: [(from, to ns from the epoch)]} (kinds: VIOLATION_KINDS) are the intervals in which that
    # violation is active: acc_counter counts firmware updates since the epoch, acc_<kind> those inside its
    # intervals, per_<kind> = 100 x acc_<kind> / acc_counter, active_<kind> whether the latest update is inside one;
    # violation_supported False: AMDSMI_STATUS_NOT_SUPPORTED (an ASIC before MI300)
    gfx_mhz: int = 2100
    throttled_gfx_mhz: int = 1600
    mem_mhz: int = 1300
    violations: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    violation_supported: bool = True
    # sampler faults, by firmware update index k (the update at firmware_phase_ns + k * firmware_period_ns), in the
    # metrics table (and, for "energy_backwards", in amdsmi_get_energy_count): "backwards" (its firmware_timestamp
    # is the one of update k - 2), "conflict" (every read after the first returns other energy and power with the
    # same timestamp), "zero" / "all_ones" (energy_accumulator, current_socket_power and the firmware timestamp
    # are 0 / all ones, as a driver that does not say "N/A" returns them), "float" / "string" (energy_accumulator
    # of an unknown type), "energy_backwards" (the accumulator 1,000,000 ticks lower than it should be)
    faults: dict[int, str] = field(default_factory=dict)


class _State:
    def __init__(self) -> None:
        self.config = FakeConfig()
        self.clock: Callable[[], int] = time.time_ns
        self.epoch_ns = self.clock()
        self.initialized = False
        self.failures: dict[str, tuple[int, int | None]] = {}  # function -> (err_code, calls left or None)
        self.calls: dict[str, int] = {}
        self.reads_of_update: dict[int, int] = {}  # metrics reads per firmware update (the "conflict" fault)


_STATE = _State()


def set_clock(clock: Callable[[], int]) -> None:
    """Use `clock` (ns) as the fake's time source, e.g. a manual counter; call before configure()."""
    _STATE.clock = clock


def configure(**kwargs: Any) -> FakeConfig:
    """Reset the fake to a new FakeConfig (keyword arguments as its fields) and start its epoch now."""
    _STATE.config = FakeConfig(**kwargs)
    _STATE.epoch_ns = _STATE.clock()
    _STATE.initialized = False
    _STATE.failures = {}
    _STATE.calls = {}
    _STATE.reads_of_update = {}
    return _STATE.config


def reset() -> None:
    """Back to defaults and the real clock."""
    _STATE.clock = time.time_ns
    configure()


def config() -> FakeConfig:
    return _STATE.config


def epoch_ns() -> int:
    return _STATE.epoch_ns


def fail(function: str, err_code: int = AMDSMI_STATUS_IO, times: int | None = 1) -> None:
    """Make the next `times` calls of `function` raise AmdSmiLibraryException(err_code); None: every call."""
    _STATE.failures[function] = (int(err_code), times)


def calls(function: str) -> int:
    return _STATE.calls.get(function, 0)


def _enter(function: str, handle: Any = None, needs_init: bool = True) -> None:
    _STATE.calls[function] = _STATE.calls.get(function, 0) + 1
    pending = _STATE.failures.get(function)
    if pending is not None:
        code, remaining = pending
        if remaining is not None:
            if remaining <= 1:
                del _STATE.failures[function]
            else:
                _STATE.failures[function] = (code, remaining - 1)
        raise AmdSmiLibraryException(code)
    if needs_init and not _STATE.initialized:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_INIT)
    if handle is not None:
        if not isinstance(handle, ProcessorHandle):
            raise AmdSmiParameterException(handle, ProcessorHandle)
        if handle.index >= _STATE.config.num_gpus:
            raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_FOUND)


# -------------------------------------------------------------------------------- power and energy truth
def _steps(spec: PowerSpec) -> list[tuple[int, float]]:
    if isinstance(spec, int | float):
        return [(0, float(spec))]
    steps = sorted((int(t), float(p)) for t, p in spec)
    if not steps or steps[0][0] > 0:
        steps.insert(0, (0, steps[0][1] if steps else 0.0))
    return steps


def energy_uj(spec: PowerSpec, t_ns: int) -> float:
    """Exact energy (uJ) of the power spec from the epoch to `t_ns` (W * ns = 1e-3 uJ)."""
    steps = _steps(spec)
    total = 0.0
    for i, (start, watts) in enumerate(steps):
        if start >= t_ns:
            break
        end = steps[i + 1][0] if i + 1 < len(steps) else t_ns
        total += watts * (min(end, t_ns) - start) * 1e-3
    return total


def truth_power_mw(t_from_ns: int, t_to_ns: int, spec: PowerSpec | None = None) -> float:
    """Exact mean power (mW) of `spec` (default: the total) over [t_from_ns, t_to_ns] (epoch-relative)."""
    spec = _STATE.config.power_w if spec is None else spec
    return (energy_uj(spec, t_to_ns) - energy_uj(spec, t_from_ns)) / (t_to_ns - t_from_ns) * 1e6


def _stalled(t_ns: int) -> bool:
    return any(lo <= t_ns < hi for lo, hi in _STATE.config.firmware_stalls)


def update_time_ns(now_ns: int | None = None) -> int:
    """Epoch-relative time of the latest firmware update published at `now_ns` (default: now)."""
    cfg = _STATE.config
    rel = (_STATE.clock() if now_ns is None else now_ns) - _STATE.epoch_ns
    k = max(0, (rel - cfg.firmware_phase_ns) // cfg.firmware_period_ns)
    while k > 0 and _stalled(cfg.firmware_phase_ns + k * cfg.firmware_period_ns):
        k -= 1
    return cfg.firmware_phase_ns + k * cfg.firmware_period_ns


def update_index(t_rel_ns: int) -> int:
    """The index k of the firmware update published at epoch-relative `t_rel_ns` (FakeConfig.faults' keys)."""
    cfg = _STATE.config
    return (t_rel_ns - cfg.firmware_phase_ns) // cfg.firmware_period_ns


def _fault(t_rel_ns: int) -> str | None:
    return _STATE.config.faults.get(update_index(t_rel_ns))


def _faulty_energy(t_upd: int, ticks: int) -> Any:
    """The energy accumulator of the update at `t_upd` as a faulty driver returns it."""
    fault = _fault(t_upd)
    if fault == "energy_backwards":
        return ticks - 1_000_000
    return {"zero": 0, "all_ones": 0xFFFFFFFFFFFFFFFF, "float": float(ticks), "string": hex(ticks)}.get(
        fault or "", ticks
    )


def firmware_ticks(t_rel_ns: int) -> int:
    """The firmware_timestamp (10 ns ticks) of an update at epoch-relative `t_rel_ns`."""
    return _STATE.config.firmware_start_ticks + t_rel_ns // FIRMWARE_TICK_NS


def firmware_to_rel_ns(ticks: int) -> int:
    """Inverse of firmware_ticks."""
    return (ticks - _STATE.config.firmware_start_ticks) * FIRMWARE_TICK_NS


def energy_ticks(spec: PowerSpec, t_rel_ns: int) -> int:
    """The accumulator value (wrapped to energy_bits) at an update at epoch-relative `t_rel_ns`."""
    cfg = _STATE.config
    raw = cfg.energy_start_ticks + math.floor(energy_uj(spec, t_rel_ns) / cfg.counter_resolution_uj)
    return raw % (1 << cfg.energy_bits)


def _na(name: str, value: Any) -> Any:
    return NA if name in _STATE.config.na_fields else value


# -------------------------------------------------------------------------------- the amdsmi API
def amdsmi_init(flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
    if not isinstance(flag, AmdSmiInitFlags):
        raise AmdSmiParameterException(flag, AmdSmiInitFlags)
    _enter("amdsmi_init", needs_init=False)
    if _STATE.config.init_error is not None:
        raise AmdSmiLibraryException(_STATE.config.init_error)
    _STATE.initialized = True


def amdsmi_shut_down() -> None:
    _enter("amdsmi_shut_down")
    _STATE.initialized = False


def amdsmi_get_processor_handles() -> list[ProcessorHandle]:
    _enter("amdsmi_get_processor_handles")
    return [ProcessorHandle(i) for i in range(_STATE.config.num_gpus)]


def amdsmi_get_lib_version() -> dict[str, Any]:
    _enter("amdsmi_get_lib_version", needs_init=False)
    major, minor, release, build = _STATE.config.lib_version
    return {"major": major, "minor": minor, "release": release, "build": build}


def amdsmi_get_gpu_asic_info(processor_handle: ProcessorHandle) -> dict[str, Any]:
    _enter("amdsmi_get_gpu_asic_info", processor_handle)
    cfg = _STATE.config
    return {
        "market_name": cfg.market_name,
        "vendor_id": "0x1002",
        "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
        "subvendor_id": "0x1002",
        "device_id": "0x74a1",
        "rev_id": "0x00",
        "asic_serial": f"0x{0xF00D0000 + processor_handle.index:016X}",
        "oam_id": processor_handle.index,
        "num_compute_units": 304,
        "target_graphics_version": cfg.target_graphics_version,
    }


def amdsmi_get_gpu_driver_info(processor_handle: ProcessorHandle) -> dict[str, Any]:
    _enter("amdsmi_get_gpu_driver_info", processor_handle)
    return {"driver_name": "amdgpu", "driver_version": _STATE.config.driver_version, "driver_date": "N/A"}


def amdsmi_get_gpu_device_bdf(processor_handle: ProcessorHandle) -> str:
    _enter("amdsmi_get_gpu_device_bdf", processor_handle)
    return f"0000:{0x0C + 0x16 * processor_handle.index:02x}:00.0"


def amdsmi_get_gpu_device_uuid(processor_handle: ProcessorHandle) -> str:
    _enter("amdsmi_get_gpu_device_uuid", processor_handle)
    return f"fake-{processor_handle.index:02d}ff-74a1-0000-0000-000000000000"


def amdsmi_get_gpu_metrics_header_info(processor_handle: ProcessorHandle) -> dict[str, Any]:
    _enter("amdsmi_get_gpu_metrics_header_info", processor_handle)
    size, fmt, content = _STATE.config.metrics_header
    return {"structure_size": size, "format_revision": fmt, "content_revision": content}


def amdsmi_get_energy_count(processor_handle: ProcessorHandle) -> dict[str, Any]:
    """Energy accumulator (ticks), counter_resolution (uJ per tick, a C float) and timestamp (ns)."""
    _enter("amdsmi_get_energy_count", processor_handle)
    now = _STATE.clock()
    t_upd = update_time_ns(now)
    return {
        "energy_accumulator": _faulty_energy(t_upd, energy_ticks(_STATE.config.power_w, t_upd)),
        "counter_resolution": _STATE.config.counter_resolution_uj,
        "timestamp": now + _STATE.config.driver_clock_offset_ns,
    }


def amdsmi_get_power_info(processor_handle: ProcessorHandle, sensor_ind: int = 0) -> dict[str, Any]:
    """Socket power in W (integers; 0xFFFF -> "N/A"), as amdsmi 7.0 (with the added socket_power)."""
    _enter("amdsmi_get_power_info", processor_handle)
    watts = _current_watts(update_time_ns())
    return {
        "current_socket_power": watts,
        "average_socket_power": _na("average_socket_power", watts),
        "socket_power": watts,
        "gfx_voltage": NA,
        "soc_voltage": NA,
        "mem_voltage": NA,
        "power_limit": 750,
    }


def _current_watts(t_upd: int) -> int:
    period = _STATE.config.firmware_period_ns
    lo = max(0, t_upd - period)
    if t_upd <= lo:
        return round(_steps(_STATE.config.power_w)[0][1])
    return round(truth_power_mw(lo, t_upd) / 1000.0)


def amdsmi_get_gpu_metrics_info(processor_handle: ProcessorHandle) -> dict[str, Any]:
    """The metrics table as amdsmi 6.4-7.0 return it (gpu_metrics 1.6-like MI300X values)."""
    _enter("amdsmi_get_gpu_metrics_info", processor_handle)
    cfg = _STATE.config
    now = _STATE.clock()
    t_upd = update_time_ns(now)
    watts = _current_watts(t_upd)
    out: dict[str, Any] = {
        "temperature_edge": NA,
        "temperature_hotspot": 48,
        "temperature_mem": 41,
        "temperature_vrgfx": NA,
        "temperature_vrsoc": 39,
        "temperature_vrmem": NA,
        "average_gfx_activity": 0,
        "average_umc_activity": 0,
        "average_mm_activity": NA,
        "average_socket_power": NA,
        "energy_accumulator": energy_ticks(cfg.power_w, t_upd),
        "system_clock_counter": now + cfg.driver_clock_offset_ns,
        "average_gfxclk_frequency": NA,
        "average_socclk_frequency": NA,
        "average_uclk_frequency": NA,
        "average_vclk0_frequency": NA,
        "average_dclk0_frequency": NA,
        "average_vclk1_frequency": NA,
        "average_dclk1_frequency": NA,
        "current_gfxclk": NA,
        "current_socclk": NA,
        "current_uclk": 1300,
        "current_vclk0": NA,
        "current_dclk0": NA,
        "current_vclk1": NA,
        "current_dclk1": NA,
        "throttle_status": NA,
        "current_fan_speed": NA,
        "pcie_link_width": 16,
        "pcie_link_speed": 320,
        "gfx_activity_acc": 0,
        "mem_activity_acc": 0,
        "temperature_hbm": [NA, NA, NA, NA],
        "firmware_timestamp": firmware_ticks(t_upd),
        "voltage_soc": NA,
        "voltage_gfx": NA,
        "voltage_mem": NA,
        "indep_throttle_status": NA,
        "current_socket_power": watts,
        "vcn_activity": [0, 0, 0, 0],
        "gfxclk_lock_status": 0,
        "xgmi_link_width": 16,
        "xgmi_link_speed": 32,
        "pcie_bandwidth_acc": 0,
        "pcie_bandwidth_inst": 0,
        "pcie_l0_to_recov_count_acc": 0,
        "pcie_replay_count_acc": 0,
        "pcie_replay_rover_count_acc": 0,
        "xgmi_read_data_acc": [0] * 8,
        "xgmi_write_data_acc": [0] * 8,
        "current_gfxclks": [132] * 8,
        "current_socclks": [NA] * 4,
        "current_vclk0s": [NA] * 4,
        "current_dclk0s": [NA] * 4,
        "jpeg_activity": [NA] * 32,
        "pcie_nak_sent_count_acc": 0,
        "pcie_nak_rcvd_count_acc": 0,
        "accumulation_counter": t_upd // 1_000_000,
        "prochot_residency_acc": 0,
        "ppt_residency_acc": 0,
        "socket_thm_residency_acc": 0,
        "vr_thm_residency_acc": 0,
        "hbm_thm_residency_acc": 0,
        "num_partition": 1,
        "pcie_lc_perf_other_end_recovery": 0,
        "vram_max_bandwidth": 5300,
        "xgmi_link_status": [1] * 8,
    }
    for name in cfg.na_fields:
        if name in out:
            out[name] = NA
    for name, spec in cfg.components.items():
        out[name] = energy_ticks(spec, t_upd)
    fault = _fault(t_upd)
    if fault is not None:
        k = update_index(t_upd)
        reads = _STATE.reads_of_update[k] = _STATE.reads_of_update.get(k, 0) + 1
        out["energy_accumulator"] = _faulty_energy(t_upd, out["energy_accumulator"])
        if fault == "backwards":
            out["firmware_timestamp"] = firmware_ticks(max(0, t_upd - 2 * cfg.firmware_period_ns))
        elif fault == "conflict" and reads > 1:
            out["energy_accumulator"] += 5_000
            out["current_socket_power"] = watts + 50
        elif fault in ("zero", "all_ones"):
            value = 0 if fault == "zero" else 0xFFFF
            out["current_socket_power"] = value
            out["firmware_timestamp"] = 0 if fault == "zero" else 0xFFFFFFFFFFFFFFFF
    return out


# -------------------------------------------------------------------------------- clocks and violation status
def _updates_before(t_rel_ns: int) -> int:
    """Firmware updates published before epoch-relative `t_rel_ns` (stalls ignored)."""
    cfg = _STATE.config
    return max(0, -(-(t_rel_ns - cfg.firmware_phase_ns) // cfg.firmware_period_ns))


def _violation_counts(t_upd: int) -> tuple[int, dict[str, int], dict[str, bool]]:
    """(acc_counter, {kind: acc}, {kind: active}) at the update published at epoch-relative `t_upd`."""
    counter = _updates_before(t_upd + 1)
    acc, active = {}, {}
    for kind in VIOLATION_KINDS:
        spans = _STATE.config.violations.get(kind, [])
        acc[kind] = sum(_updates_before(min(hi, t_upd + 1)) - _updates_before(lo) for lo, hi in spans if lo <= t_upd)
        active[kind] = any(lo <= t_upd < hi for lo, hi in spans)
    return counter, acc, active


def amdsmi_get_clock_info(processor_handle: ProcessorHandle, clock_type: AmdSmiClkType) -> dict[str, Any]:
    """The current clock (MHz) as amdsmi 7.0 returns it: clk, min_clk, max_clk, clk_locked, clk_deep_sleep."""
    _enter("amdsmi_get_clock_info", processor_handle)
    if not isinstance(clock_type, AmdSmiClkType):
        raise AmdSmiParameterException(clock_type, AmdSmiClkType)
    cfg = _STATE.config
    if clock_type == AmdSmiClkType.GFX:
        _, _, active = _violation_counts(update_time_ns())
        clk, lo, hi = (cfg.throttled_gfx_mhz if any(active.values()) else cfg.gfx_mhz), 500, cfg.gfx_mhz
    elif clock_type == AmdSmiClkType.MEM:
        clk, lo, hi = cfg.mem_mhz, 900, cfg.mem_mhz
    else:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    return {"clk": clk, "min_clk": lo, "max_clk": hi, "clk_locked": False, "clk_deep_sleep": 0}


def amdsmi_get_violation_status(processor_handle: ProcessorHandle) -> dict[str, Any]:
    """The violation status as amdsmi 6.4-7.0 return it (amdsmi_interface.py): reference_timestamp (CPU, us),
    violation_timestamp (ns), acc_counter, acc_/per_/active_<kind> (VIOLATION_KINDS), and the per-XCP lists, here
    all "N/A" as on a GPU whose driver does not fill them."""
    _enter("amdsmi_get_violation_status", processor_handle)
    if not _STATE.config.violation_supported:
        raise AmdSmiLibraryException(AMDSMI_STATUS_NOT_SUPPORTED)
    now = _STATE.clock()
    t_upd = update_time_ns(now)
    counter, acc, active = _violation_counts(t_upd)
    out: dict[str, Any] = {
        "reference_timestamp": now // 1000,
        "violation_timestamp": t_upd,
        "acc_counter": counter,
        "acc_gfx_clk_below_host_limit": NA,
    }
    for kind in VIOLATION_KINDS:
        out[f"acc_{kind}"] = acc[kind]
        out[f"per_{kind}"] = acc[kind] * 100 // counter if counter else NA
        out[f"active_{kind}"] = active[kind]
    for prefix in ("acc", "per", "active"):
        for part in ("gfx_clk_below_host_limit_pwr", "gfx_clk_below_host_limit_thm", "low_utilization"):
            out[f"{prefix}_{part}"] = [[NA] * 8 for _ in range(8)]
    return out


# -------------------------------------------------------------------------------- installing as `amdsmi`
IMPORT_FAILURES = ("missing_package", "missing_library", "missing_library_oserror", "version_mismatch")


class _FailingLoader(importlib.abc.Loader):
    def __init__(self, failure: str) -> None:
        self.failure = failure

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None

    def exec_module(self, module: Any) -> None:
        if self.failure == "missing_package":
            raise ModuleNotFoundError("No module named 'amdsmi'", name="amdsmi")
        if self.failure == "missing_library":
            # amdsmi_wrapper.py: catches the OSError, prints it, goes on, then needs the library.
            sys.stdout.write(
                f"{os.getcwd()}/libamd_smi.so: cannot open shared object file: No such file or directory\n"
                "Unable to find amdsmi library try installing amd-smi-lib from your package manager\n"
            )
            raise KeyError("libamd_smi.so")
        if self.failure == "missing_library_oserror":
            raise OSError("libamd_smi.so: cannot open shared object file: No such file or directory")
        if self.failure == "version_mismatch":
            raise AttributeError("/opt/rocm/lib/libamd_smi.so: undefined symbol: amdsmi_get_gpu_metrics_header_info")
        raise AssertionError(self.failure)


class _FailingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, failure: str) -> None:
        self.failure = failure

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != "amdsmi":
            return None
        return importlib.util.spec_from_loader(fullname, _FailingLoader(self.failure))


@contextlib.contextmanager
def installed(failure: str | None = None) -> Iterator[Any]:
    """Make ``import amdsmi`` give this fake (failure None) or fail the way `failure` says
    (one of IMPORT_FAILURES). Restores sys.modules and sys.meta_path afterwards."""
    saved = sys.modules.pop("amdsmi", None)
    finder = None
    try:
        if failure is None:
            sys.modules["amdsmi"] = sys.modules[__name__]
        else:
            if failure not in IMPORT_FAILURES:
                raise ValueError(f"unknown import failure {failure!r}; one of {IMPORT_FAILURES}")
            finder = _FailingFinder(failure)
            sys.meta_path.insert(0, finder)
        yield sys.modules[__name__]
    finally:
        if finder is not None:
            sys.meta_path.remove(finder)
        sys.modules.pop("amdsmi", None)
        if saved is not None:
            sys.modules["amdsmi"] = saved
