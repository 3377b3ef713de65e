"""GPU backends behind one abstract device (`fingrav.device.base.GPUDevice`), and the backend factory.

Vendor libraries are imported only inside the factory, lazily, so that the simulated default needs none
(the Zeus layout: the factory lives in the package's ``__init__``; backends import ``base``, never this).
What differs between backends (their package, library, visible-devices variables, lock scope, ...) is one
entry each in `fingrav.backends.BACKENDS`; each backend package's ``__init__`` defines
``open_device(device_cfg, seed)``.
"""

from __future__ import annotations

import importlib
from typing import Any

from fingrav.backends import get_backend
from fingrav.device.base import ClockReads, ExecRecords, GPUDevice, KernelHandle, PowerSamples
from fingrav.errors import BackendUnavailableError

__all__ = ["ClockReads", "ExecRecords", "GPUDevice", "KernelHandle", "PowerSamples", "open_device"]


def open_device(device_cfg: Any, seed: int = 0) -> GPUDevice:
    """Create the backend named by `device_cfg.backend` (a `fingrav.config.DeviceConfig`): its registry entry's
    package is imported here, lazily, after its vendor library was found (else one message with the pip extra)."""
    entry = get_backend(device_cfg.backend)
    if entry.module is None:
        raise BackendUnavailableError(f"device.backend={entry.name!r} cannot collect ({entry.summary})")
    entry.check_library()
    return importlib.import_module(entry.module).open_device(device_cfg, seed)
