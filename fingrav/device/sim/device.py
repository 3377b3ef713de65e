"""`SimulatedGPU`: the embedded default backend (ground truth known, no GPU needed).

Virtual time
    A host clock (int ns) starts at an epoch-like value (~1.7e18 ns) and advances only through the
    device's calls: `sleep_ns`, `read_gpu_clock`, `execute`, `spin`. The GPU clock is
    host + offset + drift * (host - host at start), floored to the GPU timer resolution.

Executions (`execute`)
    launch latency, then for each execution: nominal time (roofline, `kernels.py`) x (1 + jitter)
    x warm-up penalty x outlier-run factor x limiter slowdown, separated by lognormal launch gaps;
    then a sync latency before the call returns. Warm-up penalties hit the first executions of the
    call, scaled by 1 - exp(-idle / warmup_idle_tau) (idle = time since the GPU was last busy), and
    by `switch_warmup_scale` for later segments (a kernel switch). An outlier run (probability
    `outlier_run_fraction` per `execute` call) makes every execution of the call 10-30 % slower and
    draws 1 / sqrt(1 + slowdown) of the excess power.

True power (piecewise linear, per execution constant multipliers)
    Within an execution each component's excess over idle ramps linearly from the preceding level
    (idle for the first execution, the busy-idle gap level otherwise) to the plateau, stays there and
    falls linearly over the tail; gaps draw the busy-idle level; idle power between calls.
    The plateau is multiplied by m = 1 - sensitivity * (1 - c * L), evaluated once per execution at
    its start:
    * c, the clock ramp: 1 - (1 - c_start) exp(-elapsed busy / clock_up) during a call; after idle
      it relaxes back towards `clock_idle_level` with `clock_down`.
    * L, the power limiter (heavy kernels only, i.e. steady cycle-mean power above the cap target):
      1 until the limiter age reaches `limiter_start`, then L_ss + (1 - L_ss) exp(-(age - start) /
      limiter_tau). The age counts nominal busy time and decays as age * exp(-idle /
      limiter_idle_tau) while idle, so a long idle resets it. Both exponentials are cut to exactly
      their limit past 20 time constants, so the steady state is exactly steady. With a limit cycle
      (preset `limit_cycle_*`, the H200's) the pull-down goes to the burst level (`cap_burst`) and, from
      `limit_cycle_start` of busy time on, the limiter clamps for `limit_cycle_low` and releases to the
      burst level for `limit_cycle_high`, repeating (`limit_cycle_level`): short runs after idle see the
      "burst" power, sustained load the cycle mean (the cap target).
    Stamped executions (`execute`) pay `stamp_overhead` of GPU time in their launch gap; `run_unstamped`
    runs the same executions with no stamps between them (what a user's loop runs).
    `spin` draws a flat, preset-given power for exactly the requested GPU duration (no ramp, no
    limiter), and counts as busy time for c and L.

Ground truth (`ground_truth_of_last_execute`)
    From the exact cumulative energy E(t): per visible channel, power_mw = true mean power over the
    execution's cycle (its start to the next execution's start in the same call; start to end for the
    last), energy_mj = true energy between its start and end. Host-clock durations are used (the GPU
    clock drift, tens of ppm, is not applied to truth).

Energy counter (`energy_mj`)
    The true cumulative energy of the "total" channel (plus a random initial counter value), updated
    every `energy_period` (h200 100 ms, mi300x 1 ms, random phase) and floored to
    `energy_resolution_mj` (h200 1 mJ, mi300x 15.259 uJ).

Cards (`index`, `SimConfig.card_spread_pct`)
    Each device index is one card: its random streams mix in the index, and with card_spread_pct > 0 its power
    coefficients, sensor timing and noise and clock differ from the preset's by a few % (`presets.card_preset`,
    seeded by the card alone); `describe()["uuid"]` names the card (`sim_uuid`), as NVML's UUID names a GPU.
"""

from __future__ import annotations

import logging
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fingrav.config import SimConfig
from fingrav.device.base import (
    PLACEMENT_SETS,
    ClockReads,
    ExecRecords,
    GPUDevice,
    MeasuredRuns,
    MeasureRuns,
    PowerSamples,
)
from fingrav.device.sim.calls import CUT as _CUT
from fingrav.device.sim.calls import Calls, Draws, exclusive_cumsum, execution_times, limiter, segments, truth
from fingrav.device.sim.kernels import SimKernel, build_kernel, kernel_summary
from fingrav.device.sim.presets import MS, Preset, card_preset, card_state_offset, preset_summary, resolve_preset
from fingrav.device.sim.sensor import SensorStream
from fingrav.device.sim.timeline import PowerTimeline

logger = logging.getLogger(__name__)

HOST_EPOCH_NS = 1_700_000_000_000_000_000
_EPOCH_STEP_NS = 64_000  # host epoch is a multiple of every stamp / timer resolution used
_HOUSEKEEP_SEGMENTS = 50_000  # compute samples, consolidate + prune once this many segments are pending
_PRUNE_MARGIN_NS = 1.0 * MS
_LIMIT_CYCLES = 20_000  # limit cycles drawn per card (hours of sustained load)
_UNSTAMPED_PART_NS = 250.0 * MS  # `run_unstamped` simulates (and asks `more`) in parts of this much GPU time
_MJ_PER_MWNS = 1e-9  # 1 mW * 1 ns = 1e-12 J = 1e-9 mJ


def sim_uuid(preset: str, index: int, card_spread_pct: float = 0.0) -> str:
    """The UUID of simulated card `index` (like NVML's "GPU-<uuid>"): the same card, the same UUID, in every sweep."""
    import uuid

    return f"SIM-{uuid.uuid5(uuid.NAMESPACE_URL, f'fingrav-sim:{preset}:{card_spread_pct:g}:{int(index)}')}"


def limit_cycle_schedule(p: Preset, rng: np.random.Generator, cycles: int = _LIMIT_CYCLES) -> tuple[np.ndarray, ...]:
    """The limit cycles of one card: (start of each cycle after `limit_cycle_start_ns` of limiter age, its clamped
    length), ns. Each cycle's released and clamped lengths are the preset's times a lognormal factor of mean 1 and
    log-sd `limit_cycle_jitter` (0: a strictly periodic cycle), drawn once per card: the H200's cycles vary from
    one to the next (issue 10: 200 ms block means 726 726 731 572 707 718 723 709 620 ...)."""
    j = p.limit_cycle_jitter
    f_hi = np.exp(j * rng.standard_normal(cycles) - 0.5 * j * j)
    f_lo = np.exp(j * rng.standard_normal(cycles) - 0.5 * j * j)
    hi, lo = p.limit_cycle_high_ns * f_hi, p.limit_cycle_low_ns * f_lo
    starts = np.concatenate(([0.0], np.cumsum(hi + lo)[:-1]))
    return starts, lo


def limit_cycle_level(
    age_ns: np.ndarray,
    fast: np.ndarray,
    lss: np.ndarray,
    burst: np.ndarray,
    p: Preset,
    schedule: tuple[np.ndarray, ...] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The limiter level L and the limit-cycle number (-1 before the first clamp) at limiter ages `age_ns`:
    the fast limiter's level `fast` (its pull-down to the burst level) until `limit_cycle_start_ns`, then each
    cycle of `schedule` (`limit_cycle_schedule`; None: strictly periodic) clamped at L_low for its clamped length
    and at the burst level for the rest. L_low keeps the mean of a nominal cycle at the kernel's sustained limiter
    level `lss` (the cap target), within [0.2, burst]; cycles that are longer released draw more."""
    hi, lo = p.limit_cycle_high_ns, p.limit_cycle_low_ns
    period = hi + lo
    low_level = np.clip((lss * period - burst * hi) / lo, 0.2, burst)
    since = age_ns - p.limit_cycle_start_ns
    if schedule is None:
        cycle_no = np.where(since >= 0, np.floor(since / period), -1).astype(np.int64)
        phase = since - np.maximum(cycle_no, 0) * period
        clamp = np.full(since.shape, lo)
    else:
        starts, lows = schedule
        k = np.clip(np.searchsorted(starts, since, side="right") - 1, 0, starts.size - 1)
        cycle_no = np.where(since >= 0, k, -1).astype(np.int64)
        phase = since - starts[k]
        clamp = lows[k]
    level = np.where(since < 0, fast, np.where(phase < clamp, low_level, burst))
    return level, cycle_no


def _sustained_truth(
    channels: Sequence[str],
    marks: dict[str, np.ndarray],
    e_end: np.ndarray,
    idle_ch: np.ndarray,
    n: int,
    last_start: float,
    last_end: float,
) -> dict[str, dict[str, float]]:
    """The true sustained power of one unstamped run (`SimulatedGPU.sustained_truth_of_last_run`): over whole
    limit cycles (from the first execution of the first complete cycle to the first of the last cycle seen),
    else from the first part start in the run's second half to its end.

    marks: the executions that start a part or a new limit cycle, in order: "exec" (index in the run), "fs"
    (start, ns), "e_start" (cumulative excess energy at the start, mW ns, (C, m)), "cycle_no"; e_end: the
    cumulative excess energy at the run's end (C,); n: executions; last_start / last_end: the last one's (ns)."""
    cyc = marks["cycle_no"]
    first = np.flatnonzero(np.diff(cyc) > 0) + 1  # marks that start a new cycle
    fs, e_start = marks["fs"], marks["e_start"]
    if first.size >= 2:
        a, b, cycles = int(first[0]), int(first[-1]), int(first.size - 1)
        t_b, e_b = fs[b], e_start[:, b]
    else:
        a, cycles = int(np.searchsorted(marks["exec"], n // 2)), 0
        a = min(a, fs.size - 1)
        t_b, e_b = last_end, e_end
    span = max(float(t_b - fs[a]), 1.0)
    power = (e_b - e_start[:, a]) / span + idle_ch[:, 0]
    cycle = float((last_start - fs[0]) / (n - 1)) if n > 1 else float(last_end - fs[0])
    return {
        ch: {"power_mw": float(power[i]), "cycle_ns": cycle, "window_ns": span, "cycles": float(cycles)}
        for i, ch in enumerate(channels)
    }


@dataclass(frozen=True)
class _CallsRun:
    """What `SimulatedGPU._run_calls` returns: the records, and the host clock (ns since the start) before each
    call began and after it returned (R,)."""

    records: ExecRecords
    returned_before: np.ndarray
    returned_after: np.ndarray


class SimulatedGPU(GPUDevice):
    """A simulated GPU with known ground truth; see the module docstring for the model.

    Args:
        sim_cfg: preset name and overrides (`fingrav.config.SimConfig`).
        index: device index (only recorded and mixed into the random streams).
        seed: random seed; the same seed and the same sequence of calls give identical results.
        world_size: GPUs of the group this one belongs to (collectives need >= 2; each rank runs its own
            SimulatedGPU in its own process, see `fingrav.collect.distributed`).
    """

    unstamped_runs = True
    batch_runs = True

    backend = "sim"

    def __init__(self, sim_cfg: SimConfig | None = None, index: int = 0, seed: int = 0, world_size: int = 1) -> None:
        self.sim_cfg = sim_cfg if sim_cfg is not None else SimConfig()
        self.index = int(index)
        self.preset: Preset = card_preset(resolve_preset(self.sim_cfg), self.index, self.sim_cfg.card_spread_pct)
        self.seed = int(seed)
        self.world_size = int(world_size)
        p = self.preset
        comps = p.components
        self._channels: tuple[str, ...] = tuple(p.channels)
        chan_mat = np.zeros((len(self._channels), len(comps)))
        for row, ch in enumerate(self._channels):
            if ch == "total":
                chan_mat[row, :] = 1.0
            else:
                chan_mat[row, p.component_index(ch)] = 1.0
        self._chan_mat = chan_mat
        self._sens = np.array([c.clock_sensitivity for c in comps])
        self._idle_ch = chan_mat @ np.array([c.idle_mw for c in comps])
        self._gap_ch = chan_mat @ np.array([c.gap_mw for c in comps])
        self._spin_ch = chan_mat @ np.array([c.spin_mw for c in comps])
        # each stream's channels as codes into self._channels (samples are coded: `PowerSamples.coded`)
        self._stream_codes = [np.array([self._channels.index(ch) for ch in s.channels], np.int8) for s in p.sensors]
        self._scenario_code: int | None = None  # `begin_scenario`
        self._start_over()
        logger.debug("simulated GPU %s index %d seed %d at host %d ns", p.name, self.index, self.seed, self._host0)

    def _start_over(self) -> None:
        """Set the whole simulated state as at the open, from the seed (and the scenario begun, `begin_scenario`)
        alone: the random streams, the virtual host clock (its epoch and now), the true-power history, the sensor
        streams, the limit cycles, the device's transient state (clock ramp, limiter age, warming, last busy end),
        sampling and the energy counter, the last truths and the prepared kernels. Called by `__init__`,
        `begin_scenario` and `reset_for_next_scenario`."""
        p = self.preset
        preset_code = sum(ord(ch) for ch in p.name)
        entropy = [abs(self.seed), int(self.seed < 0), self.index, preset_code]
        if self._scenario_code is not None:
            entropy.append(self._scenario_code)
        ss = np.random.SeedSequence(entropy)
        kids = ss.spawn(4 + 2 * len(p.sensors))
        late_kids = ss.spawn(len(p.sensors))  # late stamps: children of their own, after (never shifting) the above
        acquire_kids = ss.spawn(len(p.sensors))  # acquisition jitter: likewise, after the late stamps'
        truth_kids = ss.spawn(len(p.sensors))  # the jitter a reading's truth averages over: after the others
        self._rng_exec = np.random.default_rng(kids[0])
        self._rng_clock = np.random.default_rng(kids[1])
        rng_misc = np.random.default_rng(kids[2])

        self._host0 = HOST_EPOCH_NS + int(rng_misc.integers(0, 10**9)) * _EPOCH_STEP_NS
        self._now = 0  # host clock, ns since self._host0
        self._timeline = PowerTimeline(len(self._channels))
        self._streams = [
            SensorStream(
                s,
                [self._channels.index(ch) for ch in s.channels],
                self._idle_ch[[self._channels.index(ch) for ch in s.channels]],
                np.random.default_rng(kids[3 + 2 * i]),
                np.random.default_rng(kids[4 + 2 * i]),
                np.random.default_rng(late_kids[i]),
                np.random.default_rng(acquire_kids[i]),
                np.random.default_rng(truth_kids[i]),
            )
            for i, s in enumerate(p.sensors)
        ]
        cycling = p.limit_cycle_high_ns > 0 and p.limit_cycle_low_ns > 0
        self._limit_cycles = limit_cycle_schedule(p, np.random.default_rng(kids[-1])) if cycling else None
        # device transient state
        self._clock = p.clock_idle_level
        self._limiter_age = 0.0
        self._theta = 0.0  # die warming, 0 (cold) .. 1 (busy equilibrium)
        self._t_busy_end = -1e15  # long idle before the simulation starts
        # telemetry
        self._sampling = False
        self._undrained: list[PowerSamples] = []
        self._readings_truth: list[PowerSamples] = []  # expected readings of every sample computed so far
        self._energy_phase = float(rng_misc.uniform(0.0, p.energy_period_ns))
        self._energy_offset_mj = float(rng_misc.uniform(1e6, 1e9))
        self._last_truth: dict[str, dict[str, np.ndarray]] | None = None
        self._last_sustained: dict[str, dict[str, float]] | None = None
        self._last_part: dict[str, Any] = {}
        self._slow_x = 0.0
        self._kernels: dict[str, SimKernel] = {}
        self._n_prepared = 0
        self._card_state: float | None = None  # `Preset.state_sd`: drawn at the first kernel prepared

    def release_kernels(self) -> None:
        """Forget the modelled kernels (`GPUDevice.release_kernels`; the simulator allocates no memory): `describe()`
        lists only the kernels prepared since."""
        self._kernels.clear()

    def begin_scenario(self, name: str) -> None:
        """Key every random stream to scenario `name` as well as the seed (`GPUDevice.begin_scenario`) and start over:
        each scenario's sensor noise, sampling grid, execution jitter and limit cycles are its own draws, as on a real
        GPU, where they were one sequence for every scenario of a sweep (the fidelity matrix's four scenarios of a
        sweep saw the same noise, sample for sample: correlation 0.985). Still the same raw data, bit for bit, on a
        device kept open across a sweep or opened for the scenario alone."""
        self._scenario_code = zlib.crc32(name.encode())
        self._start_over()

    def reset_for_next_scenario(self) -> None:
        """As newly opened, exactly (`GPUDevice.reset_for_next_scenario`): the whole simulated state starts over from
        the seed (`_start_over`: virtual clock, warming, limiter, last busy end, random streams, sensor phases), so a
        scenario measured on a device kept open across a sweep gives the raw data, bit for bit, of one measured on a
        device opened for it alone (the Snakemake rule's way). The simulator thus goes on modelling every scenario
        after a long idle: nothing carried over from the previous scenario (a real GPU carries its warmth over
        whether it is opened again or not)."""
        super().reset_for_next_scenario()
        self._scenario_code = None
        self._start_over()

    # ------------------------------------------------------------------ identity
    @property
    def channels(self) -> tuple[str, ...]:
        """("total", "xcd", "iod", "hbm") on mi300x, ("total", "memory") on h200."""
        return self._channels

    def describe(self) -> dict[str, Any]:
        """Identity and the effective model parameters (preset with overrides applied)."""
        return {
            "vendor": "sim",
            "name": self.preset.display_name,
            "backend": self.backend,
            "preset": self.preset.name,
            "index": self.index,
            "uuid": sim_uuid(self.preset.name, self.index, self.sim_cfg.card_spread_pct),
            "card_spread_pct": self.sim_cfg.card_spread_pct,
            "seed": self.seed,
            "world_size": self.world_size,
            "channels": list(self._channels),
            "host_epoch_ns": self._host0,
            "overrides": self.sim_cfg.overrides.model_dump(exclude_none=True),
            "parameters": preset_summary(self.preset),
            "kernels": {label: kernel_summary(self.preset, k) for label, k in self._kernels.items()},
        }

    # ------------------------------------------------------------------ time
    def host_time_ns(self) -> int:
        """Now on the virtual host clock (ns)."""
        return self._host0 + self._now

    def sleep_ns(self, duration_ns: int) -> None:
        """Idle for `duration_ns` of virtual time (no real sleeping)."""
        d = int(duration_ns)
        if d < 0:
            raise ValueError(f"sleep_ns({duration_ns}): negative duration")
        self._now += d
        self._housekeep()

    def _gpu_of(self, host_rel: np.ndarray) -> np.ndarray:
        """GPU clock stamps (absolute int64 ns) of host times (ns since the simulation start)."""
        p = self.preset
        x = np.asarray(host_rel, dtype=np.float64)
        g = np.floor(x + p.clock_offset_ns + p.clock_drift * x).astype(np.int64)
        g -= g % p.gpu_clock_resolution_ns
        return self._host0 + g

    def _draw_reads(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(round trip, host overhead after it, when in the round trip the GPU stamp is taken) of `n` GPU-clock
        reads (int64, int64, float64 ns), from the clock stream."""
        p = self.preset
        rng = self._rng_clock
        extra = p.read_rt_median_extra_ns * np.exp(p.read_rt_sigma * rng.standard_normal(n))
        slow = np.where(rng.random(n) < p.read_slow_prob, rng.uniform(p.read_slow_ns[0], p.read_slow_ns[1], n), 0.0)
        slow_before = rng.random(n) < 0.5
        read_at = p.read_launch_share * p.read_rt_min_ns + rng.random(n) * extra + np.where(slow_before, slow, 0.0)
        rt = np.round(p.read_rt_min_ns + extra + slow).astype(np.int64)
        overhead = np.round(p.read_host_overhead_ns * (0.5 + rng.random(n))).astype(np.int64)
        return rt, overhead, read_at

    def read_gpu_clock(self, n: int) -> ClockReads:
        """`n` GPU-timestamp reads, each bracketed by host reads. Round trip = minimum + lognormal extra
        (+ a slow 50-200 us extra with probability `read_slow_prob`); the GPU stamp is taken at
        launch_share * minimum + U(0, 1) * extra into the round trip (+ the slow extra when it falls
        before the read)."""
        n = int(n)
        if n <= 0:
            z = np.zeros(0, np.int64)
            return ClockReads(z, z.copy(), z.copy())
        rt, overhead, read_at = self._draw_reads(n)
        before = self._now + exclusive_cumsum(rt + overhead)
        gpu = self._gpu_of(before + read_at)
        after = before + rt
        self._now = int(after[-1] + overhead[-1])
        return ClockReads(self._host0 + before, gpu, self._host0 + after)

    # ------------------------------------------------------------------ work
    def prepare(self, kernel: Any) -> SimKernel:
        """Model a `fingrav.config` GemmKernel / GemvKernel / AttentionKernel / CallableKernel / AllReduceKernel /
        AllGatherKernel (no memory is allocated; a collective is modelled over `world_size` GPUs). A callable's
        factory is imported (a target that names nothing fails here as on a GPU) but never called: the simulator
        models its declared flops and bytes."""
        if getattr(kernel, "kind", None) == "callable":
            from fingrav.device.callables import load_factory

            load_factory(kernel.target)
        k = build_kernel(self.preset, kernel, self.world_size)
        if self._card_state is None:  # the card's state for this scenario, at its first kernel
            self._card_state = card_state_offset(self.seed, self.index, k.label, self.preset.state_sd)
        k.placement = self._placement(k)
        self._kernels[k.label] = k
        return k

    def _placement(self, k: SimKernel) -> np.ndarray:
        """The execution-time factor of each input set of a newly prepared kernel (preset `placement_sd`): a GEMM,
        GEMV or attention rotates through `PLACEMENT_SETS` sets, as on a torch device; a collective or a callable
        (its factory owns its inputs) has one, at 1. Drawn from a generator of the seed, the device and the count
        of kernels prepared, apart from every other stream: placement_sd 0 changes nothing else."""
        self._n_prepared += 1
        if k.kind in ("allreduce", "allgather", "callable"):
            return np.ones(1)
        if self.preset.placement_sd <= 0:
            return np.ones(PLACEMENT_SETS)
        rng = np.random.default_rng([abs(self.seed), int(self.seed < 0), self.index, 0x51ACE, self._n_prepared])
        z = rng.standard_normal(PLACEMENT_SETS)
        return np.clip(1.0 + self.preset.placement_sd * k.u_memory * z, 0.5, 2.0)

    def kernel_info(self, handle: SimKernel) -> dict[str, Any]:
        """Simulator only: nominal time, utilizations and steady powers of a prepared kernel."""
        return kernel_summary(self.preset, handle)

    def _theta_at(self, t_start: float) -> float:
        """The die's warming (0..1) at `t_start`, after cooling since the last busy end."""
        idle = max(0.0, t_start - self._t_busy_end)
        return float(self._theta * np.exp(-min(idle / self.preset.thermal_tau_ns, 50.0)))

    def _warm(self, theta0: float, busy_ns: np.ndarray | float) -> np.ndarray:
        """Warming after `busy_ns` of busy time from theta0 (first order towards 1)."""
        return 1.0 - (1.0 - theta0) * np.exp(-np.asarray(busy_ns, dtype=np.float64) / self.preset.thermal_tau_ns)

    def _decayed_state(self, t_start: float) -> tuple[float, float, float]:
        """(clock level c, limiter age ns, idle ns) at `t_start` after the idle since the last busy end."""
        p = self.preset
        idle = max(0.0, t_start - self._t_busy_end)
        c = p.clock_idle_level + (self._clock - p.clock_idle_level) * np.exp(-min(idle / p.clock_down_ns, 50.0))
        age = self._limiter_age * np.exp(-min(idle / p.limiter_idle_tau_ns, 50.0))
        return float(c), float(age), idle

    def execute(self, segments: Sequence[tuple[Any, int]]) -> ExecRecords:
        """Run the segments back to back, every execution stamped (each pays the preset's stamp overhead in
        its launch gap); see the module docstring for the timing and power model."""
        return self._execute(segments, stamped=True)

    def run_unstamped(
        self, handle: Any, count: int, more: Callable[[int], int] | None = None, part: int | None = None
    ) -> ExecRecords:
        """`count` back-to-back executions with no stamp between them (no stamp overhead), bracketed by one stamp
        before and one after: one record spanning them all (exec_index = executions - 1). Simulated in parts
        (`part` executions, else `_UNSTAMPED_PART_NS` of GPU time), each continuing the previous one after one
        launch gap (no sync, no idle: what a GPU does with work queued ahead); `more` (`GPUDevice.run_unstamped`)
        is asked after each part past `count`. The truth of the call (`sustained_truth_of_last_run`) is its
        sustained power: the true mean over whole limit cycles (else over the run's second half)."""
        if int(count) <= 0:
            raise ValueError("count must be > 0")
        per_exec = (handle.base_ns if isinstance(handle, SimKernel) else 1.0) + self.preset.launch_gap_ns
        part = max(1, int(part) if part is not None else int(_UNSTAMPED_PART_NS // max(per_exec, 1.0)))
        todo = [min(part, int(count) - k) for k in range(0, int(count), part)]
        marks: list[dict[str, np.ndarray]] = []
        done = 0
        while todo:
            n = todo.pop(0)
            self._execute([(handle, n)], stamped=False, continue_from=done)
            st = self._last_part
            cyc = st["cycle_no"]
            keep = np.concatenate(([0], np.flatnonzero(np.diff(cyc) != 0) + 1))  # part start + cycle starts
            marks.append(
                {"exec": done + keep, "fs": st["fs"][keep], "e_start": st["e_start"][:, keep], "cycle_no": cyc[keep]}
            )
            if done == 0:
                first_start = st["gpu_start"]
            last_end = st["gpu_end"]
            done += n
            if not todo and more is not None and (k := int(more(done))) > 0:
                todo = [min(part, k - j) for j in range(0, k, part)]
        joined = {k: np.concatenate([m[k] for m in marks], axis=-1) for k in marks[0]}
        self._last_sustained = _sustained_truth(
            self._channels,
            joined,
            st["e_end"],
            self._idle_ch[:, None],
            done,
            float(st["fs"][-1]),
            float(st["fe"][-1]),
        )
        return ExecRecords(np.zeros(1, np.int32), np.full(1, done - 1, np.int32), first_start, last_end)

    def sustained_truth_of_last_run(self) -> dict[str, dict[str, float]] | None:
        """Simulator only: per channel, of the last `run_unstamped`: "power_mw" (true mean power over whole limit
        cycles, or over the second half of the run without a cycle), "cycle_ns" (true mean start-to-start time
        of its executions: no stamps), "window_ns" (the span the power is over), "cycles" (whole limit cycles
        in it)."""
        return self._last_sustained

    def _execute(self, segments: Sequence[tuple[Any, int]], stamped: bool, continue_from: int = 0) -> ExecRecords:
        """The executions of one call; continue_from > 0: a later part of an unstamped run that already had that
        many executions (`run_unstamped`): it starts one launch gap after the previous part's end, with no warm-up
        penalty and the previous part's outlier factor."""
        calls = Calls.build([list(segments)], np.zeros(1, np.int64), self.preset.name)
        if calls.n == 0:
            z32, z64, zf = np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0)
            self._last_truth = {
                ch: {k: zf.copy() for k in ("power_mw", "energy_mj", "cycle_ns", "cycle_energy_mj")}
                for ch in self._channels
            }
            return ExecRecords(z32, z32.copy(), z64, z64.copy())
        run = self._run_calls(calls, np.zeros(1, np.int64), stamped, continue_from)
        self._housekeep()
        return run.records

    def measure_runs(self, batch: MeasureRuns) -> MeasuredRuns:
        """A batch of measure runs (`GPUDevice.measure_runs`: the protocol), generated at once: the clock reads,
        the executions of every run, their power and truth with array operations over the whole batch (the model
        and its random streams as for `execute`, drawn per batch). The simulator has no telemetry."""
        r = len(batch)
        calls = Calls.build([list(k) for k in batch.kinds], batch.kind, self.preset.name)
        telemetry = type(self).read_telemetry is not GPUDevice.read_telemetry
        if calls.n == 0 or (calls.last < calls.first).any() or telemetry:
            return super().measure_runs(batch)  # empty runs, or a subclass that reads telemetry: run by run
        rt, overhead, read_at = self._draw_reads(r)
        idle = int(batch.idle_ns)
        delay = np.asarray(batch.delay_ns, dtype=np.int64)
        pre = idle + rt + overhead + int(batch.guard_ns) + delay
        run = self._run_calls(calls, pre, True, 0)
        before = run.returned_before + idle  # the host clock at each run's clock read
        host_start = before + rt + overhead + int(batch.guard_ns) + delay
        reads = ClockReads(self._host0 + before, self._gpu_of(before + read_at), self._host0 + before + rt)
        e0, e1 = self._energy_at(before), self._energy_at(run.returned_after)  # before pruning the history
        self._housekeep()
        return MeasuredRuns(
            host_start_ns=self._host0 + host_start,
            energy_start_mj=e0,
            energy_end_mj=e1,
            reads=reads,
            records=run.records,
            run=calls.call,
            telemetry=None,
            truth=self._last_truth,
        )

    def _run_calls(self, calls: Calls, pre_ns: np.ndarray, stamped: bool, continue_from: int) -> _CallsRun:
        """Simulate `calls` one after the other, call r launched `pre_ns[r]` + its launch latency after the previous
        call returned (the first: after now). The steps: draw, execution times, limiter, schedule, clock ramp and
        warming (carried from call to call), power, timeline, truth, device state."""
        p = self.preset
        r, n = calls.r, calls.n
        d = Draws.draw(self._rng_exec, p, r, n, continue_from > 0)
        sync = np.round(p.sync_latency_ns * (0.8 + 0.4 * d.sync)).astype(np.int64)
        # the launches, relative to the end of the previous call (its last execution), before the durations
        if continue_from:
            gap0 = p.launch_gap_ns * float(np.exp(p.launch_gap_sigma * d.launch[0]))
            # never before the host's now: samples up to now may have been computed (a `more` that drained them)
            launch0 = max(self._now, int(round(self._t_busy_end + gap0)))
            lead = np.zeros(1, np.int64)
        else:
            latency = np.round(p.launch_latency_ns * (0.8 + 0.4 * d.launch)).astype(np.int64)
            lead = np.asarray(pre_ns, np.int64) + latency  # from the previous return (r = 0: now) to the launch
            launch0 = self._now + int(lead[0])
        lead_after_end = lead.copy()  # from the previous call's last end to the launch
        lead_after_end[1:] += sync[:-1]
        idle = lead_after_end.astype(np.float64)
        idle[0] = max(0.0, float(launch0) - self._t_busy_end)
        # outliers: a call is 10-30 % slower (a continued part keeps its run's factor)
        slow_x = np.where(d.outlier < p.outlier_run_fraction, d.slowdown, 0.0)
        if continue_from:
            slow_x = np.array([self._slow_x])
        self._slow_x = float(slow_x[-1])
        place = calls.placement()
        d_pre, gaps = execution_times(calls, d, p, idle, slow_x, not continue_from, stamped, place)
        busy_nominal = d_pre + gaps
        # limiter age: decays over each idle, grows with nominal busy time (carried from call to call)
        busy_sum = calls.per_call_sum(busy_nominal)
        age0 = np.empty(r)
        age = self._limiter_age
        for i in range(r):
            age0[i] = age * np.exp(-min(idle[i] / p.limiter_idle_tau_ns, 50.0))
            age = float(age0[i] + busy_sum[i])
        cum = exclusive_cumsum(busy_nominal)
        ages = age0[calls.call] + (cum if r == 1 else calls.within_call(cum))
        level, cycle_no, dur = limiter(calls, ages, d_pre, p, self._limit_cycles, limit_cycle_level)
        # schedule: integer ns, each call launched `lead` after the previous one's end (+ sync for its return)
        dur_i = np.maximum(np.round(dur).astype(np.int64), 1)
        gap_i = np.round(gaps).astype(np.int64)
        step = dur_i + gap_i
        span = calls.per_call_sum(step) if r > 1 else np.array([step.sum()])
        launch = launch0 + exclusive_cumsum(span + np.append(lead_after_end[1:], 0))
        in_call = calls.within_call(exclusive_cumsum(step)) if r > 1 else exclusive_cumsum(step)
        starts = launch[calls.call] + in_call
        ends = starts + dur_i
        fs = starts.astype(np.float64)
        fe = ends.astype(np.float64)
        # clock ramp and warming, carried from call to call
        c_start, theta0 = self._ramp_and_warming(launch, fe[calls.last], idle)
        since = (starts - launch[calls.call]).astype(np.float64)
        zc = since / p.clock_up_ns
        cs = c_start[calls.call]
        clk = np.where(zc > _CUT, 1.0, 1.0 - (1.0 - cs) * np.exp(-np.minimum(zc, _CUT)))
        x_plat = self._excess_power(calls, clk * level, slow_x, place, theta0, since)
        t0, p0, slope = segments(calls, fs, fe, x_plat, self._gap_ch)
        breaks = 4 * calls.first if r > 1 else None
        x0 = self._timeline.append(t0, p0, slope, breaks)
        # ground truth, exact from the cumulative excess energy at the segment starts
        fd = fe - fs
        exec_e, cyc_len, cyc_e = truth(calls, fs, fd, x0, self._idle_ch)
        self._last_truth = {
            ch: {
                "power_mw": cyc_e[i] / cyc_len,
                "energy_mj": exec_e[i] * _MJ_PER_MWNS,
                "cycle_ns": cyc_len,
                "cycle_energy_mj": cyc_e[i] * _MJ_PER_MWNS,
                "start_host_ns": self._host0 + starts,
            }
            for i, ch in enumerate(self._channels)
        }
        if not stamped:  # `run_unstamped` joins its parts into the sustained truth
            self._last_part = {
                "fs": fs,
                "fe": fe,
                "e_start": x0[:, 0::4],
                "e_end": x0[:, -1].copy(),
                "cycle_no": cycle_no,
                "gpu_start": self._gpu_of(starts[:1]),
                "gpu_end": self._gpu_of(ends[-1:]),
            }
        # the host: each call returns a sync latency after its last end
        returned_after = ends[calls.last] + sync
        returned_before = np.empty(r, np.int64)
        returned_before[0] = self._now
        returned_before[1:] = returned_after[:-1]
        self._t_busy_end = float(fe[-1])
        self._limiter_age = age
        self._now = int(returned_after[-1])
        records = ExecRecords(calls.segment, calls.exec_index, self._gpu_of(starts), self._gpu_of(ends))
        return _CallsRun(records, returned_before, returned_after)

    def _excess_power(
        self,
        calls: Calls,
        mult: np.ndarray,
        slow_x: np.ndarray,
        place: np.ndarray | None,
        theta0: np.ndarray,
        since: np.ndarray,
    ) -> np.ndarray:
        """Each execution's plateau excess power per channel (C, n), mW: the plateau through the clock and the
        limiter (`mult` (n,): clock level x limiter level), the call's outlier slowdown (`slow_x` (R,)), the input
        set's placement (`place` (n,), None: 1: the same work in more time draws less) and, below the cap, the
        warming from `theta0` (R,) at each call's launch over the `since` (n,) ns into the call and the card's state
        (`Preset.state_sd`)."""
        p = self.preset
        comp_mult = 1.0 - self._sens[:, None] * (1.0 - mult[None, :])
        x_plat = self._chan_mat @ (calls.plateau() * comp_mult) / np.sqrt(1.0 + slow_x[calls.call])
        if place is not None:
            x_plat = x_plat / place[None, :]
        heavy = np.array([h.heavy for h in calls.handles])[calls.handle]
        if p.thermal_rise > 0:  # warming raises the excess power of kernels below the cap (the limiter holds the rest)
            warm = 1.0 + p.thermal_rise * self._warm(theta0[calls.call], since)
            x_plat = x_plat * np.where(heavy, 1.0, warm)[None, :]
        if self._card_state:  # the card's state, below the cap
            x_plat = x_plat * np.where(heavy, 1.0, 1.0 + self._card_state)[None, :]
        return x_plat

    def _ramp_and_warming(self, launch: np.ndarray, last_end: np.ndarray, idle: np.ndarray) -> tuple[np.ndarray, ...]:
        """(clock level c at each call's launch, warming theta at each launch) (R,), carried from call to call
        through each idle (`idle` (R,) ns before each launch); the device's clock and warming after the last."""
        p = self.preset
        r = launch.size
        c_start, theta0 = np.empty(r), np.empty(r)
        c, theta = self._clock, self._theta
        for i in range(r):
            c_start[i] = p.clock_idle_level + (c - p.clock_idle_level) * np.exp(-min(idle[i] / p.clock_down_ns, 50.0))
            theta0[i] = theta * np.exp(-min(idle[i] / p.thermal_tau_ns, 50.0))
            busy = float(last_end[i] - launch[i])
            z_end = busy / p.clock_up_ns
            c = 1.0 if z_end > _CUT else float(1.0 - (1.0 - c_start[i]) * np.exp(-z_end))
            theta = float(self._warm(float(theta0[i]), busy))
        self._clock, self._theta = c, theta
        return c_start, theta0

    def spin(self, duration_ns: int) -> ExecRecords:
        """A flat load (preset `spin_mw` per component) lasting exactly `duration_ns` of GPU time."""
        p = self.preset
        d = int(duration_ns)
        if d <= 0:
            raise ValueError(f"spin({duration_ns}): duration must be positive")
        rng = self._rng_exec
        start = self._now + int(round(p.launch_latency_ns * (0.8 + 0.4 * rng.random())))
        c_start, age0, _ = self._decayed_state(float(start))
        host_d = max(1, int(round(d / (1.0 + p.clock_drift))))
        end = start + host_d
        t0 = np.array([float(start), float(end)])
        p0 = np.stack([self._spin_ch, np.zeros(len(self._channels))], axis=1)
        self._timeline.append(t0, p0, np.zeros_like(p0))
        gpu_start = self._gpu_of(np.array([start]))
        z_end = host_d / p.clock_up_ns
        self._clock = 1.0 if z_end > _CUT else float(1.0 - (1.0 - c_start) * np.exp(-z_end))
        self._theta = float(self._warm(self._theta_at(float(start)), float(host_d)))
        self._limiter_age = age0 + host_d
        self._t_busy_end = float(end)
        self._now = end + int(round(p.sync_latency_ns * (0.8 + 0.4 * rng.random())))
        self._housekeep()
        return ExecRecords(np.zeros(1, np.int32), np.zeros(1, np.int32), gpu_start, gpu_start + np.int64(d))

    # ------------------------------------------------------------------ power
    def start_sampling(self) -> None:
        """Start the sensor streams (each at a random phase); history before now is still seen."""
        if self._sampling:
            return
        self._sampling = True
        for s in self._streams:
            s.start(float(self._now))
        self._housekeep(force=True)

    def _collect(self, visible: bool = False) -> None:
        """Compute every sample stamped <= now (`visible`: visible to the host by now, `SensorSpec`) into the
        undrained buffer."""
        parts, clean_parts = [], []
        names = self._channels
        for stream, codes in zip(self._streams, self._stream_codes, strict=True):
            stamps, vals, clean = stream.collect(float(self._now), self._timeline, visible)
            if stamps.size == 0:
                continue
            nc = len(codes)
            t = self._host0 + np.repeat(stamps, nc)
            ch = np.tile(codes, stamps.size)
            parts.append(PowerSamples.coded(t, ch, names, vals.T.ravel()))
            clean_parts.append(PowerSamples.coded(t, ch, names, clean.T.ravel()))
        if parts:
            ps, cs = PowerSamples.concat(parts), PowerSamples.concat(clean_parts)
            if len(parts) > 1:
                order = np.argsort(ps.t_ns, kind="stable")
                ps, cs = ps.take(order), cs.take(order)
            self._undrained.append(ps)
            self._readings_truth.append(cs)

    def drain_samples(self) -> PowerSamples:
        """Samples stamped since the last drain and visible to the host by now (host clock, mW, long format)."""
        return self._drain(visible=True)

    def _drain(self, visible: bool) -> PowerSamples:
        if self._sampling:
            self._collect(visible)
        out = PowerSamples.concat(self._undrained)
        self._undrained = []
        self._housekeep(force=True)
        return out

    def stop_sampling(self) -> PowerSamples:
        """Stop the streams; return the samples not drained yet (every one stamped by now)."""
        out = self._drain(visible=False)
        self._sampling = False
        for s in self._streams:
            s.stop()
        return out

    def _housekeep(self, force: bool = False) -> None:
        """Compute pending samples and forget the true power nobody can observe any more."""
        if not force and self._timeline.pending_segments < _HOUSEKEEP_SEGMENTS:
            return
        if self._sampling and not force:
            self._collect()
        now = float(self._now)
        t_keep = (
            min([s.earliest_needed(now) for s in self._streams] + [now - self.preset.energy_period_ns])
            - _PRUNE_MARGIN_NS
        )
        self._timeline.prune(t_keep)

    def energy_mj(self) -> float:
        """Cumulative energy counter (mJ) of the "total" channel, coarse like the real counter."""
        return float(self._energy_at(np.array([self._now]))[0])

    def _energy_at(self, now: np.ndarray) -> np.ndarray:
        """The energy counter (mJ) as read at host times `now` (ns since the start, <= now, within the history)."""
        p = self.preset
        tick = np.floor((np.asarray(now, np.float64) - self._energy_phase) / p.energy_period_ns) * p.energy_period_ns
        tick += self._energy_phase
        e = np.zeros(tick.shape)
        pos = tick > 0
        if pos.any():
            e[pos] = self._idle_ch[0] * tick[pos] + self._timeline.excess_energy(tick[pos], [0])[0]
        mj = self._energy_offset_mj + e * _MJ_PER_MWNS
        res = p.energy_resolution_mj
        return np.floor(mj / res) * res if res > 0 else mj

    def drain_reading_truth(self) -> PowerSamples:
        """Simulator only: the noise-free, unquantized reading of every sample computed since the last call, averaged
        over the sensor's acquisition jitter (`SensorStream.expected_response`; the same t_ns and channel as the samples
        `drain_samples` returned): the truth of a sensor reading."""
        if self._sampling:
            self._collect()
        out = PowerSamples.concat(self._readings_truth)
        self._readings_truth = []
        return out

    def ground_truth_of_last_execute(self) -> dict[str, dict[str, np.ndarray]] | None:
        """Per channel: "power_mw" = true mean power over each execution's cycle (its start to the next
        start in the same call; start to end for the last), "cycle_ns" = that cycle's true length,
        "cycle_energy_mj" = the true energy over it, "energy_mj" = true energy from its start to its end,
        "start_host_ns" = its true start on the host clock;
        aligned with the records the last `execute` returned. None before any `execute`."""
        return self._last_truth

    # ------------------------------------------------------------------ simulator-only helpers
    def _rel(self, t_ns: Any) -> np.ndarray:
        rel = (np.asarray(t_ns, dtype=np.int64) - self._host0).astype(np.float64)
        if rel.size and (rel.min() < self._timeline.earliest_ns or rel.max() > self._now):
            raise ValueError("time outside the retained true-power history (recent past up to now)")
        return rel

    def true_power_mw(self, t_ns: Any) -> dict[str, np.ndarray]:
        """Simulator only: true power (mW) per channel at absolute host times (ns). Only the recent
        past is held (about the longest sensor response, >= energy period); older times raise."""
        x = self._timeline.excess_power(self._rel(t_ns))
        return {ch: self._idle_ch[i] + x[i] for i, ch in enumerate(self._channels)}

    def true_energy_mj(self, t_from_ns: int, t_to_ns: int) -> dict[str, float]:
        """Simulator only: true energy (mJ) per channel between two absolute host times (ns)."""
        a, b = self._rel([t_from_ns, t_to_ns])
        x = self._timeline.excess_energy(np.array([a, b]))
        return {
            ch: float((x[i, 1] - x[i, 0] + self._idle_ch[i] * (b - a)) * _MJ_PER_MWNS)
            for i, ch in enumerate(self._channels)
        }

    def sensor_response_mw(self, t_ns: Any) -> dict[str, np.ndarray]:
        """Simulator only: the noise-free, unquantized reading (mW) each channel's sensor would report
        for a sample at grid times `t_ns` (absolute host ns, <= now; a late-stamped sample's stamp is later,
        `SensorSpec`)."""
        rel = np.asarray(t_ns, dtype=np.int64) - self._host0
        if rel.size and rel.max() > self._now:
            raise ValueError("sensor_response_mw: times in the future")
        out: dict[str, np.ndarray] = {}
        for stream in self._streams:
            if rel.size and rel.min() - stream.spec.delay_ns - stream.span_ns < self._timeline.earliest_ns:
                raise ValueError("sensor_response_mw: times outside the retained history")
            vals = stream.true_response(rel.astype(np.float64), self._timeline)
            for row, ch in enumerate(stream.spec.channels):
                out[ch] = vals[row]
        return {ch: out[ch] for ch in self._channels}
