"""GPU backends behind one abstract device (`fingrav.device.common.GPUDevice`)."""

from fingrav.device.common import ClockReads, ExecRecords, GPUDevice, KernelHandle, PowerSamples, open_device

__all__ = ["ClockReads", "ExecRecords", "GPUDevice", "KernelHandle", "PowerSamples", "open_device"]
