"""AMD Instinct GPUs (MI300X): torch for the work, amdsmi for power (metrics table), s_memrealtime for time.

GPU-side package. Importing it needs only the standard library, numpy and fingrav: amdsmi, torch and
triton are imported lazily, so that ``import fingrav.device.amd`` works everywhere.

* `library`: importing amdsmi (one clear message per way it fails), wrapping its errors (once, one code
  map), opening a GPU;
* `poller`: the amdsmi poller run by `fingrav.device.sampler_host`, and the power derivation (pure);
* `power`: `AMDSMIPower`, the amdsmi side alone (no torch): identity, sampler process, energy counter;
* `timestamp`: the ``s_memrealtime`` `TimerSpec` of the shared kernels (`fingrav.device.kernels`);
* `telemetry`: GFX / memory clocks and the violation status (amdsmi_get_violation_status), discovered at run time;
* `device`: `AMDSMIDevice`, the `GPUDevice` (`PoweredTorchGPUDevice` + `AMDSMIPower`).
"""

from __future__ import annotations

from typing import Any

from fingrav.device.amd.device import AMDSMIDevice, same_gpu_check
from fingrav.device.amd.power import AMDSMIPower

__all__ = ["AMDSMIDevice", "AMDSMIPower", "open_device", "same_gpu_check"]


def open_device(device_cfg: Any, seed: int = 0) -> AMDSMIDevice:
    """The backend factory's entry (`fingrav.backends`): the AMD GPU `device_cfg.index`."""
    return AMDSMIDevice(index=device_cfg.index)
