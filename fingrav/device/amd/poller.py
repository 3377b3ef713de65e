"""amdsmi power polling on AMD Instinct GPUs: the vendor poller of the sampler host, and the derivation.

GPU-side module: standard library + numpy. amdsmi is never imported here at module level: the poller is
handed the module (in-process, tests pass the fake), and the sampler process imports it by name
(`open_poller`, ``AMDSMISamplerConfig.module_name``) in `fingrav.device.sampler_host`.

What is read
------------
Every ``period_ns`` (default 1 ms) the poller calls ``amdsmi_get_gpu_metrics_info(handle)`` (reader
"metrics") or ``amdsmi_get_energy_count(handle)`` (reader "energy_count") and stamps the read with the
host clock (`fingrav.device.hostclock.host_ns`, CLOCK_MONOTONIC, midpoint of the call: a step of the wall
clock cannot move a stamp). Fields used, with amdsmi's units:

* ``firmware_timestamp``: time the power-management firmware (PMFW) published the table, 10 ns ticks.
  A new value means new data; reads that return the same value are dropped (counted as duplicates).
* ``energy_accumulator``: socket energy in ticks of ``counter_resolution`` uJ (15.3 uJ on MI300X as
  reported by ``amdsmi_get_energy_count``; the header says 15.259 uJ = 2**-16 J), 64 bits.
* ``current_socket_power`` (fallback ``average_socket_power``): integer W.
* ``system_clock_counter``: the driver's timestamp of the read (ns); the time base when
  ``firmware_timestamp`` is "N/A".

Derivation (``PowerDeriver``, pure)
-----------------------------------
Power of the interval between two firmware updates = energy-accumulator difference x resolution /
firmware-timestamp difference; with 15.3 uJ ticks over a 1 ms update period that is a 15 mW step,
against 1 W for the integer power field, so source "auto" uses energy whenever the accumulator and
its resolution are available and falls back to the power field otherwise. The accumulator may wrap
(modulo 2**energy_bits); a difference above half the range, or a firmware clock that steps back,
is a counter reset (GPU reset): the interval is dropped and recorded as a gap. An interval longer
than ``gap_factor`` x the nominal update period (configured, or the median of the last intervals)
is a gap as well (the poller stalled, the firmware did not publish, reads failed).

Faults (`fingrav.device.screening`: set aside, counted in the poller's ``stats``, warned about; never silent)
---------------------------------------------------------------------------------------------------------
* a read whose firmware timestamp, energy accumulator or power field is 0 or an all-ones pattern (0xFFFF,
  0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF: "not available" that amdsmi did not turn into "N/A"), or whose derived
  total power is not physical (<= 0, > 5 kW): "nonphysical", the read is set aside (the next good read spans
  the interval, a gap when it is long);
* a firmware timestamp that steps backwards: "time_backwards", the interval is dropped, a gap;
* a read with the firmware timestamp of the last update but other values: "conflicting_duplicates", neither
  can be trusted: the samples of that update are taken back (when not drained yet), the next read starts
  afresh and the time in between is a gap;
* an energy accumulator that goes backwards (not a wrap): "counter_backwards", the interval dropped, a gap;
* a value of an unknown type (not an integer or "N/A": a float, a string, a list) in a field fingrav reads:
  a DeviceError (`fingrav.device.screening.unknown_value`), never a guess.

Every sample is stamped with the host time of the read that first saw the update (the firmware's
own time is kept beside it, ``SampleBatch.firmware_ns``); the sensor's delay against the host clock
is what fingrav's calibration measures.

Component channels
------------------
"xcd" (compute dies), "iod" (I/O dies, AMD's "AID") and "hbm" are reported when the metrics table
carries a per-component energy accumulator (``component_fields``, default ``xcd_energy_acc``,
``aid_energy_acc``, ``hbm_energy_acc``). **No amdsmi release through 7.0 (gpu_metrics <= 1.8) has such
fields for MI300X**: only the MI300A's CPU-side HSMP metrics table carries XCD/AID/HBM energy, as
rounded kJ strings. On a real MI300X the sampler therefore reports "total" only, and says so in
``describe()``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fingrav.device import hostclock
from fingrav.device.amd.library import NA, call_amdsmi, init_amdsmi, shut_down
from fingrav.device.base import PowerSamples
from fingrav.device.sampler_host import PollSchedule
from fingrav.device.screening import FaultLog, is_sentinel, physical_mw, unknown_value
from fingrav.errors import DeviceError

logger = logging.getLogger(__name__)

FIRMWARE_TICK_NS = 10  # gpu_metrics.firmware_timestamp resolution
POWER_FIELDS = ("current_socket_power", "average_socket_power")  # W, integers
# channel -> metrics-table field holding its energy accumulator (hypothetical: see module docstring)
DEFAULT_COMPONENT_FIELDS: tuple[tuple[str, str], ...] = (
    ("xcd", "xcd_energy_acc"),
    ("iod", "aid_energy_acc"),
    ("hbm", "hbm_energy_acc"),
)
SOURCES = ("auto", "energy", "power")
READERS = ("metrics", "energy_count")
_POWER_FIELD_STEP_MW = 1000.0  # the power fields are whole watts
_NOMINAL_PERIOD_NS = 1_000_000  # assumed update period before one is known (MI300X PMFW: ~1 ms)
_MIN_DELTAS_FOR_MEDIAN = 8


def is_na(value: Any) -> bool:
    """amdsmi marks fields the ASIC does not fill as the string "N/A" (UINT_MAX in C)."""
    return value is None or (isinstance(value, str) and value.strip().upper() == NA)


def _as_int(value: Any, what: str = "amdsmi field") -> int | None:
    """An integer field: its value, None for "N/A" (or absent); anything else (a float, another string, a bool, a
    list) is a value of an unknown type: DeviceError, never a guess."""
    if is_na(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise unknown_value(what, value)


def _present(metrics: Mapping[str, Any], name: str) -> bool:
    """Whether an integer field is filled (checked strictly: `_as_int`)."""
    return _as_int(metrics.get(name), f"amdsmi metrics field {name}") is not None


# ----------------------------------------------------------------------------------------- configuration
@dataclass(frozen=True)
class AMDSMISamplerConfig:
    """How to poll one GPU. Picklable (it travels to the sampler process).

    index: amdsmi processor index; period_ns: poll period (ns); source: "auto" | "energy" | "power";
    reader: "metrics" | "energy_count"; energy_bits: accumulator width; component_fields: (channel,
    metrics field) pairs; firmware_period_ns: nominal firmware update period for gap detection (None:
    the median of observed intervals); gap_factor: an interval longer than this many nominal periods is a
    gap; max_consecutive_errors: failed reads in a row before the poller gives up;
    counter_resolution_uj: uJ per accumulator tick (None: ask amdsmi_get_energy_count); module_name: what
    the sampler process imports as amdsmi (tests: "fingrav.testing.fakes.fake_amdsmi")."""

    index: int = 0
    period_ns: int = 1_000_000
    source: str = "auto"
    reader: str = "metrics"
    energy_bits: int = 64
    component_fields: tuple[tuple[str, str], ...] = DEFAULT_COMPONENT_FIELDS
    firmware_period_ns: int | None = None
    gap_factor: float = 3.0
    max_consecutive_errors: int = 200
    counter_resolution_uj: float | None = None
    module_name: str = "amdsmi"

    def __post_init__(self) -> None:
        if self.period_ns <= 0:
            raise ValueError(f"period_ns must be > 0, got {self.period_ns}")
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, got {self.source!r}")
        if self.reader not in READERS:
            raise ValueError(f"reader must be one of {READERS}, got {self.reader!r}")
        if not 8 <= self.energy_bits <= 64:
            raise ValueError(f"energy_bits must be in [8, 64], got {self.energy_bits}")
        if self.gap_factor <= 1.0:
            raise ValueError(f"gap_factor must be > 1, got {self.gap_factor}")

    @property
    def schedule(self) -> PollSchedule:
        """Poll every `period_ns`, busy-waiting the last 100 us (the firmware publishes every ~1 ms); a poll
        late by up to one period is made at once."""
        return PollSchedule(period_ns=self.period_ns, spin_ns=100_000, catch_up=True)


# ----------------------------------------------------------------------------------------- channel plan
@dataclass(frozen=True)
class ChannelPlan:
    """What a metrics table allows: channels ("total" first), the total's source ("energy" | "power"),
    the power field used when the source is "power", component channels absent and why."""

    channels: tuple[str, ...]
    source: str
    power_field: str | None
    component_fields: tuple[tuple[str, str], ...]
    missing_components: tuple[str, ...]
    note: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "channels": list(self.channels),
            "total_source": self.source,
            "power_field": self.power_field,
            "component_channels_available": len(self.channels) > 1,
            "component_fields": {ch: f for ch, f in self.component_fields},
            "missing_components": list(self.missing_components),
            "note": self.note,
        }


def _auto_source(
    energy_ok: bool, counter_resolution_uj: float | None, power_field: str | None, nominal_period_ns: int
) -> str:
    """ "energy" when the energy accumulator resolves finer steps than the power field at the nominal period,
    else "power" where there is a power field, else "energy" where the accumulator works."""
    finer = energy_ok and counter_resolution_uj * 1e6 / nominal_period_ns < _POWER_FIELD_STEP_MW  # type: ignore[operator]
    if finer:
        return "energy"
    if power_field is not None:
        return "power"
    if energy_ok:
        return "energy"
    raise DeviceError(
        "the metrics table has neither a usable energy_accumulator (with counter resolution) nor a "
        "power field (current_socket_power / average_socket_power): nothing to sample"
    )


def _component_plan(
    metrics: Mapping[str, Any], has_res: bool, component_fields: Sequence[tuple[str, str]]
) -> tuple[list[tuple[str, str]], list[str], str]:
    """(the component channels present with their fields, those missing, a note saying which)."""
    present: list[tuple[str, str]] = []
    missing: list[str] = []
    for channel, fld in component_fields:
        if has_res and _present(metrics, fld):
            present.append((channel, fld))
        else:
            missing.append(channel)
    if present:
        note = "component channels from the metrics table's per-component energy accumulators: " + ", ".join(
            f"{c}={f}" for c, f in present
        )
    else:
        note = (
            "total only: this metrics table has no per-component (XCD/IOD/HBM) power or energy fields "
            "(none exist in amdsmi_get_gpu_metrics_info through amdsmi 7.0 / gpu_metrics 1.8)"
        )
    return present, missing, note


def plan_channels(
    metrics: Mapping[str, Any],
    counter_resolution_uj: float | None,
    source: str = "auto",
    component_fields: Sequence[tuple[str, str]] = DEFAULT_COMPONENT_FIELDS,
    nominal_period_ns: int = _NOMINAL_PERIOD_NS,
) -> ChannelPlan:
    """Decide channels and the total's source from one metrics read (pure)."""
    has_res = counter_resolution_uj is not None and counter_resolution_uj > 0
    energy_ok = has_res and _present(metrics, "energy_accumulator")
    power_field = next((f for f in POWER_FIELDS if _present(metrics, f)), None)
    if source == "energy" and not energy_ok:
        raise DeviceError(
            "power source 'energy' needs energy_accumulator and a counter resolution, but the metrics table "
            f"has energy_accumulator={metrics.get('energy_accumulator')!r}, resolution={counter_resolution_uj!r}"
        )
    if source == "power" and power_field is None:
        raise DeviceError("power source 'power' needs current_socket_power or average_socket_power; both are N/A")
    if source == "auto":
        source = _auto_source(energy_ok, counter_resolution_uj, power_field, nominal_period_ns)
    present, missing, note = _component_plan(metrics, has_res, component_fields)
    return ChannelPlan(
        channels=("total", *(c for c, _ in present)),
        source=source,
        power_field=power_field if source == "power" else None,
        component_fields=tuple(present),
        missing_components=tuple(missing),
        note=note,
    )


# ----------------------------------------------------------------------------------------- derivation
@dataclass
class SampleBatch:
    """Samples derived since the last take, plus one row per firmware update they came from.

    host_ns: host stamp given to the update's samples (int64 ns); firmware_ns: the update's firmware
    time (firmware_timestamp x 10 ns, or the driver clock when the firmware's is N/A; int64, -1 unknown);
    reads / duplicates / errors: poll counts over the same span."""

    samples: PowerSamples
    host_ns: np.ndarray
    firmware_ns: np.ndarray
    reads: int = 0
    duplicates: int = 0
    errors: int = 0

    @staticmethod
    def empty() -> SampleBatch:
        return SampleBatch(PowerSamples.empty(), np.zeros(0, np.int64), np.zeros(0, np.int64))

    @staticmethod
    def concat(parts: Sequence[SampleBatch]) -> SampleBatch:
        if not parts:
            return SampleBatch.empty()
        return SampleBatch(
            PowerSamples.concat([p.samples for p in parts]),
            np.concatenate([p.host_ns for p in parts]).astype(np.int64),
            np.concatenate([p.firmware_ns for p in parts]).astype(np.int64),
            sum(p.reads for p in parts),
            sum(p.duplicates for p in parts),
            sum(p.errors for p in parts),
        )


@dataclass
class _Update:
    key: Any
    host_ns: int
    stamp_ns: int | None
    energies: dict[str, int | None]
    watts: int | None
    since_ns: int | None = None  # host time of the update before it (its samples cover since_ns .. host_ns)
    rows: int = 0  # samples it produced
    suspect: bool = False  # its stamp or counter stepped back: no interval is computed from it either


@dataclass
class DeriverStats:
    reads: int = 0
    duplicates: int = 0
    updates: int = 0
    resets: int = 0
    gaps: int = 0
    errors: int = 0
    intervals_ns: list[int] = field(default_factory=list)


class PowerDeriver:
    """Turns successive metrics reads (host stamp, amdsmi dict) into power samples. Pure: no amdsmi,
    no clock; feed() it and take() the samples. See the module docstring for the rules."""

    def __init__(
        self,
        counter_resolution_uj: float | None,
        source: str = "auto",
        energy_bits: int = 64,
        component_fields: Sequence[tuple[str, str]] = DEFAULT_COMPONENT_FIELDS,
        firmware_period_ns: int | None = None,
        gap_factor: float = 3.0,
        plan: ChannelPlan | None = None,
    ) -> None:
        self.counter_resolution_uj = counter_resolution_uj
        self.requested_source = source
        self.energy_bits = energy_bits
        self.component_fields = tuple(component_fields)
        self.firmware_period_ns = firmware_period_ns
        self.gap_factor = gap_factor
        self.plan = plan
        self.stats = DeriverStats()
        self._prev: _Update | None = None
        self._t: list[int] = []
        self._ch: list[str] = []
        self._p: list[float] = []
        self._upd_host: list[int] = []
        self._upd_fw: list[int] = []
        self._gaps: list[tuple[int, int]] = []
        self._taken = DeriverStats()
        self.fault_stats: dict[str, Any] = {}
        self.faults = FaultLog("amdsmi sampler", self.fault_stats)
        self._gap_from: int | None = None  # after a conflicting duplicate: a gap from here to the next baseline
        self._conflicted: Any = None  # ... and the key of the update whose reads disagreed (never a baseline)

    @property
    def channels(self) -> tuple[str, ...] | None:
        return None if self.plan is None else self.plan.channels

    def nominal_period_ns(self) -> int | None:
        """The configured firmware period, else the median of the last observed update intervals."""
        if self.firmware_period_ns:
            return self.firmware_period_ns
        recent = self.stats.intervals_ns[-64:]
        if len(recent) >= _MIN_DELTAS_FOR_MEDIAN:
            return int(statistics.median(recent))
        return None

    def record_error(self, host_ns: int) -> None:
        """A read failed at `host_ns` (counted; a long run of them shows up as a gap)."""
        self.stats.errors += 1

    def _read(self, host_ns: int, metrics: Mapping[str, Any]) -> _Update | None:
        """The read as an update, or None when a field it needs cannot be real (0 or an all-ones pattern:
        counted as nonphysical, the read set aside)."""
        assert self.plan is not None

        def field(name: str) -> int | None:
            return _as_int(metrics.get(name), f"amdsmi field {name}")

        fw = field("firmware_timestamp")
        drv = field("system_clock_counter")
        stamp = fw * FIRMWARE_TICK_NS if fw is not None else drv
        energies = {"total": field("energy_accumulator")}
        for channel, fld in self.plan.component_fields:
            energies[channel] = field(fld)
        watts = field(self.plan.power_field) if self.plan.power_field else None
        used = [fw, *(energies[c] for c in self.plan.channels if c in energies and self.plan.source == "energy")]
        used += [energies[c] for c, _ in self.plan.component_fields]
        if any(v is not None and (v == 0 or is_sentinel(v)) for v in used) or (
            watts is not None and (watts <= 0 or is_sentinel(watts))
        ):
            self.faults.count("nonphysical")
            return None
        if fw is not None:
            key: Any = ("fw", fw)
        elif energies["total"] is not None:
            key = ("energy", energies["total"], *(energies[c] for c, _ in self.plan.component_fields))
        else:
            key = ("read", host_ns)  # nothing tells updates apart: every read is one
        return _Update(key, host_ns, stamp if stamp is not None else host_ns, energies, watts)

    def _delta(self, now: int | None, before: int | None) -> int | None:
        if now is None or before is None:
            return None
        modulus = 1 << self.energy_bits
        d = (now - before) % modulus
        return None if d > modulus // 2 else d

    def feed(self, host_ns: int, metrics: Mapping[str, Any]) -> int:
        """Take one read; return how many samples (rows) it produced."""
        try:
            return self._feed(host_ns, metrics)
        finally:
            self.faults.report()

    def _feed(self, host_ns: int, metrics: Mapping[str, Any]) -> int:
        self.stats.reads += 1
        if self.plan is None:
            self.plan = plan_channels(metrics, self.counter_resolution_uj, self.requested_source, self.component_fields)
        cur = self._read(host_ns, metrics)
        if cur is None:  # set aside: the next good read spans its interval
            return 0
        prev = self._prev
        if prev is None and self._conflicted is not None and cur.key == self._conflicted:
            self.stats.duplicates += 1  # another read of the update whose reads disagreed
            return 0
        if prev is None:
            self._start_from(cur)
            return 0
        if cur.key == prev.key:
            self.stats.duplicates += 1
            if (cur.energies, cur.watts) != (prev.energies, prev.watts):
                self._conflict(prev)
            return 0
        assert cur.stamp_ns is not None and prev.stamp_ns is not None
        dt = cur.stamp_ns - prev.stamp_ns
        cur.since_ns = prev.host_ns
        self._prev = cur
        self.stats.updates += 1
        if dt <= 0:
            if dt < 0:
                self.faults.count("time_backwards")
            cur.suspect = True  # its stamp or the one before is wrong: neither interval can be trusted
            self._reset(prev, cur, f"update clock went from {prev.stamp_ns} to {cur.stamp_ns} ns")
            return 0
        if prev.suspect:
            self._reset(prev, cur, "the interval after a step back")
            return 0
        self._note_interval(prev, cur, dt)
        values = self._channel_powers(prev, cur, dt)
        if values is None:
            return 0
        if any(ch == "total" and not physical_mw(mw) for ch, mw in values):  # e.g. a counter that leapt ahead
            self.faults.count("nonphysical")
            cur.suspect = True
            self.stats.gaps += 1
            self._gaps.append((prev.host_ns, cur.host_ns))
            return 0
        for channel, power_mw in values:
            self._t.append(cur.host_ns)
            self._ch.append(channel)
            self._p.append(power_mw)
        self._upd_host.append(cur.host_ns)
        self._upd_fw.append(cur.stamp_ns)
        cur.rows = len(values)
        return len(values)

    def _start_from(self, cur: _Update) -> None:
        """The first good update (after the start or a reset): the next one's interval starts here; a gap open
        since a reset closes."""
        self._prev = cur
        self._conflicted = None
        if self._gap_from is not None:
            self.stats.gaps += 1
            self._gaps.append((self._gap_from, cur.host_ns))
            self._gap_from = None

    def _note_interval(self, prev: _Update, cur: _Update, dt: int) -> None:
        """Count an update interval of `dt` ns (a gap when longer than gap_factor x the nominal period)."""
        nominal = self.nominal_period_ns()
        if nominal is not None and dt > self.gap_factor * nominal:
            self.stats.gaps += 1
            self._gaps.append((prev.host_ns, cur.host_ns))
            logger.debug("sample gap: %d ns between updates (nominal %d ns)", dt, nominal)
        self.stats.intervals_ns.append(dt)
        if len(self.stats.intervals_ns) > 256:
            del self.stats.intervals_ns[:128]

    def _channel_powers(self, prev: _Update, cur: _Update, dt: int) -> list[tuple[str, float]] | None:
        """(channel, mW) over the interval from `prev` to `cur` (`dt` ns): the total's power field, or each
        channel's energy accumulator difference x resolution / dt; None (and a reset) when an accumulator went
        back or is N/A."""
        assert self.plan is not None
        res = self.counter_resolution_uj
        values: list[tuple[str, float]] = []
        for channel in self.plan.channels:
            if channel == "total" and self.plan.source == "power":
                if cur.watts is None:
                    continue
                values.append((channel, cur.watts * 1000.0))
                continue
            now_e, before_e = cur.energies.get(channel), prev.energies.get(channel)
            d = self._delta(now_e, before_e)
            if d is None or res is None:
                if now_e is not None and before_e is not None:
                    self.faults.count("counter_backwards")
                    cur.suspect = True
                self._reset(prev, cur, f"{channel} energy accumulator went back or is N/A")
                return None
            values.append((channel, d * res / dt * 1e6))  # uJ / ns = 1e3 W = 1e6 mW
        return values

    def _conflict(self, update: _Update) -> None:
        """A read with the stamp of `update` but other values: neither can be trusted. Its samples are taken back
        when still here (the last ones), the next read is a new baseline and the time from the update before it
        to that baseline is a gap."""
        self.faults.count("conflicting_duplicates")
        if update.rows and self._upd_host and self._upd_host[-1] == update.host_ns:
            del self._t[-update.rows :], self._ch[-update.rows :], self._p[-update.rows :]
            del self._upd_host[-1], self._upd_fw[-1]
        self._gap_from = update.since_ns if update.since_ns is not None else update.host_ns
        self._conflicted = update.key
        self._prev = None

    def _reset(self, prev: _Update, cur: _Update, why: str) -> None:
        self.stats.resets += 1
        self.stats.gaps += 1
        self._gaps.append((prev.host_ns, cur.host_ns))
        logger.warning("amdsmi counters reset (%s); interval dropped and recorded as a gap", why)

    def take(self) -> SampleBatch:
        """Samples derived since the last take (and their gaps); the baseline is kept."""
        batch = SampleBatch(
            PowerSamples(
                np.asarray(self._t, dtype=np.int64),
                np.asarray(self._ch, dtype=object),
                np.asarray(self._p, dtype=np.float64),
                list(self._gaps),
            ),
            np.asarray(self._upd_host, dtype=np.int64),
            np.asarray(self._upd_fw, dtype=np.int64),
            reads=self.stats.reads - self._taken.reads,
            duplicates=self.stats.duplicates - self._taken.duplicates,
            errors=self.stats.errors - self._taken.errors,
        )
        self._taken = DeriverStats(self.stats.reads, self.stats.duplicates, errors=self.stats.errors)
        self._t, self._ch, self._p, self._upd_host, self._upd_fw, self._gaps = [], [], [], [], [], []
        return batch


# ----------------------------------------------------------------------------------------- polling
def counter_resolution(smi: Any, handle: Any) -> float | None:
    """uJ per energy-accumulator tick from amdsmi_get_energy_count, or None when unavailable."""
    try:
        info = call_amdsmi(smi, "amdsmi_get_energy_count", handle)
    except DeviceError as exc:
        logger.warning("amdsmi_get_energy_count failed (%s): no counter resolution, energy not usable", exc)
        return None
    res = info.get("counter_resolution") if isinstance(info, Mapping) else None
    if is_na(res):
        return None
    try:
        value = float(res)
    except (TypeError, ValueError):
        return None
    return value if value > 0 else None


def energy_count_as_metrics(info: Mapping[str, Any]) -> dict[str, Any]:
    """amdsmi_get_energy_count's dict in metrics-table terms (its key was "power" before amdsmi 6.2.1)."""
    acc = info.get("energy_accumulator", info.get("power"))
    return {"energy_accumulator": acc, "system_clock_counter": info.get("timestamp"), "firmware_timestamp": NA}


class MetricsPoller:
    """Polls one GPU through an amdsmi-like module `smi` (already initialized) and derives samples: the
    `fingrav.device.sampler_host.Poller` of amdsmi, usable in-process too (synchronous: `poll()` does one
    read). clock: the host clock the reads are stamped with (`fingrav.device.hostclock.host_ns`, never the wall
    clock; tests pass a manual one); owns_library: close() shuts amdsmi down (set by `open_poller`)."""

    def __init__(
        self,
        smi: Any,
        handle: Any,
        config: AMDSMISamplerConfig,
        clock: Callable[[], int] = hostclock.host_ns,
        *,
        owns_library: bool = False,
    ) -> None:
        self.smi = smi
        self.handle = handle
        self.config = config
        self.clock = clock
        self.schedule = config.schedule
        self._owns_library = owns_library
        res = config.counter_resolution_uj
        self.counter_resolution_uj = res if res is not None else counter_resolution(smi, handle)
        t0 = clock()
        first = self.read()
        t1 = clock()
        plan = plan_channels(
            first,
            self.counter_resolution_uj,
            config.source,
            config.component_fields,
            config.firmware_period_ns or _NOMINAL_PERIOD_NS,
        )
        self.deriver = PowerDeriver(
            self.counter_resolution_uj,
            plan.source,
            config.energy_bits,
            plan.component_fields,
            config.firmware_period_ns,
            config.gap_factor,
            plan=plan,
        )
        self._consecutive_errors = 0
        self.last_error: str | None = None
        self.deriver.feed((t0 + t1) // 2, first)  # the baseline

    @property
    def plan(self) -> ChannelPlan:
        assert self.deriver.plan is not None
        return self.deriver.plan

    def read(self) -> dict[str, Any]:
        """One raw read, in metrics-table terms."""
        if self.config.reader == "energy_count":
            return energy_count_as_metrics(call_amdsmi(self.smi, "amdsmi_get_energy_count", self.handle))
        return dict(call_amdsmi(self.smi, "amdsmi_get_gpu_metrics_info", self.handle))

    def poll(self) -> int:
        """Read once and feed the deriver; return the samples produced. A failed read is counted; after
        `max_consecutive_errors` failures in a row the last DeviceError propagates."""
        t0 = self.clock()
        try:
            metrics = self.read()
        except DeviceError as exc:
            self._consecutive_errors += 1
            self.last_error = str(exc)
            self.deriver.record_error(t0)
            if self._consecutive_errors >= self.config.max_consecutive_errors:
                raise DeviceError(f"{self._consecutive_errors} failed reads in a row; last: {exc}") from exc
            return 0
        t1 = self.clock()
        self._consecutive_errors = 0
        return self.deriver.feed((t0 + t1) // 2, metrics)

    def start(self) -> None:
        """Nothing to do: the baseline read was made when the poller was opened (the sampler host starts
        this poller as soon as it is ready)."""

    def stop(self) -> None:
        """Nothing to do: the deriver keeps its baseline."""

    def take(self) -> SampleBatch:
        return self.deriver.take()

    @property
    def stats(self) -> dict[str, Any]:
        """The deriver's counters (reads, duplicates, updates, resets, gaps, errors), its fault counts and warnings
        (`fingrav.device.screening.FAULT_KINDS`; the sampler host logs the warnings in the parent) and the last
        error."""
        st = self.deriver.stats
        return {
            "reads": st.reads,
            "duplicates": st.duplicates,
            "updates": st.updates,
            "resets": st.resets,
            "gaps": st.gaps,
            "errors": st.errors,
            **self.deriver.fault_stats,
            "last_error": self.last_error,
        }

    def close(self) -> None:
        """Shut amdsmi down when this poller opened it (`open_poller`)."""
        if self._owns_library:
            self._owns_library = False
            shut_down(self.smi)

    def describe(self) -> dict[str, Any]:
        return {
            "reader": self.config.reader,
            "poll_period_ns": self.config.period_ns,
            "counter_resolution_uj": self.counter_resolution_uj,
            "energy_bits": self.config.energy_bits,
            "gap_factor": self.config.gap_factor,
            "firmware_period_ns": self.config.firmware_period_ns,
            **self.plan.as_dict(),
        }


def open_poller(config: AMDSMISamplerConfig) -> MetricsPoller:
    """The sampler host's factory (runs in the sampler process): import and initialize amdsmi (module
    `config.module_name`), open GPU `config.index` and return its poller, which shuts amdsmi down when
    closed."""
    smi = importlib.import_module(config.module_name)
    try:
        init_amdsmi(smi)
        handles = call_amdsmi(smi, "amdsmi_get_processor_handles")
        if config.index >= len(handles):
            raise DeviceError(f"amdsmi GPU index {config.index} not found ({len(handles)} GPUs)")
        return MetricsPoller(smi, handles[config.index], config, owns_library=True)
    except BaseException:
        with contextlib.suppress(Exception):  # best effort on the way out
            shut_down(smi)
        raise
