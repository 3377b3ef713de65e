"""NVIDIA GPUs: torch for the work, NVML (nvidia-ml-py) for power, energy and identity.

GPU-side module: importing it needs neither torch nor pynvml (both are imported when a device is made).

* `NVMLPower` - the NVML side alone (no torch): identity, the energy counter, power sampling through
  the sampler process of `fingrav.device.nvml_sampler`. Tested against a fake pynvml.
* `NVMLDevice` - `TorchGPUDevice` + `NVMLPower` for the same physical GPU (matched by UUID, so
  CUDA_VISIBLE_DEVICES cannot make NVML watch another GPU than torch runs on).

Channels: "total" (nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES) and, where the GPU supports it,
"memory" (field NVML_FI_DEV_POWER_AVERAGE with scope NVML_POWER_SCOPE_MEMORY: an *average*; see
`describe()["channel_notes"]`). fingrav never changes clocks, power limits or any other GPU setting:
only NVML queries are made.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
from typing import Any, Literal

from fingrav.device.common import PowerSamples
from fingrav.device.nvml_sampler import (
    CHANNEL_NOTES,
    NVMLSampler,
    SamplerConfig,
    init_nvml,
    load_nvml,
    memory_power_supported,
    nvml_call,
    open_handle,
    shutdown_nvml,
)
from fingrav.device.torch_device import TorchGPUDevice
from fingrav.errors import BackendUnavailableError, FingravError

logger = logging.getLogger(__name__)


def _cuda_version(v: Any) -> str | None:
    """NVML's CUDA driver version integer (13000) as '13.0'."""
    try:
        v = int(v)
    except (TypeError, ValueError):
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


class NVMLPower:
    """Power, energy and identity of one NVIDIA GPU through NVML (no torch).

    index / uuid: the GPU (NVML index, or UUID - preferred, it names the same GPU in CUDA and NVML);
    sample_interval_ms: drain period of the NVML sample buffer (<= 50 ms); memory: "memory" channel
    (None: when the GPU supports it); sampler_mode: "process" (default) or "thread" (tests);
    nvml_module: the module to use as pynvml (tests: a fake). The sampler process is started here, so
    that a missing driver or device is reported at once, not in the middle of a collection.
    """

    def __init__(self, index: int | None = 0, uuid: str | None = None, sample_interval_ms: float = 10.0,
                 memory: bool | None = None, sampler_mode: Literal["process", "thread"] = "process",
                 nvml_module: str = "pynvml", **sampler_options: Any) -> None:
        self._nvml = load_nvml(nvml_module)
        init_nvml(self._nvml)
        self._initialized = True
        self._sampler: NVMLSampler | None = None
        self._energy_failures = 0
        try:
            self.nvml_index, self._handle = open_handle(self._nvml, index, uuid)
            self.memory = memory_power_supported(self._nvml, self._handle) if memory is None else bool(memory)
            self._energy_ok = self._probe_energy()
            self.sampler_config = SamplerConfig(
                nvml_index=self.nvml_index, uuid=self.uuid, interval_ms=sample_interval_ms, memory=self.memory,
                nvml_module=nvml_module, **sampler_options,
            )
            self._sampler = NVMLSampler(self.sampler_config, mode=sampler_mode)
            self._sampler.open()
        except BaseException:
            self.close()
            raise
        logger.info("NVML: GPU %d (%s), channels %s, energy counter %s", self.nvml_index, self.name,
                    self.channels, "yes" if self._energy_ok else "no")

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
        power limits (mW), channels and what each one is, sampler settings."""
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
        which is logged). ~3 ms a call under load on an H200; updates every ~100 ms: a reference over
        windows of seconds."""
        if not self._energy_ok:
            return None
        try:
            return float(nvml_call(self._nvml, "nvmlDeviceGetTotalEnergyConsumption", self._handle))
        except FingravError as exc:  # a failed read is a missing value, not a failed collection
            self._energy_failures += 1
            if self._energy_failures <= 5:
                logger.warning("energy counter read failed (%d so far): %s", self._energy_failures, exc)
            return None

    # -- sampling ---------------------------------------------------------------------------
    @property
    def sampler(self) -> NVMLSampler:
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


class NVMLDevice(TorchGPUDevice):
    """An NVIDIA GPU: work through torch (CUDA), power through NVML in a sampler process.

    index: the torch/CUDA device index (NVML's own index may differ under CUDA_VISIBLE_DEVICES: the GPU
    is matched by UUID); sample_interval_ms: drain period of the NVML sample buffer; memory_channel:
    force the "memory" channel on/off (None: when supported); torch_options: `TorchGPUDevice`'s
    (launch_mode, seed, l2_rotation_factor, timestamp_impl, ...). Never changes a GPU setting.
    """

    backend = "nvml"

    def __init__(self, index: int = 0, sample_interval_ms: float = 10.0, *, memory_channel: bool | None = None,
                 sampler_mode: Literal["process", "thread"] = "process", **torch_options: Any) -> None:
        load_nvml()  # fail fast, with the install hint, before torch and the kernels are set up
        super().__init__(index=index, **torch_options)
        uuid = self.gpu_uuid()
        if uuid is None and (os.environ.get("CUDA_VISIBLE_DEVICES") or "").strip():
            logger.warning("torch gives no GPU UUID and CUDA_VISIBLE_DEVICES is set: NVML index %d may not be "
                           "the GPU torch runs on", index)
        options = {"sample_interval_ms": sample_interval_ms, "memory": memory_channel, "sampler_mode": sampler_mode}
        try:
            try:
                self.power = NVMLPower(index=index if uuid is None else None, uuid=uuid, **options)
            except BackendUnavailableError as exc:
                if uuid is None or "UUID" not in str(exc):
                    raise
                # e.g. a MIG instance: CUDA shows the instance's UUID, NVML the parent GPU's
                logger.warning("%s; falling back to NVML index %d", exc, index)
                self.power = NVMLPower(index=index, **options)
        except BaseException:
            TorchGPUDevice.close(self)
            raise

    @property
    def channels(self) -> tuple[str, ...]:
        return self.power.channels

    def describe(self) -> dict[str, Any]:
        return {"backend": self.backend, "index": self.index, **super().describe(), **self.power.describe()}

    def energy_mj(self) -> float | None:
        return self.power.energy_mj()

    def start_sampling(self) -> None:
        self.power.start_sampling()

    def drain_samples(self) -> PowerSamples:
        return self.power.drain_samples()

    def stop_sampling(self) -> PowerSamples:
        return self.power.stop_sampling()

    def close(self) -> None:
        power = getattr(self, "power", None)
        if power is not None:
            power.close()
        super().close()
