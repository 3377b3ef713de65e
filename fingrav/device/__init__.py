"""GPU backends behind one abstract device (`fingrav.device.base.GPUDevice`), and the backend factory.

Vendor libraries are imported only inside the factory, lazily, so that the simulated default needs none
(the Zeus layout: the factory lives in the package's ``__init__``; backends import ``base``, never this).
"""

from __future__ import annotations

from typing import Any

from fingrav.device.base import ClockReads, ExecRecords, GPUDevice, KernelHandle, PowerSamples

__all__ = ["ClockReads", "ExecRecords", "GPUDevice", "KernelHandle", "PowerSamples", "open_device"]


def open_device(device_cfg: Any, seed: int = 0) -> GPUDevice:
    """Create the backend named by `device_cfg.backend` (a `fingrav.config.DeviceConfig`).

    Vendor libraries are imported only here, lazily, so that the simulated default needs none."""
    backend = device_cfg.backend
    if backend == "sim":
        from fingrav.device.sim import SimulatedGPU

        return SimulatedGPU(
            device_cfg.sim, index=device_cfg.index, seed=seed, world_size=getattr(device_cfg, "world_size", 1)
        )
    if backend == "nvml":
        from fingrav.device.nvidia import NVMLDevice

        return NVMLDevice(index=device_cfg.index)
    if backend == "amdsmi":
        from fingrav.device.amd import AMDSMIDevice

        return AMDSMIDevice(index=device_cfg.index)
    from fingrav.errors import BackendUnavailableError

    raise BackendUnavailableError(f"device.backend={backend!r} cannot collect (replay copies recorded raw data)")
