"""Phase targeting of the SSE runs (run_policy.sse_targeting): aim each SSE run's random delay so that the next
power sample reads the SSE execution, instead of leaving the sample's phase to chance.

The sensor's sampling clock is observable: every drained sample carries its timestamp (host clock). Before an SSE
run the collector drains the samples visible by then, predicts the next sample times as the last timestamp plus
multiples of the median of the last `HISTORY` intervals (on an H200: error sd 1.2 ms, shared/H200.md), and picks
the delay in [0, delay_max) that puts the SSE execution's end `aim_ns` (the sensor's dead time + a phase drawn
uniformly in [interval sd, window + lag / 2]) before a predicted sample: the samples that see the SSE at its
largest share of a reading, at phases spread over that band so that the joint estimator
(`fingrav.analysis.kernel_power`) still sees the SSE at several positions. The delay's randomness is kept where the
aim cannot be taken (no clock yet: too few samples), and the analysis uses every sample's exact position whatever
the aim was.

GPU-side module: numpy only. Times in ns (host clock).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from fingrav.contracts.plan import Plan
from fingrav.contracts.roles import TOTAL
from fingrav.contracts.tables import READ_GUARD_NS
from fingrav.device.base import GPUDevice, PowerSamples

logger = logging.getLogger(__name__)

#: sample intervals whose median predicts the next sample (shared/H200.md: the last 30 give sd 1.2 ms)
HISTORY = 30
#: fewest intervals before the clock is trusted
MIN_INTERVALS = 5


@dataclass
class SampleClock:
    """The sensor's sampling clock as seen by the host: the last timestamps of the total channel (ns)."""

    stamps_ns: list[int] = field(default_factory=list)

    def observe(self, samples: PowerSamples) -> None:
        """Take the total channel's timestamps of freshly drained samples."""
        if len(samples) == 0:
            return
        t = np.unique(samples.t_ns[samples.is_channel(TOTAL)])
        self.stamps_ns = (self.stamps_ns + [int(v) for v in t])[-(HISTORY + 1) :]

    @property
    def period_ns(self) -> float | None:
        """The median of the last intervals; None while fewer than MIN_INTERVALS are known."""
        if len(self.stamps_ns) < MIN_INTERVALS + 1:
            return None
        return float(np.median(np.diff(np.asarray(self.stamps_ns, np.float64))))

    @property
    def jitter_ns(self) -> float:
        """The standard deviation of the last intervals (0 while the clock is not trusted): how far the next sample
        may fall from its prediction."""
        if self.period_ns is None:
            return 0.0
        return float(np.std(np.diff(np.asarray(self.stamps_ns, np.float64))))

    def next_samples(self, after_ns: float, until_ns: float) -> np.ndarray:
        """The predicted sample times in (after_ns, until_ns] (empty without a clock)."""
        p = self.period_ns
        if p is None or p <= 0:
            return np.zeros(0)
        last = float(self.stamps_ns[-1])
        k0 = max(1, int(np.floor((after_ns - last) / p)))
        t = last + p * np.arange(k0, k0 + int((until_ns - after_ns) / p) + 3)
        return t[(t > after_ns) & (t <= until_ns)]


def aim_delay(
    clock: SampleClock, start_ns: float, end_after_ns: float, aim_ns: float, delay_max_ns: float, fallback_ns: int
) -> int:
    """The delay (ns, in [0, delay_max_ns)) that puts the target's end (`end_after_ns` after the run starts, the
    run starting at `start_ns` + the delay) `aim_ns` before a predicted sample; `fallback_ns` (the random delay)
    when no predicted sample can be hit (no clock yet)."""
    lo = start_ns + end_after_ns + aim_ns
    hits = clock.next_samples(lo, lo + delay_max_ns)
    if hits.size == 0:
        return int(fallback_ns)
    return int(np.clip(hits[0] - lo, 0, max(delay_max_ns - 1, 0)))


@dataclass
class SseAim:
    """The collector's phase targeting of SSE runs: `delay` drains the samples visible now (returned, for the
    recorder to keep: none is lost), updates the clock and gives the run's delay.

    end_after_ns: from the run's start (after the delay) to the SSE execution's end (warm-ups + the SSE, and any
    predecessor executions); lead_ns: from the decision to the run's start without the delay (the clock read and
    the guard); idle_ns: the run's idle, taken before the decision (`delay`); dead_ns, band_ns: the sensor's
    dead time and the band of phases aimed at (window + lag / 2);
    rng: draws the phase in the band."""

    end_after_ns: float
    lead_ns: float
    dead_ns: float
    band_ns: float
    delay_max_ns: float
    rng: np.random.Generator
    idle_ns: int = 0
    clock: SampleClock = field(default_factory=SampleClock)
    aimed: int = 0
    tried: int = 0

    @classmethod
    def of(cls, plan: Plan, rng: np.random.Generator) -> SseAim:
        """The aim of a plan's SSE runs (no predecessor: its length is not timed); its own random stream, drawn
        once from `rng`."""
        s = plan.sensor
        return cls(
            end_after_ns=float((plan.sse_index + 1) * plan.cycle_ns),
            idle_ns=int(plan.idle_ns),
            lead_ns=float(READ_GUARD_NS),
            dead_ns=float(s.delay_ns),
            band_ns=float(s.window_ns + s.lag_ns / 2.0),
            delay_max_ns=float(plan.delay_max_ns),
            rng=np.random.default_rng(int(rng.integers(2**63))),
        )

    def delay(self, device: GPUDevice, fallback_ns: int) -> tuple[int, PowerSamples]:
        """Idle `idle_ns` (the run's idle, taken here so that the next sample is predicted one period ahead, not
        across the idle: a jittered clock's prediction error grows with the periods predicted), drain, and return
        (the delay of the next SSE run, the samples drained to decide it); the run then starts without idle."""
        if self.idle_ns > 0:
            device.sleep_ns(int(self.idle_ns))
        drained = device.drain_samples()
        self.clock.observe(drained)
        self.tried += 1
        # a sample that comes early falls before the SSE's end (then the next one reads it 20 ms late): aim one
        # interval sd (at most half the band) into the band
        margin = min(self.clock.jitter_ns, self.band_ns / 2.0)
        aim = self.dead_ns + float(self.rng.uniform(margin, self.band_ns))
        d = aim_delay(
            self.clock, device.host_time_ns() + self.lead_ns, self.end_after_ns, aim, self.delay_max_ns, fallback_ns
        )
        self.aimed += int(self.clock.period_ns is not None)
        return d, drained
