"""NVMLPower: power, energy and identity of one NVIDIA GPU through NVML (no torch).

GPU-side module: standard library + numpy; pynvml is imported when an `NVMLPower` is made. Power is
sampled by the NVML poller (`fingrav.device.nvidia.poller`) in the sampler host's process
(`fingrav.device.sampler_host`). fingrav never changes clocks, power limits or any other GPU setting:
only NVML queries are made.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Any, Literal

from fingrav.device.base import ClockTelemetry, PowerSamples
from fingrav.device.nvidia.library import init_nvml, load_nvml, nvml_call, open_handle, shutdown_nvml
from fingrav.device.nvidia.poller import CHANNEL_NOTES, NVMLSamplerConfig, memory_power_supported, open_poller
from fingrav.device.nvidia.telemetry import NVMLTelemetry
from fingrav.device.sampler_host import SamplerHost
from fingrav.device.screening import EnergyCounter
from fingrav.errors import BackendUnavailableError, FingravError

logger = logging.getLogger(__name__)


def _cuda_version(v: Any) -> str | None:
    """NVML's CUDA driver version integer (13000) as '13.0'."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def nvml_sampler(
    config: NVMLSamplerConfig, mode: Literal["process", "thread"] = "process", **kwargs: Any
) -> SamplerHost:
    """The sampler host running the NVML poller for `config` (not opened yet)."""
    return SamplerHost(open_poller, config, name="NVML sampler", mode=mode, empty=PowerSamples.empty, **kwargs)


class NVMLPower:
    """Power, energy and identity of one NVIDIA GPU through NVML (no torch). Units: ns, mW, mJ.

    index / uuid: the GPU (NVML index, or UUID - preferred, it names the same GPU in CUDA and NVML);
    sample_interval_ms: drain period of the NVML sample buffer (ms, <= 50); memory: "memory" channel
    (None: when the GPU supports it); sampler_mode: "process" (default) or "thread" (tests);
    nvml_module: the module to use as pynvml (tests: a fake); sampler_options: more
    `NVMLSamplerConfig` fields. The sampler process is started here, so that a missing driver or device
    is reported at once, not in the middle of a collection.
    """

    def __init__(
        self,
        index: int | None = 0,
        uuid: str | None = None,
        sample_interval_ms: float = 10.0,
        memory: bool | None = None,
        sampler_mode: Literal["process", "thread"] = "process",
        nvml_module: str = "pynvml",
        **sampler_options: Any,
    ) -> None:
        self._nvml = load_nvml(nvml_module)
        init_nvml(self._nvml)
        self._initialized = True
        self._sampler: SamplerHost | None = None
        self._energy_failures = 0
        self._energy = EnergyCounter("NVML energy counter (nvmlDeviceGetTotalEnergyConsumption)")
        try:
            self.nvml_index, self._handle = open_handle(self._nvml, index, uuid)
            self.memory = memory_power_supported(self._nvml, self._handle) if memory is None else bool(memory)
            self._energy_ok = self._probe_energy()
            self.telemetry = NVMLTelemetry(self._nvml, self._handle)  # what clocks / reasons / counters exist
            self.sampler_config = NVMLSamplerConfig(
                nvml_index=self.nvml_index,
                uuid=self.uuid,
                interval_ms=sample_interval_ms,
                memory=self.memory,
                nvml_module=nvml_module,
                **sampler_options,
            )
            self._sampler = nvml_sampler(self.sampler_config, mode=sampler_mode)
            self._sampler.open()
        except BaseException:
            self.close()
            raise
        logger.info(
            "NVML: GPU %d (%s), channels %s, energy counter %s",
            self.nvml_index,
            self.name,
            self.channels,
            "yes" if self._energy_ok else "no",
        )

    # -- identity -------------------------------------------------------------------------
    @property
    def channels(self) -> tuple[str, ...]:
        return ("total", "memory") if self.memory else ("total",)

    @property
    def name(self) -> str:
        return str(nvml_call(self._nvml, "nvmlDeviceGetName", self._handle))

    @property
    def uuid(self) -> str:
        return str(nvml_call(self._nvml, "nvmlDeviceGetUUID", self._handle))

    def _optional(self, name: str, *args: Any) -> Any:
        """An identity query that may be refused (no permission, not supported): None then."""
        try:
            return nvml_call(self._nvml, name, *args)
        except FingravError as exc:
            logger.debug("%s: %s", name, exc)
            return None

    def describe(self) -> dict[str, Any]:
        """JSON-able identity: name, UUID, serial (when readable), driver / NVML / CUDA driver versions,
        power limits (mW), channels and what each one is, sampler settings, and the clock / clock-event telemetry
        this driver offers (`fingrav.device.nvidia.telemetry.NVMLTelemetry.describe`)."""
        h = self._handle
        try:
            pynvml_version = importlib.metadata.version("nvidia-ml-py")
        except importlib.metadata.PackageNotFoundError:
            pynvml_version = None
        out: dict[str, Any] = {
            "vendor": "NVIDIA",
            "name": self.name,
            "uuid": self.uuid,
            "serial": self._optional("nvmlDeviceGetSerial", h),
            "nvml_index": self.nvml_index,
            "driver_version": self._optional("nvmlSystemGetDriverVersion"),
            "nvml_version": self._optional("nvmlSystemGetNVMLVersion"),
            "cuda_driver_version": _cuda_version(self._optional("nvmlSystemGetCudaDriverVersion")),
            "power_limit_mw": self._optional("nvmlDeviceGetPowerManagementLimit", h),
            "enforced_power_limit_mw": self._optional("nvmlDeviceGetEnforcedPowerLimit", h),
            "nvidia_ml_py_version": pynvml_version,
            "channels": list(self.channels),
            "channel_notes": {c: CHANNEL_NOTES[c] for c in self.channels},
            "energy_counter": "nvmlDeviceGetTotalEnergyConsumption (mJ)" if self._energy_ok else None,
            "telemetry": self.telemetry.describe(),
            "sampler": {**self.sampler_config.as_dict(), "mode": self._sampler.mode if self._sampler else None},
        }
        return out

    # -- energy -----------------------------------------------------------------------------
    def _probe_energy(self) -> bool:
        try:
            nvml_call(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", self._handle)
        except FingravError as exc:
            logger.info("NVML energy counter not available: %s", exc)
            return False
        return True

    def energy_mj(self) -> float | None:
        """nvmlDeviceGetTotalEnergyConsumption in mJ (None when the GPU has no counter or the read failed,
        which is logged, or went backwards: `fingrav.device.screening.EnergyCounter`). ~3 ms a call under load
        on an H200; updates every ~100 ms: a reference over windows of seconds."""
        if not self._energy_ok:
            return None
        try:
            return self._energy.check(float(nvml_call(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", self._handle)))
        except FingravError as exc:  # a failed read is a missing value, not a failed collection
            self._energy_failures += 1
            if self._energy_failures <= 5:
                logger.warning("energy counter read failed (%d so far): %s", self._energy_failures, exc)
            return None

    def read_telemetry(self) -> ClockTelemetry:
        """Clocks, clock-event reasons, violation counters and telemetry fields now (`NVMLTelemetry.read`: what
        the driver offers, found when this was made; a failed item is in `errors`, never raised)."""
        return self.telemetry.read()

    # -- sampling ---------------------------------------------------------------------------
    @property
    def sampler(self) -> SamplerHost:
        if self._sampler is None:
            raise BackendUnavailableError("NVML power: closed")
        return self._sampler

    def start_sampling(self) -> None:
        self.sampler.start()

    def drain_samples(self) -> PowerSamples:
        return self.sampler.drain()

    def stop_sampling(self) -> PowerSamples:
        return self.sampler.stop()

    def close(self) -> None:
        """Stop the sampler process and shut NVML down (idempotent)."""
        if self._sampler is not None:
            self._sampler.close()
            self._sampler = None
        if getattr(self, "_initialized", False):
            self._initialized = False
            shutdown_nvml(self._nvml)

    def __enter__(self) -> NVMLPower:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
