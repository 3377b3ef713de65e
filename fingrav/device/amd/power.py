"""AMDSMIPower: power, energy and identity of one AMD Instinct GPU through amdsmi (no torch).

GPU-side module: standard library + numpy; amdsmi is imported when an `AMDSMIPower` is made. Power is
sampled by the amdsmi poller (`fingrav.device.amd.poller`) in the sampler host's process
(`fingrav.device.sampler_host`), started by `start_sampling` and ended by `stop_sampling`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from fingrav.device import hostclock
from fingrav.device.amd.library import (
    FOLLOWED_AMDSMI,
    amdsmi_library_version,
    amdsmi_package_version,
    call_amdsmi,
    open_amdsmi,
    optional,
    shut_down,
)
from fingrav.device.amd.poller import (
    DEFAULT_COMPONENT_FIELDS,
    AMDSMISamplerConfig,
    ChannelPlan,
    MetricsPoller,
    SampleBatch,
    is_na,
    open_poller,
)
from fingrav.device.amd.telemetry import AMDSMITelemetry
from fingrav.device.amd.timestamp import MEMREALTIME
from fingrav.device.base import ClockTelemetry, PowerSamples
from fingrav.device.sampler_host import SamplerHost, Setup
from fingrav.device.screening import EnergyCounter, is_sentinel
from fingrav.errors import DeviceError

logger = logging.getLogger(__name__)


def amdsmi_sampler(config: AMDSMISamplerConfig, setup: Setup | None = None, **kwargs: Any) -> SamplerHost:
    """The sampler host running the amdsmi poller for `config` (not opened yet): it polls as soon as it is
    ready (autostart), and its child imports `config.module_name` after calling `setup`."""
    return SamplerHost(
        open_poller, config, name="amdsmi sampler", empty=SampleBatch.empty, setup=setup, autostart=True, **kwargs
    )


def metrics_version(header: Any) -> str:
    """ "format.content" of amdsmi_get_gpu_metrics_header_info's dict (gpu_metrics v1.x), else "unknown"."""
    if isinstance(header, dict) and "format_revision" in header and "content_revision" in header:
        return f"{header['format_revision']}.{header['content_revision']}"
    return "unknown"


def bdf_bus(bdf: str) -> int | None:
    """The PCI bus number of a "dddd:bb:dd.f" BDF string."""
    try:
        return int(bdf.split(":")[-2], 16)
    except (AttributeError, IndexError, ValueError):
        return None


# ----------------------------------------------------------------------------------------- power half
class AMDSMIPower:
    """The amdsmi half of the AMD backend: no torch. Opens amdsmi, reads identity and the channel plan,
    runs the sampler process, reads the energy counter. Units: ns, mW, mJ.

    index: amdsmi processor index; period_ns: poll period; source / reader / component_fields /
    firmware_period_ns / gap_factor: see `AMDSMISamplerConfig`; module_name: what is imported as
    amdsmi (the sampler process imports the same name); sampler_setup: (module, function, kwargs) the
    sampler process calls before importing it (tests configure the fake there)."""

    def __init__(
        self,
        index: int = 0,
        *,
        period_ns: int = 1_000_000,
        source: str = "auto",
        reader: str = "metrics",
        component_fields: Sequence[tuple[str, str]] = DEFAULT_COMPONENT_FIELDS,
        firmware_period_ns: int | None = None,
        gap_factor: float = 3.0,
        module_name: str = "amdsmi",
        sampler_setup: tuple[str, str, dict] | None = None,
        clock: Callable[[], int] = hostclock.host_ns,
    ) -> None:
        self.index = index
        self.module_name = module_name
        self.sampler_setup = sampler_setup
        self.smi, self.handle, self.gpu_count = open_amdsmi(index, module_name)
        self._closed = False
        asked = AMDSMISamplerConfig(
            index=index,
            period_ns=period_ns,
            source=source,
            reader=reader,
            component_fields=tuple(component_fields),
            firmware_period_ns=firmware_period_ns,
            gap_factor=gap_factor,
        )
        probe = self._probe(asked, clock)
        self.plan: ChannelPlan = probe.plan
        self.sampler_info = probe.describe()
        # The sampler process gets the resolved choices, so that it cannot decide differently.
        self.config = replace(
            asked,
            source=self.plan.source,
            component_fields=self.plan.component_fields,
            counter_resolution_uj=probe.counter_resolution_uj,
            module_name=module_name,
        )
        self.counter_resolution_uj = probe.counter_resolution_uj
        self._identity = self._read_identity()
        self.telemetry = AMDSMITelemetry(self.smi, self.handle, clock)  # what clocks / violation counters exist
        self._sampler: SamplerHost | None = None
        self._stamps: list[SampleBatch] = []
        self._energy = EnergyCounter("amdsmi energy counter (amdsmi_get_energy_count)")
        logger.info(
            "amdsmi GPU %d: %s, channels %s (%s)",
            index,
            self._identity["name"],
            ",".join(self.plan.channels),
            self.plan.note,
        )

    def _probe(self, config: AMDSMISamplerConfig, clock: Callable[[], int]) -> MetricsPoller:
        """One metrics poller in this process, to resolve the channel plan and the counter resolution (amdsmi
        shut down again when it fails)."""
        try:
            return MetricsPoller(self.smi, self.handle, config, clock)
        except Exception:
            shut_down(self.smi)
            raise

    # -- identity -------------------------------------------------------------------------
    @property
    def channels(self) -> tuple[str, ...]:
        return self.plan.channels

    def _read_identity(self) -> dict[str, Any]:
        smi, h = self.smi, self.handle
        asic = optional(smi, "amdsmi_get_gpu_asic_info", h)
        driver = optional(smi, "amdsmi_get_gpu_driver_info", h)
        header = (
            optional(smi, "amdsmi_get_gpu_metrics_header_info", h)
            if hasattr(smi, "amdsmi_get_gpu_metrics_header_info")
            else "N/A"
        )
        asic = asic if isinstance(asic, dict) else {}
        driver = driver if isinstance(driver, dict) else {}
        return {
            "name": asic.get("market_name", "N/A"),
            "asic": {
                k: asic[k]
                for k in (
                    "market_name",
                    "vendor_id",
                    "device_id",
                    "rev_id",
                    "target_graphics_version",
                    "num_compute_units",
                    "asic_serial",
                    "oam_id",
                )
                if k in asic
            },
            "bdf": optional(smi, "amdsmi_get_gpu_device_bdf", h),
            "uuid": optional(smi, "amdsmi_get_gpu_device_uuid", h),
            "driver": {k: driver[k] for k in ("driver_name", "driver_version") if k in driver},
            "amdsmi_package_version": amdsmi_package_version(smi),
            "amdsmi_library_version": amdsmi_library_version(smi),
            "metrics_version": metrics_version(header),
        }

    def describe(self) -> dict[str, Any]:
        """JSON-able identity: ASIC, driver, amdsmi versions, metrics version, channels and whether
        component channels are available (and why not), how power is derived, and the clock / violation-status
        telemetry this amdsmi and GPU offer (`fingrav.device.amd.telemetry.AMDSMITelemetry.describe`)."""
        return {
            "backend": "amdsmi",
            "vendor": "AMD",
            "index": self.index,
            "gpu_count": self.gpu_count,
            **self._identity,
            "amdsmi_api_followed": FOLLOWED_AMDSMI,
            "channels": list(self.channels),
            "component_channels_available": len(self.channels) > 1,
            "component_channels_note": self.plan.note,
            "power": self.sampler_info,
            "telemetry": self.telemetry.describe(),
            "gpu_clock": {"source": "s_memrealtime", "hz": MEMREALTIME.hz, "verified_on_hardware": False},
            "verified_on_hardware": False,
        }

    def read_telemetry(self) -> ClockTelemetry:
        """GFX / memory clocks and the violation status now (`AMDSMITelemetry.read`: what this amdsmi and GPU
        offer, found when this was made; a failed item is in `errors`, never raised)."""
        return self.telemetry.read()

    # -- power ----------------------------------------------------------------------------
    def start_sampling(self) -> None:
        """Start the sampler process (returns once it polls)."""
        if self._sampler is not None:
            raise DeviceError("amdsmi sampling is already running")
        sampler = amdsmi_sampler(self.config, self.sampler_setup)
        info = sampler.open()
        if tuple(info.get("channels", ())) != self.channels:
            sampler.close()
            raise DeviceError(
                f"amdsmi sampler sees channels {info.get('channels')} but this device planned {list(self.channels)}"
            )
        self._sampler = sampler
        self._stamps = []

    def _take(self, batch: SampleBatch) -> PowerSamples:
        self._stamps.append(
            SampleBatch(
                PowerSamples.empty(), batch.host_ns, batch.firmware_ns, batch.reads, batch.duplicates, batch.errors
            )
        )
        if batch.errors:
            logger.warning("amdsmi sampler: %d failed reads in %d", batch.errors, batch.reads)
        return batch.samples

    def drain_samples(self) -> PowerSamples:
        """Samples logged since the last drain (or start)."""
        if self._sampler is None:
            raise DeviceError("amdsmi sampling is not running (call start_sampling first)")
        return self._take(self._sampler.drain())

    def stop_sampling(self) -> PowerSamples:
        """Stop the sampler process; return what was not drained yet."""
        if self._sampler is None:
            raise DeviceError("amdsmi sampling is not running (call start_sampling first)")
        sampler, self._sampler = self._sampler, None
        try:
            return self._take(sampler.stop())
        finally:
            sampler.close()

    def index_of_pci_bus(self, bus: int) -> int | None:
        """amdsmi's processor index of the GPU on PCI bus `bus`, or None."""
        try:
            handles = call_amdsmi(self.smi, "amdsmi_get_processor_handles")
        except DeviceError as exc:
            logger.debug("amdsmi_get_processor_handles: %s", exc)
            return None
        for i, h in enumerate(handles):
            bdf = optional(self.smi, "amdsmi_get_gpu_device_bdf", h)
            if isinstance(bdf, str) and bdf_bus(bdf) == bus:
                return i
        return None

    def firmware_stamps(self) -> tuple[np.ndarray, np.ndarray]:
        """(host_ns, firmware_ns) of every firmware update sampled since start_sampling (int64 ns)."""
        b = SampleBatch.concat(self._stamps)
        return b.host_ns, b.firmware_ns

    def energy_mj(self) -> float | None:
        """The socket energy counter in mJ (accumulator x counter_resolution uJ / 1000), or None (not available, or
        lower than the last reading: `fingrav.device.screening.EnergyCounter`, never a negative energy)."""
        info = call_amdsmi(self.smi, "amdsmi_get_energy_count", self.handle)
        acc = info.get("energy_accumulator", info.get("power"))
        res = info.get("counter_resolution", self.counter_resolution_uj)
        if is_na(acc) or (isinstance(acc, int) and is_sentinel(acc)):  # "not available"
            return None
        try:
            return self._energy.check(float(acc) * float(res) / 1000.0)
        except (TypeError, ValueError):
            return None

    def close(self) -> None:
        """Stop the sampler if running and shut amdsmi down. Idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        shut_down(self.smi)
