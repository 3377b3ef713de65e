"""The simulated GPU backend: the embedded default, with known ground truth, runs anywhere.

It hands the pipeline exactly what a real backend would through `fingrav.device.base.GPUDevice`:
execution records stamped with a drifting GPU clock, power samples stamped with the host clock and
shaped by a realistic sensor, clock reads with launch jitter. Everything runs in virtual time.

Model (details in the submodules):
* `presets` - the "mi300x" and "h200" parameter sets and `SimOverrides`.
* `kernels` - roofline execution time and per-component power levels of GEMM / GEMV / attention and of
  user callables (their declared flops and bytes); collectives' latency + bandwidth model.
* `timeline` - true power as a piecewise-linear function of host time; exact cumulative energy.
* `sensor` - sample grid with jitter, boxcar window, first-order lag, dead time, noise, quantization, late
  stamps (a sample read on its grid, stamped later).
* `device` - `SimulatedGPU`: virtual clocks, executions (jitter, warm-ups, outlier runs, launch gaps, the
  placement of each input set a kernel rotates through), device transient (clock ramp, power limiter, warming),
  the card's state over a scenario (below the cap), sampling, energy counter, ground truth.

Preset sources: the H200 preset follows `/work/shared/H200.md` (measured on one H200: NVML samples every
17/20/23 ms by their stamps, a regular 20 ms grid with one sample in five stamped ~2.8 ms late (every committed
H200 dataset), dead time 2.8 ms + boxcar 4.5 ms + lag 12 ms, idle 121 W with 40.5 W memory, 328 W FMA spin,
4K GEMM peaking near 890 W then settling under the 700 W cap, globaltimer ~163 us ahead of the host,
12.4 us minimum clock-read round trip). The MI300X preset follows the FinGraV paper's setup (1 ms power
logger; channels total/XCD/IOD/HBM) and public data-sheet numbers (1307 bf16 TFLOP/s, 5.3 TB/s, 750 W);
its power levels are plausible values, not measurements.
"""

from typing import Any

from fingrav.device.sim.device import SimulatedGPU
from fingrav.device.sim.kernels import SimKernel
from fingrav.device.sim.presets import PRESETS, Preset, resolve_preset

__all__ = ["PRESETS", "Preset", "SimKernel", "SimulatedGPU", "open_device", "resolve_preset"]


def open_device(device_cfg: Any, seed: int = 0) -> SimulatedGPU:
    """The backend factory's entry (`fingrav.backends`): the simulated GPU of `device_cfg.sim` (its index, the
    sweep's seed, `world_size` GPUs in a lockstep group)."""
    return SimulatedGPU(
        device_cfg.sim, index=device_cfg.index, seed=seed, world_size=getattr(device_cfg, "world_size", 1)
    )
