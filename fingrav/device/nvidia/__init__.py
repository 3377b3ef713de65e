"""NVIDIA GPUs: torch for the work, NVML (nvidia-ml-py) for power, energy and identity, %globaltimer for time.

GPU-side package: importing it needs neither torch nor pynvml (both are imported when a device is made).

* `library`: importing pynvml, wrapping its errors (once, one code map), opening a GPU's handle;
* `poller`: the NVML poller run by `fingrav.device.sampler_host` ("total" and "memory" channels);
* `power`: `NVMLPower`, the NVML side alone (no torch): identity, energy counter, sampling;
* `timestamp`: the `%globaltimer` `TimerSpec` of the shared kernels (`fingrav.device.kernels`);
* `telemetry`: clocks, clock-event (throttle) reasons, violation counters and fields, discovered at run time;
* `device`: `NVMLDevice`, the `GPUDevice` (`PoweredTorchGPUDevice` + `NVMLPower`).

Channels: "total" (nvmlDeviceGetSamples, NVML_TOTAL_POWER_SAMPLES) and, where the GPU supports it,
"memory" (field NVML_FI_DEV_POWER_AVERAGE with scope NVML_POWER_SCOPE_MEMORY: an *average*; see
`describe()["channel_notes"]`).
"""

from __future__ import annotations

from typing import Any

from fingrav.device.nvidia.device import NVMLDevice
from fingrav.device.nvidia.power import NVMLPower

__all__ = ["NVMLDevice", "NVMLPower", "open_device"]


def open_device(device_cfg: Any, seed: int = 0) -> NVMLDevice:
    """The backend factory's entry (`fingrav.backends`): the NVIDIA GPU `device_cfg.index`."""
    return NVMLDevice(index=device_cfg.index)
