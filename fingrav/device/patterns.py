"""A calibration kernel with a known power pattern (issue 22, item 4): full-chip FMA spin and a one-program spin
(near idle), alternating with a known duty, each phase timed by the GPU clock (`fingrav.device.kernels`' spin
kernel, its deadline anchored to a stamp written just before it on the same stream).

Use it as a user kernel (`kind: callable`, target ``fingrav.device.patterns:spin_pattern``). Its power is known
from its parts: measure the pattern's two loads on their own in the same sweep (`high_us` > 0 with `low_us` = 0,
and `low_us` > 0 with `high_us` = 0: their sustained powers P_high and P_low); the pattern then draws, over one
execution, duty x P_high + (1 - duty) x P_low with duty = high_us / (high_us + low_us) (`expected_power_w`),
and the kernel power the analysis estimates for it (SSE, through the slow sensor) must agree within its CI. The
FMA spin has no memory traffic and stays below the power cap on an H200 (~330 W, shared/H200.md), so its power
from idle is its sustained power. NVIDIA only (%globaltimer); GPU-side: torch + Triton (or CuPy), no pydantic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)


def duty(high_us: float, low_us: float) -> float:
    """The share of an execution at the high load: high_us / (high_us + low_us)."""
    total = float(high_us) + float(low_us)
    if total <= 0:
        raise ValueError("spin_pattern: high_us + low_us must be > 0")
    return float(high_us) / total


def expected_power_w(high_us: float, low_us: float, p_high_w: float, p_low_w: float) -> float:
    """What one execution of the pattern draws (W) from its parts' measured powers: duty x P_high + (1 - duty) x
    P_low (phase changes are sub-microsecond: the stamps between phases are launched back to back)."""
    d = duty(high_us, low_us)
    return d * float(p_high_w) + (1.0 - d) * float(p_low_w)


def spin_pattern(high_us: float = 500.0, low_us: float = 500.0, cycles: int = 2) -> Callable[[], None]:
    """The factory (`kind: callable`): on the current CUDA device, a function that enqueues `cycles` x (full-chip
    FMA spin for `high_us`, one-program FMA spin for `low_us`) on the current stream; a phase of 0 µs is left out.
    Each phase's deadline is anchored to a %globaltimer stamp written just before it, so the phases last their
    set time on the GPU clock whatever the launch latency."""
    if high_us < 0 or low_us < 0 or cycles < 1:
        raise ValueError(f"spin_pattern: high_us, low_us >= 0 and cycles >= 1 (got {high_us}, {low_us}, {cycles})")
    duty(high_us, low_us)
    import torch

    from fingrav.device.kernels import make_spinner, make_stamper
    from fingrav.device.nvidia.timestamp import GLOBALTIMER

    index = torch.cuda.current_device()
    sms = torch.cuda.get_device_properties(index).multi_processor_count
    stamper = make_stamper(index, GLOBALTIMER)
    high = make_spinner(index, sms, stamper, GLOBALTIMER)
    low = make_spinner(index, 1, stamper, GLOBALTIMER, programs_per_sm=1)
    buf = torch.zeros(2, dtype=torch.int64, device=f"cuda:{index}")
    counter = torch.zeros(1, dtype=torch.int32, device=f"cuda:{index}")
    phases: list[tuple[Any, int]] = [(s, int(round(us * 1000))) for s, us in ((high, high_us), (low, low_us)) if us > 0]
    logger.info(
        "spin pattern: %g us high, %g us low, %d cycles (duty %.3f)", high_us, low_us, cycles, duty(high_us, low_us)
    )

    def launch() -> None:
        for _ in range(int(cycles)):
            for spinner, ns in phases:
                counter.zero_()
                stamper.stamp(buf, counter)
                spinner.launch(buf, ns)

    return launch
