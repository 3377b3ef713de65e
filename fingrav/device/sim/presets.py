"""Presets of the simulated GPU ("mi300x", "h200") and how `SimOverrides` change them.

All parameters are plain numbers in SI-like units named in the field (ns, mW, bytes, flop/s).
Sources: `/work/shared/H200.md` (measured H200 telemetry: sensor step response, NVML sample period,
clock offset, read round trip, 700 W cap behaviour), the FinGraV paper (MI300X, 1 ms logger) and the
vendors' data sheets (peak bf16/fp32 throughput, HBM bandwidth, power caps). Kernel efficiencies and
power coefficients are fitted by hand so that the default kernels land on the targets listed in the
package docstring (`fingrav.device.sim`).
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from fingrav.config import SimConfig

logger = logging.getLogger(__name__)

MS = 1_000_000.0  # ns per ms
US = 1_000.0  # ns per us
W = 1_000.0  # mW per W


@dataclass(frozen=True)
class ComponentSpec:
    """One power component of the chip. Power = idle_mw + excess; every excess is in mW.

    visible: reported as its own channel (else it only contributes to "total").
    gap_mw: excess during launch gaps between back-to-back executions ("busy-idle": clocks up, no work).
    floor_mw: excess while any kernel runs, whatever its utilization.
    compute_mw: excess coefficient of u_c ** gamma_c (u_c = achieved / peak flop rate).
    memory_mw: excess coefficient of u_m ** gamma_m (u_m = achieved / peak memory bandwidth).
    spin_mw: excess during `spin` (a flat FMA load).
    clock_sensitivity: fraction of this component's kernel excess that follows the clock ramp and the
        power limiter (1 = all of it, 0 = none).
    """

    name: str
    visible: bool
    idle_mw: float
    gap_mw: float
    floor_mw: float
    compute_mw: float
    memory_mw: float
    spin_mw: float
    clock_sensitivity: float


@dataclass(frozen=True)
class SensorSpec:
    """One power-sample stream (one set of timestamps) covering `channels`.

    Sample k at host time t_k (its grid time) reports the true power convolved with a boxcar of `window_ns` and a
    first-order lag of time constant `lag_ns` (0 = none), evaluated at t_k - delay_ns, plus gaussian
    noise (sd `noise_mw`), quantized to `quantization_mw` (0 = none). Sample intervals are
    period_ns + N(0, jitter_ns) (clipped to [0.3, 1.7] periods).

    Late stamps (the H200's NVML buffer): the sample's value stays the reading at its grid time t_k, only its
    timestamp moves later. Every `late_every`-th sample (deterministic, at a random phase per stream; 0 = none) is
    stamped late by max(0, late_ns + late_spread_ns x z), z standard normal (a normal cut at 0: median late_ns,
    p10 / p90 = late_ns -+ 1.28 late_spread_ns); besides, each sample (any of them) is stamped late by uniform
    0.3-0.9 periods (`fingrav.device.sim.sensor.LATE_FAR_PERIODS`: 6-18 ms on the H200's 20 ms) with probability
    `late_far_share`, in place of the above. An overridden period scales late_ns and late_spread_ns with it. A late
    stamp never reaches the next sample's grid time (it is cut to one `stamp_resolution_ns` before it), so the
    stamps stay strictly increasing. The lateness is drawn from a generator of its own: the grid, the values and
    the noise are those of the same stream without late stamps.

    Acquisition jitter (the H200's: see the preset): each sample reads the sensor's input at its grid time plus a
    random offset, N(0, `acquire_jitter_ns`) cut at 3 sd and never later than the dead time allows (the reading
    never comes from after its grid time); its stamp stays where it was. It is drawn from a generator of its own. The
    truth of a reading is the noise-free reading averaged over this jitter (`SensorStream.expected_response`): unlike
    the noise, the jitter does not average out of a reading where the input changes on its time scale.

    Timestamps are rounded down to `stamp_resolution_ns`. A sample becomes visible to the host (`drain_samples`)
    `visible_after_ns` after its timestamp, the late one included (0: at once; all those stamped by then at
    `stop_sampling`).
    """

    name: str
    channels: tuple[str, ...]
    period_ns: float
    jitter_ns: float
    window_ns: float
    lag_ns: float
    delay_ns: float
    noise_mw: float
    quantization_mw: float
    stamp_resolution_ns: int
    visible_after_ns: float = 0.0
    late_every: int = 0  # every late_every-th sample is stamped late (0: none)
    late_ns: float = 0.0  # median lateness of those stamps
    late_spread_ns: float = 0.0  # sd of their lateness (a normal cut at 0)
    late_far_share: float = 0.0  # share of all samples stamped late by uniform 6-18 ms instead
    acquire_jitter_ns: float = 0.0  # sd of each sample's acquisition time around its grid time (0: none)


@dataclass(frozen=True)
class KernelShape:
    """Power shape of one execution, as fractions of its duration: a linear ramp from the preceding
    level to the plateau over `ramp_frac`, a plateau, and a linear tail over the last `tail_frac`
    falling to `tail_level` x the plateau excess."""

    ramp_frac: float
    tail_frac: float
    tail_level: float


@dataclass(frozen=True)
class CollectiveSpec:
    """Collectives across GPUs (ring algorithm), as seen by one GPU of the group.

    Time (ns) = latency_ns + step_latency_ns * steps + factor * size / bus_bw, with factor = 2(n-1)/n
    and steps = 2(n-1) for all-reduce, factor = (n-1)/n and steps = n-1 for all-gather (n GPUs, size =
    the all-reduced buffer / the gathered output), bus_bw = min(peer_bw_bytes_s * (n-1), max_bus_bw_bytes_s)
    (NVSwitch: the same for any n; a fully connected mesh of links: grows with the peers).
    Power: plateau excess per component (mW, preset component order) = base_mw + traffic_mw * u_bus
    (+ reduce_mw * u_bus for all-reduce: the reduction arithmetic and its extra HBM traffic), with
    u_bus = (factor * size / bus_bw) / time: the fraction of the execution spent moving data at full bus
    bandwidth (~0 for latency-bound, ~1 for bandwidth-bound collectives)."""

    peer_bw_bytes_s: float
    max_bus_bw_bytes_s: float
    latency_ns: float
    step_latency_ns: float
    base_mw: tuple[float, ...]
    traffic_mw: tuple[float, ...]
    reduce_mw: tuple[float, ...]

    def bus_bw_bytes_s(self, world_size: int) -> float:
        """Bus bandwidth (bytes/s) of a group of `world_size` GPUs."""
        return min(self.peer_bw_bytes_s * max(world_size - 1, 1), self.max_bus_bw_bytes_s)


@dataclass(frozen=True)
class Preset:
    """Every parameter of one simulated GPU model (see the field comments for units)."""

    name: str
    display_name: str
    # -- roofline (flop/s per dtype, bytes/s), efficiencies eff = max * x / (x + half)
    peak_flops: dict[str, float]
    peak_bw_bytes_s: float
    eff_compute_max: float
    eff_compute_half_size: float  # in elements of (m*n*k)**(1/3)
    eff_memory_max: float
    eff_memory_half_bytes: float
    overhead_ns: float  # fixed per-execution overhead (launch into the kernel, tail of the last wave)
    # -- power model
    gamma_compute: float
    gamma_memory: float
    components: tuple[ComponentSpec, ...]
    channels: tuple[str, ...]  # "total" first, then the visible components
    shapes: dict[str, KernelShape]  # by kernel kind
    cap_mw: float
    cap_target_mw: float  # the limiter settles the cycle-mean total power here
    # -- device transient (clock ramp c, limiter L); see fingrav.device.sim.device
    clock_idle_level: float  # c after a long idle (fraction of the kernel excess drawn)
    clock_up_ns: float  # time constant of the clock ramp while busy
    clock_down_ns: float  # time constant of c back to clock_idle_level while idle
    limiter_start_ns: float  # busy time after which the limiter starts pulling power down
    limiter_tau_ns: float  # time constant of the limiter's pull-down
    limiter_idle_tau_ns: float  # decay time constant of the limiter's memory while idle
    limiter_slowdown: float  # execution time x (1 + limiter_slowdown * (1 - L))
    # -- executions
    exec_jitter: float  # sd of the per-execution time factor (0.01 = 1 %)
    warmup_penalty: tuple[float, ...]  # extra time of the first executions after idle
    warmup_idle_tau_ns: float  # warm-ups scale with 1 - exp(-idle / tau)
    switch_warmup_scale: float  # warm-up scale of a later segment (kernel switch inside one call)
    outlier_run_fraction: float
    outlier_slowdown: tuple[float, float]  # uniform range of the extra time of an outlier run
    launch_gap_ns: float  # median gap between back-to-back executions
    launch_gap_sigma: float  # lognormal sigma of the gap
    launch_latency_ns: float  # host call -> first execution start
    sync_latency_ns: float  # last execution end -> host call returns
    # -- clocks
    clock_offset_ns: float  # GPU clock - host clock at the start of the simulation
    clock_drift: float  # fraction (30e-6 = 30 ppm): GPU clock runs (1 + drift) x host clock
    gpu_clock_resolution_ns: int
    read_rt_min_ns: float  # minimum round trip of one GPU-timestamp read
    read_rt_median_extra_ns: float  # median extra round trip above the minimum (lognormal)
    read_rt_sigma: float  # lognormal sigma of the extra
    read_launch_share: float  # where the GPU read happens inside the minimum round trip
    read_slow_prob: float  # probability of a slow read
    read_slow_ns: tuple[float, float]  # uniform range of the extra delay of a slow read
    read_host_overhead_ns: float  # host time between consecutive reads
    # -- telemetry
    sensors: tuple[SensorSpec, ...]
    energy_period_ns: float  # the energy counter changes this often
    energy_resolution_mj: float  # and in steps of this
    # -- collectives across GPUs (all-reduce, all-gather)
    collective: CollectiveSpec
    # -- attention: fraction of a GEMM's compute efficiency (same shape) a fused attention kernel reaches
    attention_efficiency: float = 0.6
    # -- power limit cycle (heavy kernels, sustained load): after `limiter_start_ns` of busy time the limiter
    # clamps for `limit_cycle_low_ns`, releases for `limit_cycle_high_ns`, and repeats (0: no cycle, the
    # exponential pull-down to the limiter level instead); the clamp level keeps the cycle mean at the cap target
    limit_cycle_start_ns: float = 0.0  # busy time before the first clamp
    limit_cycle_high_ns: float = 0.0
    limit_cycle_low_ns: float = 0.0
    cap_burst_mw: float = 0.0  # cycle-mean total power the fast limiter holds before the cycle (0: cap_target_mw)
    limit_cycle_jitter: float = 0.0  # log-sd of each cycle's released and clamped lengths (0: strictly periodic)
    # -- instrumentation: GPU time the two stamp kernels around a stamped execution add to its cycle
    stamp_overhead_ns: float = 0.0
    # -- heating (kernels below the cap): the excess power rises by up to `thermal_rise` as the die warms, with time
    # constant `thermal_tau_ns` while busy (and cools with it while idle); 0: no drift
    thermal_rise: float = 0.0
    thermal_tau_ns: float = 3_000.0 * MS
    # -- placement: where a kernel's inputs sit in memory. Each input set a kernel rotates through
    # (`fingrav.device.base.PLACEMENT_SETS`) scales its execution time by 1 + placement_sd x u_memory x z (z standard
    # normal, drawn per set when the kernel is prepared) and its excess power by the inverse (the same work in more
    # time: the energy per execution stays); 0: every placement alike
    placement_sd: float = 0.0
    # -- the card's state between runs (results/h200-card-state): below the cap a kernel's excess power is scaled by
    # 1 + state_sd x z, one z per opened device (drawn at its first kernel: a scenario), constant over it; a real
    # card's state drifts over tens of seconds, so runs minutes apart read 0.17-0.37 % (sd) apart; 0: no state
    state_sd: float = 0.0

    def component_index(self, name: str) -> int:
        for i, c in enumerate(self.components):
            if c.name == name:
                return i
        raise KeyError(name)


_GEMM_SHAPE = KernelShape(ramp_frac=0.05, tail_frac=0.10, tail_level=0.6)
_GEMV_SHAPE = KernelShape(ramp_frac=0.10, tail_frac=0.10, tail_level=0.7)
_COLLECTIVE_SHAPE = KernelShape(ramp_frac=0.05, tail_frac=0.05, tail_level=0.8)
_SHAPES = {
    "gemm": _GEMM_SHAPE,
    "gemv": _GEMV_SHAPE,
    "allreduce": _COLLECTIVE_SHAPE,
    "allgather": _COLLECTIVE_SHAPE,
    "attention": _GEMM_SHAPE,  # a fused kernel of two GEMMs: the GEMM's ramp and tail
    "callable": _GEMM_SHAPE,
}

MI300X = Preset(
    name="mi300x",
    display_name="simulated MI300X",
    peak_flops={"bf16": 1307.4e12, "fp16": 1307.4e12, "fp32": 163.4e12},
    peak_bw_bytes_s=5.3e12,
    eff_compute_max=0.7467,
    eff_compute_half_size=2731.0,
    eff_memory_max=0.85,
    eff_memory_half_bytes=1.0e6,
    overhead_ns=4.0 * US,
    gamma_compute=0.3,
    gamma_memory=0.5,
    components=(
        ComponentSpec("xcd", True, 40 * W, 30 * W, 70 * W, 490 * W, 15 * W, 290 * W, 1.0),
        ComponentSpec("iod", True, 45 * W, 15 * W, 20 * W, 25 * W, 70 * W, 40 * W, 0.5),
        ComponentSpec("hbm", True, 35 * W, 3 * W, 5 * W, 0.0, 120 * W, 20 * W, 0.2),
        ComponentSpec("other", False, 30 * W, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0),
    ),
    channels=("total", "xcd", "iod", "hbm"),
    shapes=dict(_SHAPES),
    cap_mw=750 * W,
    cap_target_mw=740 * W,
    clock_idle_level=0.6,
    clock_up_ns=1.0 * MS,
    clock_down_ns=5.0 * MS,
    limiter_start_ns=20.0 * MS,
    limiter_tau_ns=10.0 * MS,
    limiter_idle_tau_ns=20.0 * MS,
    limiter_slowdown=0.25,
    exec_jitter=0.01,
    warmup_penalty=(0.15, 0.06, 0.02),
    warmup_idle_tau_ns=1.0 * MS,
    switch_warmup_scale=0.5,
    outlier_run_fraction=0.04,
    outlier_slowdown=(0.10, 0.30),
    launch_gap_ns=4.0 * US,
    launch_gap_sigma=0.2,
    launch_latency_ns=8.0 * US,
    sync_latency_ns=4.0 * US,
    clock_offset_ns=-420.0 * US,
    clock_drift=30e-6,
    gpu_clock_resolution_ns=10,
    read_rt_min_ns=11.0 * US,
    read_rt_median_extra_ns=2.5 * US,
    read_rt_sigma=0.7,
    read_launch_share=0.55,
    read_slow_prob=0.02,
    read_slow_ns=(50.0 * US, 200.0 * US),
    read_host_overhead_ns=1.0 * US,
    sensors=(
        SensorSpec(
            name="smu",
            channels=("total", "xcd", "iod", "hbm"),
            period_ns=1.0 * MS,
            jitter_ns=0.02 * MS,
            window_ns=1.0 * MS,
            lag_ns=0.0,
            delay_ns=0.3 * MS,
            noise_mw=2.0 * W,
            quantization_mw=1.0 * W,
            stamp_resolution_ns=1,
        ),
    ),
    energy_period_ns=1.0 * MS,
    energy_resolution_mj=0.015259,
    # fully connected xGMI links (64 GB/s per direction each; RCCL reaches ~48 GB/s bus bandwidth per
    # peer), the Infinity Fabric in the IOD carries the traffic
    collective=CollectiveSpec(
        peer_bw_bytes_s=48e9,
        max_bus_bw_bytes_s=330e9,
        latency_ns=10.0 * US,
        step_latency_ns=2.0 * US,
        base_mw=(35 * W, 20 * W, 3 * W, 0.0),
        traffic_mw=(40 * W, 80 * W, 50 * W, 0.0),
        reduce_mw=(35 * W, 5 * W, 10 * W, 0.0),
    ),
    stamp_overhead_ns=1.6 * US,  # assumed like the H200's (no MI300X measurement)
)

H200 = Preset(
    name="h200",
    display_name="simulated H200",
    peak_flops={"bf16": 989.4e12, "fp16": 989.4e12, "fp32": 66.9e12},
    peak_bw_bytes_s=4.8e12,
    eff_compute_max=0.87,
    eff_compute_half_size=30.0,
    eff_memory_max=0.85,
    eff_memory_half_bytes=2.0e6,
    overhead_ns=3.0 * US,
    gamma_compute=0.3,
    gamma_memory=0.5,
    components=(
        ComponentSpec("core", False, 80.5 * W, 50 * W, 70 * W, 770 * W, 20 * W, 204.5 * W, 1.0),
        ComponentSpec("memory", True, 40.5 * W, 2 * W, 3 * W, 0.0, 95 * W, 2.5 * W, 0.1),
    ),
    channels=("total", "memory"),
    shapes=dict(_SHAPES),
    cap_mw=700 * W,
    cap_target_mw=690 * W,
    clock_idle_level=0.55,
    clock_up_ns=2.0 * MS,
    clock_down_ns=10.0 * MS,
    limiter_start_ns=40.0 * MS,
    limiter_tau_ns=10.0 * MS,
    limiter_idle_tau_ns=20.0 * MS,
    limiter_slowdown=0.2,
    exec_jitter=0.01,
    warmup_penalty=(0.15, 0.06, 0.02),
    warmup_idle_tau_ns=1.0 * MS,
    switch_warmup_scale=0.5,
    outlier_run_fraction=0.04,
    outlier_slowdown=(0.10, 0.30),
    launch_gap_ns=2.5 * US,
    launch_gap_sigma=0.2,
    launch_latency_ns=6.0 * US,
    sync_latency_ns=4.0 * US,
    clock_offset_ns=163.0 * US,
    clock_drift=-25e-6,
    gpu_clock_resolution_ns=32,
    read_rt_min_ns=12.4 * US,
    read_rt_median_extra_ns=2.6 * US,
    read_rt_sigma=0.7,
    read_launch_share=0.55,
    read_slow_prob=0.02,
    read_slow_ns=(50.0 * US, 200.0 * US),
    read_host_overhead_ns=1.0 * US,
    sensors=(
        SensorSpec(
            name="nvml_total",
            channels=("total",),
            period_ns=20.0 * MS,
            # the grid itself is regular (intervals within ~0.1 ms; the real period is 19.985-19.995 ms): the stamps'
            # apparent jitter (intervals p10/p50/p90 = 17/20/23 ms) is the late stamps below
            jitter_ns=0.1 * MS,
            # the step fits on the grid times of results/h200-{method,sse,sse2,sse3} (four cards): dead time 2.70 /
            # 2.75 / 2.96 / 2.84 ms, lag 12.38 / 12.46 / 12.39 / 12.40 ms, a window at its lower bound (0.06-0.32 ms);
            # shared/H200.md's 4.5 ms boxcar was fitted on the stamps, which the late stamps smear
            window_ns=0.2 * MS,
            lag_ns=12.4 * MS,
            delay_ns=2.85 * MS,
            # the samples' noise: 0.48-0.60 W in those calibrations (idle); under below-cap load (results/h200-db4's
            # reference runs) successive samples differ by 0.4-0.7 W (robust sd / sqrt 2)
            noise_mw=0.5 * W,
            # the SSE runs of results/h200-sse (4 kernels) and h200-sse3: the joint fit's residuals grow with the
            # response's slope, not its level: 0.40-0.72 ms of timing per sample (r^2 regressed on slope^2 and level^2),
            # little of it shared within a run; the calibration's 1.7 W rms on the grid times against 0.5 W of noise
            acquire_jitter_ns=0.5 * MS,
            quantization_mw=1.0,
            stamp_resolution_ns=1000,  # NVML stamps in us
            visible_after_ns=0.45 * MS,  # shared/H200.md: median 0.45 ms after the timestamp
            # every committed H200 dataset: one sample in five (5 apart in the mode) is stamped late by 1.0 / 2.8 /
            # 4.8 ms (p10 / p50 / p90), ~1 % of all samples by 6-18 ms, each read at its grid time. The normal here
            # gives 0.88 / 2.80 / 4.72 ms, its tail 0.33 % of all samples beyond 6 ms, the far ones the other 0.7 %
            late_every=5,
            late_ns=2.8 * MS,
            late_spread_ns=1.5 * MS,
            late_far_share=0.007,
        ),
        SensorSpec(
            name="nvml_memory",
            channels=("memory",),
            period_ns=100.0 * MS,
            jitter_ns=3.0 * MS,
            window_ns=100.0 * MS,  # an average over the last update interval
            lag_ns=0.0,
            delay_ns=5.0 * MS,
            noise_mw=0.3 * W,
            quantization_mw=1.0,
            stamp_resolution_ns=1000,
        ),
    ),
    energy_period_ns=100.0 * MS,
    energy_resolution_mj=1.0,
    # NVLink 4 through NVSwitch (450 GB/s per direction; NCCL ring all-reduce without NVLS reaches
    # ~360 GB/s bus bandwidth whatever the GPU count); plausible values, not measurements
    collective=CollectiveSpec(
        peer_bw_bytes_s=360e9,
        max_bus_bw_bytes_s=360e9,
        latency_ns=6.0 * US,
        step_latency_ns=1.5 * US,
        base_mw=(60 * W, 3 * W),
        traffic_mw=(120 * W, 45 * W),
        reduce_mw=(40 * W, 10 * W),
    ),
    # the H200's limit cycle on cap-bound GEMMs (issue 10: ~715-730 W for ~0.6-0.8 s, clamped ~0.2 s, repeating)
    limit_cycle_start_ns=700.0 * MS,
    limit_cycle_high_ns=700.0 * MS,
    limit_cycle_low_ns=200.0 * MS,
    cap_burst_mw=725 * W,
    # cycle to cycle the H200's clamps vary (200 ms block means 726 726 731 572 707 718 723 709 620 691 ...; periods
    # 0.33-1.0 s between kernels): each cycle's phases vary by ~15 %, which gives the per-cycle spread of the
    # whole-cycle means seen there (cb-4k: +-0.85 % from 7 cycles, i.e. ~0.9 % per cycle)
    limit_cycle_jitter=0.15,
    stamp_overhead_ns=1.6 * US,
    # back to back the H200's power still creeps up for seconds as it warms (results/h200-adaptive: 16K GEMV
    # 567.9 -> 571.6 W from 0.5 to 3.3 s, attention decode 668.6 -> 676.2 W; a 6.5 s run measured later, warm,
    # read 576.8 W): ~1.2 % of the excess power with a ~2 s time constant
    thermal_rise=0.012,
    thermal_tau_ns=2_000.0 * MS,  # ~7 us GEMM: 8.3 us cycle stamped vs 6.7 us unstamped (CUDA graphs)
    # a memory-bound kernel's execution time moves 0.32-0.58 % (sd) from one preparation (one input set) to the
    # next, the power against it, the energy per execution least (results/h200-card-state, gpu/sets)
    placement_sd=0.0045,
    # below-cap kernels read 0.17-0.37 % (sd) apart between runs a minute or more apart (results/h200-card-state)
    state_sd=0.003,
)

PRESETS: dict[str, Preset] = {"mi300x": MI300X, "h200": H200}


#: preset fields an override sets in other units, one for one: (the override's key, which is also the name
#: `preset_summary` gives it; the preset field; the field's units per override unit)
SCALED_OVERRIDES: tuple[tuple[str, str, float], ...] = (
    ("limit_cycle_start_ms", "limit_cycle_start_ns", MS),
    ("limit_cycle_high_ms", "limit_cycle_high_ns", MS),
    ("limit_cycle_low_ms", "limit_cycle_low_ns", MS),
    ("limit_cycle_jitter_pct", "limit_cycle_jitter", 0.01),
    ("stamp_overhead_us", "stamp_overhead_ns", US),
    ("thermal_rise_pct", "thermal_rise", 0.01),
    ("thermal_tau_ms", "thermal_tau_ns", MS),
    ("placement_sd_pct", "placement_sd", 0.01),
    ("state_sd_pct", "state_sd", 0.01),
)

#: sensor fields an override sets on every sensor stream, one for one: (the override's key; the `SensorSpec`
#: field; the field's units per override unit). Overrides the config does not define are left alone.
SENSOR_LATE_OVERRIDES: tuple[tuple[str, str, float], ...] = (
    ("sensor_late_every", "late_every", 1),
    ("sensor_late_ms", "late_ns", MS),
    ("sensor_late_spread_ms", "late_spread_ns", MS),
    ("sensor_late_far_share", "late_far_share", 1),
    ("sensor_acquire_jitter_ms", "acquire_jitter_ns", MS),
)


#: sensor timing fields that are a share of the sensor's grid (the H200's late stamps ~2.8 ms and acquisition jitter
#: ~0.5 ms of 20 ms), not fixed times: an overridden period scales them (`_period_scaled`)
PERIOD_SHARES: tuple[str, ...] = ("late_ns", "late_spread_ns", "acquire_jitter_ns")


def _period_scaled(spec: SensorSpec, changes: dict[str, Any]) -> dict[str, Any]:
    """`changes` to one sensor stream, with its `PERIOD_SHARES` scaled with its period where the period changes and
    the field is not set itself (the late stamps' lateness as one: `late_ns` set keeps the spread too)."""
    period = changes.get("period_ns")
    if period is None or spec.period_ns <= 0:
        return changes
    f = period / spec.period_ns
    kept = {"late_ns", "late_spread_ns"} if "late_ns" in changes else set()
    return {**{k: getattr(spec, k) * f for k in PERIOD_SHARES if k not in changes and k not in kept}, **changes}


def card_state_offset(seed: int, index: int, label: str, sd: float) -> float:
    """The simulated card's state during one scenario (`Preset.state_sd`): the relative change of a below-cap
    kernel's excess power, drawn from the sweep's seed, the device and the label of the scenario's first kernel (each
    scenario opens its device afresh with the sweep's seed, so the label makes the draws differ), apart from every
    other stream. The fidelity matrix divides it out for the population's truth."""
    if sd <= 0:
        return 0.0
    rng = np.random.default_rng([abs(int(seed)), int(seed < 0), int(index), 0x57A7E, zlib.crc32(label.encode())])
    return float(sd * rng.standard_normal())


def resolve_preset(sim_cfg: SimConfig) -> Preset:
    """The preset named by `sim_cfg.preset` with `sim_cfg.overrides` applied.

    Sensor overrides set that parameter on every sensor stream of the preset (the H200's memory
    stream included). Clock, execution-jitter, outlier and launch-gap overrides replace the preset's
    value."""
    base = PRESETS[sim_cfg.preset]
    ov = sim_cfg.overrides
    sensor_changes: dict[str, Any] = {}
    if ov.sensor_period_ms is not None:
        sensor_changes["period_ns"] = ov.sensor_period_ms * MS
    if ov.sensor_period_jitter_ms is not None:
        sensor_changes["jitter_ns"] = ov.sensor_period_jitter_ms * MS
    if ov.sensor_window_ms is not None:
        sensor_changes["window_ns"] = ov.sensor_window_ms * MS
    if ov.sensor_lag_ms is not None:
        sensor_changes["lag_ns"] = ov.sensor_lag_ms * MS
    if ov.sensor_delay_ms is not None:
        sensor_changes["delay_ns"] = ov.sensor_delay_ms * MS
    if ov.sensor_noise_mw is not None:
        sensor_changes["noise_mw"] = ov.sensor_noise_mw
    if ov.sensor_quantization_mw is not None:
        sensor_changes["quantization_mw"] = ov.sensor_quantization_mw
    for key, field, unit in SENSOR_LATE_OVERRIDES:
        if getattr(ov, key, None) is not None:
            sensor_changes[field] = getattr(ov, key) * unit
    changes: dict[str, Any] = {}
    if sensor_changes:
        changes["sensors"] = tuple(dataclasses.replace(s, **_period_scaled(s, sensor_changes)) for s in base.sensors)
    if ov.clock_offset_us is not None:
        changes["clock_offset_ns"] = ov.clock_offset_us * US
    if ov.clock_drift_ppm is not None:
        changes["clock_drift"] = ov.clock_drift_ppm * 1e-6
    if ov.exec_jitter_pct is not None:
        changes["exec_jitter"] = ov.exec_jitter_pct / 100.0
    if ov.outlier_run_fraction is not None:
        changes["outlier_run_fraction"] = ov.outlier_run_fraction
    if ov.launch_gap_us is not None:
        changes["launch_gap_ns"] = ov.launch_gap_us * US
    for key, field, unit in SCALED_OVERRIDES:
        if getattr(ov, key) is not None:
            changes[field] = getattr(ov, key) * unit
    if changes:
        logger.debug("sim preset %s overridden: %s", base.name, sorted(changes))
        return dataclasses.replace(base, **changes)
    return base


CARD_SEED_TAG = 0xCA2D  # card k's differences: SeedSequence([CARD_SEED_TAG, preset code, k]), never the sweep seed
_CARD_CLIP_SD = 3.0  # every factor is cut at +-3 sd (a card is never unphysical: no negative power, no negative lag)
CARD_CLOCK_OFFSET_NS_PER_PCT = 10.0 * US  # clock offset sd per % of spread
CARD_CLOCK_DRIFT_PPM_PER_PCT = 5.0  # clock drift sd (ppm) per % of spread


def card_preset(p: Preset, index: int, spread_pct: float) -> Preset:
    """Simulated card `index` of a preset: the same chip with its own (seeded per card) differences, each a factor
    1 + (spread_pct / 100) x scale x z, z standard normal cut at +-3: per component the idle power (scale 1) and
    every dynamic coefficient together (gap, floor, compute, memory, spin; scale 1); per sensor stream the dead
    time, window and lag (scale 2) and the noise (scale 5); the clock offset (+ 10 us x spread_pct x z) and drift
    (+ 5 ppm x spread_pct x z). The power cap, sample period and everything else stay the preset's (firmware).
    The generator is seeded by the preset and the card alone, so a card is the same card in every sweep.
    spread_pct = 0: the preset itself."""
    if spread_pct <= 0:
        return p
    import numpy as np

    s = spread_pct / 100.0
    rng = np.random.default_rng(np.random.SeedSequence([CARD_SEED_TAG, sum(ord(ch) for ch in p.name), int(index)]))

    def factor(scale: float) -> float:
        z = float(np.clip(rng.standard_normal(), -_CARD_CLIP_SD, _CARD_CLIP_SD))
        return 1.0 + s * scale * z

    comps = []
    for c in p.components:
        idle, dyn = factor(1.0), factor(1.0)
        comps.append(
            dataclasses.replace(
                c,
                idle_mw=c.idle_mw * idle,
                **{k: getattr(c, k) * dyn for k in ("gap_mw", "floor_mw", "compute_mw", "memory_mw", "spin_mw")},
            )
        )
    sensors = []
    for sens in p.sensors:
        timing = {k: getattr(sens, k) * factor(2.0) for k in ("delay_ns", "window_ns", "lag_ns")}
        sensors.append(dataclasses.replace(sens, **timing, noise_mw=sens.noise_mw * factor(5.0)))
    z_offset, z_drift = (float(np.clip(rng.standard_normal(), -_CARD_CLIP_SD, _CARD_CLIP_SD)) for _ in range(2))
    offset = p.clock_offset_ns + CARD_CLOCK_OFFSET_NS_PER_PCT * spread_pct * z_offset
    drift = p.clock_drift + CARD_CLOCK_DRIFT_PPM_PER_PCT * spread_pct * 1e-6 * z_drift
    logger.debug("sim %s card %d: spread %.3g %%", p.name, index, spread_pct)
    return dataclasses.replace(
        p,
        components=tuple(comps),
        sensors=tuple(sensors),
        clock_offset_ns=offset,
        clock_drift=drift,
        display_name=f"{p.display_name} card {int(index)}",
    )


def _sensor_summary(s: SensorSpec) -> dict[str, Any]:
    """JSON-able parameters of one sensor stream (ms, mW); the late stamps and the acquisition jitter only where it
    has them."""
    out: dict[str, Any] = {
        "channels": list(s.channels),
        "period_ms": s.period_ns / MS,
        "period_jitter_ms": s.jitter_ns / MS,
        "window_ms": s.window_ns / MS,
        "lag_ms": s.lag_ns / MS,
        "delay_ms": s.delay_ns / MS,
        "noise_mw": s.noise_mw,
        "quantization_mw": s.quantization_mw,
        "stamp_resolution_ns": s.stamp_resolution_ns,
    }
    if s.late_every > 0 or s.late_far_share > 0:
        out["late_stamps"] = {
            "every": s.late_every,
            "median_ms": s.late_ns / MS,
            "spread_ms": s.late_spread_ns / MS,
            "far_share": s.late_far_share,
        }
    if s.acquire_jitter_ns > 0:
        out["acquire_jitter_ms"] = s.acquire_jitter_ns / MS
    return out


def preset_summary(p: Preset) -> dict[str, Any]:
    """JSON-able effective parameters of a preset, in readable units (ms, us, W, ppm)."""
    return {
        "peak_tflops": {k: v / 1e12 for k, v in p.peak_flops.items()},
        "peak_bw_tb_s": p.peak_bw_bytes_s / 1e12,
        "efficiency": {
            "compute_max": p.eff_compute_max,
            "compute_half_size": p.eff_compute_half_size,
            "memory_max": p.eff_memory_max,
            "memory_half_mb": p.eff_memory_half_bytes / 1e6,
        },
        "overhead_us": p.overhead_ns / US,
        "state_sd_pct": 100.0 * p.state_sd,
        "attention_efficiency": p.attention_efficiency,
        "power": {
            "gamma_compute": p.gamma_compute,
            "gamma_memory": p.gamma_memory,
            "cap_w": p.cap_mw / W,
            "cap_target_w": p.cap_target_mw / W,
            "components": {
                c.name: {
                    "visible": c.visible,
                    "idle_w": c.idle_mw / W,
                    "gap_excess_w": c.gap_mw / W,
                    "floor_excess_w": c.floor_mw / W,
                    "compute_excess_w": c.compute_mw / W,
                    "memory_excess_w": c.memory_mw / W,
                    "spin_excess_w": c.spin_mw / W,
                    "clock_sensitivity": c.clock_sensitivity,
                }
                for c in p.components
            },
            "shapes": {k: dataclasses.asdict(v) for k, v in p.shapes.items()},
        },
        "transient": {
            "clock_idle_level": p.clock_idle_level,
            "clock_up_ms": p.clock_up_ns / MS,
            "clock_down_ms": p.clock_down_ns / MS,
            "limiter_start_ms": p.limiter_start_ns / MS,
            "limiter_tau_ms": p.limiter_tau_ns / MS,
            "limiter_idle_tau_ms": p.limiter_idle_tau_ns / MS,
            "limiter_slowdown": p.limiter_slowdown,
            "cap_burst_w": p.cap_burst_mw / W,
            **{key: getattr(p, field) / unit for key, field, unit in SCALED_OVERRIDES},
        },
        "executions": {
            "jitter_pct": p.exec_jitter * 100,
            "warmup_penalty_pct": [x * 100 for x in p.warmup_penalty],
            "warmup_idle_tau_ms": p.warmup_idle_tau_ns / MS,
            "switch_warmup_scale": p.switch_warmup_scale,
            "outlier_run_fraction": p.outlier_run_fraction,
            "outlier_slowdown_pct": [x * 100 for x in p.outlier_slowdown],
            "launch_gap_us": p.launch_gap_ns / US,
            "launch_gap_sigma": p.launch_gap_sigma,
            "launch_latency_us": p.launch_latency_ns / US,
            "sync_latency_us": p.sync_latency_ns / US,
        },
        "clock": {
            "offset_us": p.clock_offset_ns / US,
            "drift_ppm": p.clock_drift * 1e6,
            "gpu_resolution_ns": p.gpu_clock_resolution_ns,
            "read_rt_min_us": p.read_rt_min_ns / US,
            "read_rt_median_us": (p.read_rt_min_ns + p.read_rt_median_extra_ns) / US,
            "read_slow_prob": p.read_slow_prob,
            "read_slow_us": [x / US for x in p.read_slow_ns],
        },
        "sensors": {s.name: _sensor_summary(s) for s in p.sensors},
        "energy_counter": {"period_ms": p.energy_period_ns / MS, "resolution_mj": p.energy_resolution_mj},
        "collective": {
            "peer_bw_gb_s": p.collective.peer_bw_bytes_s / 1e9,
            "max_bus_bw_gb_s": p.collective.max_bus_bw_bytes_s / 1e9,
            "latency_us": p.collective.latency_ns / US,
            "step_latency_us": p.collective.step_latency_ns / US,
            "base_excess_w": {c.name: v / W for c, v in zip(p.components, p.collective.base_mw, strict=True)},
            "traffic_excess_w": {c.name: v / W for c, v in zip(p.components, p.collective.traffic_mw, strict=True)},
            "reduce_excess_w": {c.name: v / W for c, v in zip(p.components, p.collective.reduce_mw, strict=True)},
        },
    }
