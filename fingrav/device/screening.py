"""What a power sampler does with readings that cannot be real: one home for the NVML and amdsmi pollers.

GPU-side module: standard library + numpy. A vendor poller never passes on a reading that cannot be real and never
drops one silently: it sets it aside, counts it under one of `FAULT_KINDS` in its stats and says so in the stats'
``"warnings"`` (the sampler host logs each in the collecting process), or it fails loudly (`unknown_value`: a value
of a type the poller does not know is a DeviceError, since reading it as a number would give plausible garbage).
What the poller kept is screened once more by the analysis (`fingrav.analysis.samples`, the `nonphysical_samples`
flag), with the same limit (`fingrav.contracts.flags.MAX_PLAUSIBLE_MW`).

* non-physical: not finite, <= 0 mW (0 is a driver's "no value"), above 5 kW, or an all-ones "not available"
  pattern of a 16-, 32- or 64-bit field (`SENTINELS`);
* a timestamp that steps backwards, or one timestamp with two different readings (neither can be trusted);
* an energy counter that goes backwards (`EnergyCounter`: the reading is dropped, never turned into a negative
  energy);
* a step of the host's wall clock (NTP, settimeofday), where a vendor stamps its samples with it
  (`fingrav.device.hostclock.WallClock`).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fingrav.contracts.flags import MAX_PLAUSIBLE_MW
from fingrav.errors import DeviceError

logger = logging.getLogger(__name__)

# the all-ones "not available" patterns of unsigned 16-, 32- and 64-bit fields
SENTINELS = frozenset({0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF})
FAULT_KINDS = (
    "nonphysical",  # not finite, <= 0, > 5 kW or a sentinel
    "time_backwards",  # a timestamp before the previous one
    "conflicting_duplicates",  # one timestamp, different readings
    "counter_backwards",  # an energy counter lower than before
    "clock_steps",  # the host's wall clock stepped (samples stamped with it around the step set aside)
)
MAX_WARNINGS = 50  # per poller: a storm of faults is counted, not logged line by line


def is_sentinel(value: float | int) -> bool:
    """An all-ones "not available" pattern (0xFFFF, 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF)."""
    return isinstance(value, int | float) and math.isfinite(value) and int(value) in SENTINELS


def physical_mw(v: float) -> bool:
    """A total-power reading (mW) that can be real: finite, > 0 (0 is "no value"), not a sentinel, <= 5 kW."""
    return math.isfinite(v) and 0.0 < v <= MAX_PLAUSIBLE_MW and not is_sentinel(v)


def unknown_value(what: str, value: Any) -> DeviceError:
    """The error for a value of a type the poller does not know (raise it: never read it as a number)."""
    return DeviceError(f"{what}: unknown value type {type(value).__name__} ({value!r:.60}): not read as a number")


class FaultLog:
    """The fault counters of one poller, kept in its JSON-able `stats` dict (every kind of `FAULT_KINDS` starts at
    0), with a warning in ``stats["warnings"]`` (and the log) whenever a count has grown since the last `report`."""

    def __init__(self, source: str, stats: dict[str, Any]) -> None:
        self.source = source
        self.stats = stats
        for kind in FAULT_KINDS:
            stats.setdefault(kind, 0)
        stats.setdefault("warnings", [])
        self._reported: dict[str, int] = {}

    def warn(self, msg: str) -> None:
        """Log `msg` and keep it for the parent (at most MAX_WARNINGS)."""
        logger.warning("%s: %s", self.source, msg)
        if len(self.stats["warnings"]) < MAX_WARNINGS:
            self.stats["warnings"].append(msg)

    def count(self, kind: str, n: int = 1) -> None:
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault kind {kind!r}")
        self.stats[kind] += n

    def report(self) -> None:
        """A warning per fault kind whose count grew since the last report."""
        for kind in FAULT_KINDS:
            n = self.stats[kind]
            if n and n != self._reported.get(kind):
                self._reported[kind] = n
                self.warn(f"power readings set aside or out of order: {kind} = {n}")


class EnergyCounter:
    """Screens the readings of a cumulative energy counter (mJ): a reading lower than the last one (a counter that
    went backwards: a reset, a wrap not undone, a driver fault) or not finite is dropped (None) and counted, so that
    no energy difference is ever negative or made of garbage; the counter's next readings are compared with the
    one after the step back (a reset counts up from there). `what`: the counter's name, for the warnings."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.last: float | None = None
        self.backwards = 0
        self.nonfinite = 0

    def check(self, mj: float | None) -> float | None:
        """`mj` when it can be right, else None (logged: the first 5 times of each kind)."""
        if mj is None:
            return None
        if not math.isfinite(mj):
            self.nonfinite += 1
            if self.nonfinite <= 5:
                logger.warning("%s: reading %r is not a number: dropped", self.what, mj)
            return None
        if self.last is not None and mj < self.last:
            self.backwards += 1
            if self.backwards <= 5:
                logger.warning(
                    "%s went backwards (%.3f mJ after %.3f mJ): reading dropped (%d so far)",
                    self.what,
                    mj,
                    self.last,
                    self.backwards,
                )
            self.last = mj
            return None
        self.last = mj
        return mj
