"""AMDSMIDevice: an AMD Instinct GPU, work through torch (ROCm), power through amdsmi, time from s_memrealtime.

GPU-side module: importing it needs neither torch, amdsmi nor triton (imported when a device is made).
"""

from __future__ import annotations

import logging
from typing import Any

from fingrav.device.amd.power import AMDSMIPower, bdf_bus
from fingrav.device.amd.timestamp import make_memrealtime_spinner, make_memrealtime_stamper
from fingrav.device.torch_device import PoweredTorchGPUDevice, Spinner, Stamper
from fingrav.errors import BackendUnavailableError

logger = logging.getLogger(__name__)


def same_gpu_check(amdsmi_bdf: Any, torch_props: Any) -> str:
    """Do amdsmi's GPU and torch's GPU sit on the same PCI bus? "same", "different: ..." or "unknown"."""
    bus = bdf_bus(amdsmi_bdf) if isinstance(amdsmi_bdf, str) else None
    torch_bus = getattr(torch_props, "pci_bus_id", None)
    if bus is None or not isinstance(torch_bus, int):
        return "unknown"
    if bus == torch_bus:
        return "same"
    return f"different: amdsmi's GPU is on PCI bus {bus:#04x}, torch's on {torch_bus:#04x}"


class AMDSMIDevice(PoweredTorchGPUDevice):
    """An AMD Instinct GPU: torch kernels and execution stamps (TorchGPUDevice), power and energy through
    amdsmi (`self.power`, an AMDSMIPower and its sampler process), GPU time from s_memrealtime (unverified
    on hardware).

    index: torch's device index; amdsmi_index: amdsmi's processor index of the same GPU (default: index,
    or the amdsmi GPU on torch's PCI bus when the two differ, e.g. under HIP_VISIBLE_DEVICES);
    power_kwargs: AMDSMIPower's options (period_ns, source, reader, component_fields, firmware_period_ns,
    gap_factor); torch_kwargs: TorchGPUDevice's (launch_mode, seed, l2_rotation_factor, stamp_capacity)."""

    backend = "amdsmi"

    def __init__(
        self,
        index: int = 0,
        *,
        amdsmi_index: int | None = None,
        power_kwargs: dict[str, Any] | None = None,
        **torch_kwargs: Any,
    ) -> None:
        # amdsmi first: its failures have the clearer messages, and it needs no GPU context.
        self.power = AMDSMIPower(index if amdsmi_index is None else amdsmi_index, **(power_kwargs or {}))
        try:
            super().__init__(index, **torch_kwargs)
        except Exception:
            self.power.close()
            raise
        self._same_gpu = same_gpu_check(self.power.describe().get("bdf"), self.props)
        torch_bus = getattr(self.props, "pci_bus_id", None)
        if self._same_gpu.startswith("different") and amdsmi_index is None and isinstance(torch_bus, int):
            # e.g. HIP_VISIBLE_DEVICES renumbered torch's GPUs: find torch's GPU among amdsmi's by PCI bus
            found = self.power.index_of_pci_bus(torch_bus)
            if found is not None:
                logger.info("torch GPU %d is amdsmi GPU %d (PCI bus %#04x)", self.index, found, torch_bus)
                self.power.close()
                try:
                    self.power = AMDSMIPower(found, **(power_kwargs or {}))
                except Exception:
                    super(PoweredTorchGPUDevice, self).close()
                    raise
                self._same_gpu = same_gpu_check(self.power.describe().get("bdf"), self.props)
        if self._same_gpu.startswith("different"):
            logger.error(
                "amdsmi GPU %d and torch GPU %d are not the same device (%s): power would be read from "
                "another GPU than the one that runs the kernels; pass amdsmi_index",
                self.power.index,
                self.index,
                self._same_gpu,
            )

    # -- GPU clock hooks (TorchGPUDevice) ---------------------------------------------------
    def _make_stamper(self) -> Stamper:
        if not self.is_rocm:
            raise BackendUnavailableError(
                "amdsmi backend: s_memrealtime needs a ROCm build of torch (torch.version.hip is None here)"
            )
        return make_memrealtime_stamper(self.index)

    def _make_spinner(self) -> Spinner:
        return make_memrealtime_spinner(self.index, int(self.props.multi_processor_count), self._stamper)

    # -- identity -----------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The composed identity (torch side, then amdsmi's, whose backend/index win) and the same-GPU check."""
        return {**super().describe(), "same_gpu_check": self._same_gpu}
