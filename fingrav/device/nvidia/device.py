"""NVMLDevice: an NVIDIA GPU, work through torch (CUDA), power through NVML, time from %globaltimer.

GPU-side module: importing it needs neither torch nor pynvml (both are imported when a device is made).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from fingrav.device.nvidia.library import load_nvml
from fingrav.device.nvidia.power import NVMLPower
from fingrav.device.nvidia.timestamp import make_spinner, make_stamper
from fingrav.device.torch_device import PoweredTorchGPUDevice, Spinner, Stamper, TorchGPUDevice
from fingrav.errors import BackendUnavailableError

logger = logging.getLogger(__name__)


class NVMLDevice(PoweredTorchGPUDevice):
    """An NVIDIA GPU: work through torch (CUDA), power through NVML in a sampler process (`self.power`, an
    `NVMLPower` matched to torch's GPU by UUID, so CUDA_VISIBLE_DEVICES cannot make NVML watch another GPU
    than torch runs on).

    index: the torch/CUDA device index (NVML's own index may differ under CUDA_VISIBLE_DEVICES);
    sample_interval_ms: drain period of the NVML sample buffer (ms); memory_channel: force the "memory"
    channel on/off (None: when supported); torch_options: `TorchGPUDevice`'s (launch_mode, seed,
    l2_rotation_factor, timestamp_impl, ...). Never changes a GPU setting.
    """

    backend = "nvml"

    def __init__(
        self,
        index: int = 0,
        sample_interval_ms: float = 10.0,
        *,
        memory_channel: bool | None = None,
        sampler_mode: Literal["process", "thread"] = "process",
        **torch_options: Any,
    ) -> None:
        load_nvml()  # fail fast, with the install hint, before torch and the kernels are set up
        super().__init__(index=index, **torch_options)
        uuid = self.gpu_uuid()
        if uuid is None and (os.environ.get("CUDA_VISIBLE_DEVICES") or "").strip():
            logger.warning(
                "torch gives no GPU UUID and CUDA_VISIBLE_DEVICES is set: NVML index %d may not be "
                "the GPU torch runs on",
                index,
            )
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

    # -- GPU clock hooks (TorchGPUDevice) ---------------------------------------------------
    def _make_stamper(self) -> Stamper:
        """%globaltimer via Triton or CuPy (`timestamp_impl`)."""
        if self.is_rocm:
            raise BackendUnavailableError("the NVML backend needs a CUDA build of torch (torch.version.hip is set)")
        return make_stamper(self.index, self.timestamp_impl)

    def _make_spinner(self) -> Spinner:
        """FMA spin on %globaltimer, checked against the stamper."""
        return make_spinner(self.index, self.props.multi_processor_count, self._stamper, self.timestamp_impl)
