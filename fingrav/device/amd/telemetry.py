"""amdsmi clock and violation-status telemetry, discovered at run time: the AMD side of what a limiter did during a run.

GPU-side module: standard library only (amdsmi is handed in). `AMDSMITelemetry(smi, handle)` finds out ONCE what the
installed amdsmi and the GPU offer, then `read()` reads it (a `fingrav.device.base.ClockTelemetry`):

* GFX and memory clocks: ``amdsmi_get_clock_info(handle, AmdSmiClkType.GFX / MEM)["clk"]`` (MHz);
* the violation status (``amdsmi_get_violation_status``, amdsmi >= 6.3, MI300 and later; older ASICs answer
  AMDSMI_STATUS_NOT_SUPPORTED): its ``acc_*`` accumulators (``acc_counter``, the count they accumulate against, and
  one per kind: ``acc_ppt_pwr`` = PVIOL, package power tracking; ``acc_socket_thrm`` = TVIOL; ``acc_prochot_thrm``,
  ``acc_vr_thrm``, ``acc_hbm_thrm``) become `ClockTelemetry.violation` (unit: accumulator counts; a run's violation
  fraction is its increase of ``acc_<kind>`` over its increase of ``acc_counter``), its ``per_*`` percentages
  `ClockTelemetry.fields` (%), and the kinds whose ``active_*`` flag is set `ClockTelemetry.reason_names`. amdsmi
  has no reasons bitmask (`ClockTelemetry.reasons` is None). Which keys exist is read from the answer, not assumed:
  a key answering "N/A" (or a per-partition list) is left out.

Each item is probed once; a missing function, NOT_SUPPORTED or any other failure makes it absent, with the reason
(`describe()["absent"]`). Errors are wrapped once, by `fingrav.device.amd.library.call_amdsmi`. A read that fails for
one item records the message in `ClockTelemetry.errors` and reads the rest. Not run on an AMD GPU yet (the fake
follows amdsmi 7.0.2's amdsmi_interface.py); the cost of a read on hardware is in `ClockTelemetry.read_ns`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from fingrav.device.amd.library import call_amdsmi
from fingrav.device.amd.poller import is_na
from fingrav.device.base import ClockTelemetry
from fingrav.device.hostclock import host_ns
from fingrav.errors import FingravError

logger = logging.getLogger(__name__)

#: clocks read, as (record key, AmdSmiClkType member)
CLOCKS: tuple[tuple[str, str], ...] = (("sm", "GFX"), ("mem", "MEM"))
VIOLATION_FUNCTION = "amdsmi_get_violation_status"
VIOLATION_UNIT = "amdsmi accumulator counts (acc_counter is the reference)"
NOT_SUPPORTED = 2  # amdsmi_wrapper.AMDSMI_STATUS_NOT_SUPPORTED: absent, not a fault


def _scalar(value: Any) -> bool:
    """An amdsmi value that is one number (not "N/A", not a per-partition list, not a bool)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not is_na(value)


class AMDSMITelemetry:
    """Run-time discovery (in the constructor) and reads (`read`) of one AMD GPU's clocks and violation status.

    smi: the amdsmi module (or the fake); handle: its processor handle; clock_ns: the host clock stamped on each read
    (`fingrav.device.hostclock.host_ns`)."""

    def __init__(self, smi: Any, handle: Any, clock_ns: Callable[[], int] = host_ns) -> None:
        self.smi = smi
        self.handle = handle
        self.clock_ns = clock_ns
        self.absent: dict[str, str] = {}
        self.clocks: dict[str, Any] = {}
        self.counters: list[str] = []
        self.percents: list[str] = []
        self.flags: list[str] = []
        self.read_failures = 0
        self._discover()
        logger.info(
            "amdsmi telemetry: clocks %s, %d violation counters, %d active flags (%d absent items)",
            sorted(self.clocks),
            len(self.counters),
            len(self.flags),
            len(self.absent),
        )

    def _probe(self, what: str, name: str, *args: Any) -> tuple[bool, Any]:
        if not callable(getattr(self.smi, name, None)):
            self.absent[what] = f"amdsmi has no {name}() (amdsmi older than 6.3, or bindings without it)"
            return False, None
        try:
            return True, call_amdsmi(self.smi, name, *args)
        except FingravError as exc:
            if getattr(exc.__cause__, "err_code", None) != NOT_SUPPORTED:
                logger.warning("amdsmi telemetry: %s failed when probed, left out: %s", what, exc)
            self.absent[what] = str(exc)
            return False, None

    def _discover(self) -> None:
        clk_type = getattr(self.smi, "AmdSmiClkType", None)
        for key, member in CLOCKS:
            ct = getattr(clk_type, member, None) if clk_type is not None else None
            if ct is None:
                self.absent[f"clock_{key}"] = f"amdsmi has no AmdSmiClkType.{member}"
                continue
            ok, info = self._probe(f"clock_{key}", "amdsmi_get_clock_info", self.handle, ct)
            if ok and isinstance(info, dict) and _scalar(info.get("clk")):
                self.clocks[key] = ct
            elif ok:
                self.absent[f"clock_{key}"] = f"amdsmi_get_clock_info answers clk={info.get('clk')!r}"
        ok, status = self._probe("violation_status", VIOLATION_FUNCTION, self.handle)
        if not ok:
            return
        if not isinstance(status, dict):
            self.absent["violation_status"] = f"{VIOLATION_FUNCTION} answered {type(status).__name__}, not a dict"
            return
        for key, value in status.items():
            if key.startswith("acc_") and _scalar(value):
                self.counters.append(key)
            elif key.startswith("per_") and _scalar(value):
                self.percents.append(key)
            elif key.startswith("active_") and isinstance(value, bool):
                self.flags.append(key)
            elif key.startswith(("acc_", "per_", "active_")):
                self.absent[f"violation:{key}"] = "N/A or per partition"
        if "acc_counter" not in self.counters:
            self.absent["violation:acc_counter"] = "no reference count: violation fractions cannot be formed"

    def describe(self) -> dict[str, Any]:
        """What was found (JSON-able): clocks, the violation counters, percentages and flags, the unit, and every
        absent item with the reason."""
        return {
            "clocks": sorted(self.clocks),
            "violation_function": VIOLATION_FUNCTION if self.counters or self.flags else None,
            "violation_counters": list(self.counters),
            "violation_unit": VIOLATION_UNIT,
            "fields": {name: {"unit": "%"} for name in self.percents},
            "reason_flags": list(self.flags),
            "absent": dict(self.absent),
            "read_failures": self.read_failures,
        }

    def read(self) -> ClockTelemetry:
        """One reading of everything discovered; a failed item is None / missing, with its message in `errors`."""
        t0 = time.perf_counter_ns()
        stamp = int(self.clock_ns())
        errors: dict[str, str] = {}
        clocks: dict[str, float | None] = {}
        for key, ct in self.clocks.items():
            try:
                clk = call_amdsmi(self.smi, "amdsmi_get_clock_info", self.handle, ct).get("clk")
                clocks[key] = float(clk) if _scalar(clk) else None
            except FingravError as exc:
                errors[f"clock_{key}"] = str(exc)
        violation: dict[str, int] = {}
        fields: dict[str, float] = {}
        names: list[str] = []
        if self.counters or self.flags:
            try:
                status = call_amdsmi(self.smi, VIOLATION_FUNCTION, self.handle)
            except FingravError as exc:
                errors["violation_status"] = str(exc)
                status = {}
            violation = {k: int(status[k]) for k in self.counters if _scalar(status.get(k))}
            fields = {k: float(status[k]) for k in self.percents if _scalar(status.get(k))}
            names = [k[len("active_") :] for k in self.flags if status.get(k) is True]
        if errors:
            self.read_failures += 1
            if self.read_failures <= 5:
                logger.warning("amdsmi telemetry read: %s", "; ".join(f"{k}: {v}" for k, v in errors.items()))
        return ClockTelemetry(
            host_ns=stamp,
            read_ns=time.perf_counter_ns() - t0,
            sm_mhz=clocks.get("sm"),
            mem_mhz=clocks.get("mem"),
            reasons=None,
            reason_names=tuple(names),
            violation=violation,
            violation_unit=VIOLATION_UNIT,
            fields=fields,
            errors=errors,
        )
