"""The simulated power sensor: one sample stream (period with jitter, boxcar window, first-order lag,
dead time, noise, quantization, late stamps) read out of the exact true-power timeline.

A sample read at (grid) time t reports  idle + integral of h(s) * x(t - delay - s) ds  where x is the true excess
power and h the impulse response of a boxcar of width W followed by a first-order lag of time
constant tau (h = boxcar when tau = 0). h is cut into taps [s_j, s_j+1); within each tap the true
power is integrated exactly ((E(a) - E(b)) / (b - a), E piecewise quadratic) and weighted by the
exact tap mass of h (its CDF is analytic), renormalized to unit gain after truncating the tail at
W + 9 tau (mass < 1e-4). The boxcar alone (tau = 0) is a single, exact tap.

A sample is read at its grid time (plus its acquisition jitter, `SensorSpec.acquire_jitter_ns`); a late stamp
(`SensorSpec.late_every`, `late_far_share`) moves only its timestamp, and the sample exists for the host (is
collected) once its stamp is reached.

The truth of a reading (`SensorStream.expected_response`) is what the sensor reads at that sample on average: the
noise-free, unquantized response, averaged over the acquisition jitter. Noise averages out of a reading, but the
jitter does not where the input changes on its time scale: a 50 µs window read with 90 µs of jitter next to µs-long
executions of two kernels reads a blend of both, on average 6 % below the reading at the grid time itself (the
fidelity matrix, seed 11, fidelity-8/s1). No estimator can recover the grid-time reading there; the expected one
is what a reading's CI must cover.
"""

from __future__ import annotations

import logging
from statistics import NormalDist

import numpy as np

from fingrav.device.sim.presets import SensorSpec
from fingrav.device.sim.timeline import PowerTimeline

logger = logging.getLogger(__name__)

_INTERVAL_BLOCK = 1024
_EVAL_BLOCK_POINTS = 2_000_000  # (samples x taps) evaluated per block, bounds memory
#: uniform range of the lateness of a far-late stamp (`SensorSpec.late_far_share`), in sensor periods: the H200's rare
#: ones are 6-18 ms late on its 20 ms grid
LATE_FAR_PERIODS = (0.3, 0.9)
#: the acquisition jitter (`SensorSpec.acquire_jitter_ns`) is cut at this many standard deviations
ACQUIRE_CUT_SD = 3.0
#: draws of the acquisition jitter a reading's truth is averaged over (`SensorStream.expected_response`), one from
#: each of as many equally likely strata: on fidelity-8/s1 of the matrix's seed 11 (90 µs of jitter, a 50 µs window)
#: 8, 16, 32 and 64 draws put its interleaved reading's truth at 413.1, 409.6, 407.3 and 408.1 W (grid time: 435.9 W)
TRUTH_JITTER_DRAWS = 16
#: the standard normal's quantile function within ACQUIRE_CUT_SD sd, on a grid of probabilities: np.interp between,
#: and the cut value beyond it (np.interp holds the end values), which is the jitter's own law (`_jitter_of`: a normal
#: draw clipped at the cut, not redrawn)
_CUT_P = np.linspace(NormalDist().cdf(-ACQUIRE_CUT_SD), NormalDist().cdf(ACQUIRE_CUT_SD), 4097)
_CUT_Z = np.array([NormalDist().inv_cdf(float(p)) for p in _CUT_P])


def response_cdf(s: np.ndarray, window_ns: float, lag_ns: float) -> np.ndarray:
    """Step response H(s) of boxcar(window) * first-order lag(tau): fraction of a step seen s ns after
    it reaches the filter input (the dead time comes on top)."""
    s = np.asarray(s, dtype=np.float64)
    w = float(window_ns)
    if lag_ns <= 0:
        return np.clip(s / w, 0.0, 1.0)
    tau = float(lag_ns)
    sp = np.maximum(s, 0.0)
    inside = (sp - tau * (-np.expm1(-sp / tau))) / w
    after = 1.0 - (tau / w) * np.exp(-sp / tau) * np.expm1(w / tau)
    return np.where(sp <= w, inside, after)


def response_taps(window_ns: float, lag_ns: float) -> tuple[np.ndarray, np.ndarray]:
    """Tap edges s_j (ns, from 0) and tap masses w_j (sum 1) of the sensor response."""
    w = float(window_ns)
    if lag_ns <= 0:
        return np.array([0.0, w]), np.array([1.0])
    tau = float(lag_ns)
    dt1 = min(w / 8.0, tau / 48.0)
    n1 = max(1, int(np.ceil(w / dt1)))
    zone1 = np.linspace(0.0, w, n1 + 1)
    widths = []
    total = 0.0
    width = tau / 48.0
    while total < 9.0 * tau:
        widths.append(width)
        total += width
        width *= 1.05
    zone2 = w + np.cumsum(widths)
    edges = np.concatenate([zone1, zone2])
    cdf = response_cdf(edges, w, tau)
    mass = np.diff(cdf)
    return edges, mass / mass.sum()


class SensorStream:
    """One stream of samples (shared timestamps) over some channels of a `PowerTimeline`."""

    def __init__(
        self,
        spec: SensorSpec,
        channel_index: list[int],
        idle_mw: np.ndarray,
        rng_grid: np.random.Generator,
        rng_noise: np.random.Generator,
        rng_late: np.random.Generator | None = None,
        rng_acquire: np.random.Generator | None = None,
        rng_truth: np.random.Generator | None = None,
    ) -> None:
        """`rng_late` draws the late stamps only (none drawn without them); None: a generator spawned from
        `rng_grid`'s seed, which leaves `rng_grid`'s own draws as they are. `rng_acquire` likewise draws the
        acquisition jitter only (none drawn without it; None: the second child of `rng_grid`'s seed); `rng_truth` the
        jitter a reading's truth is averaged over (`expected_response`; None: the third child)."""
        self.spec = spec
        self.channel_index = list(channel_index)
        self.idle_mw = np.asarray(idle_mw, dtype=np.float64)
        self._rng_grid = rng_grid
        self._rng_noise = rng_noise
        self.late = spec.late_every > 0 or spec.late_far_share > 0
        if self.late and rng_late is None:
            rng_late = np.random.default_rng(rng_grid.bit_generator.seed_seq.spawn(1)[0])
        self._rng_late = rng_late
        if spec.acquire_jitter_ns > 0 and rng_acquire is None:
            rng_acquire = np.random.default_rng(rng_grid.bit_generator.seed_seq.spawn(2)[1])
        self._rng_acquire = rng_acquire
        if spec.acquire_jitter_ns > 0 and rng_truth is None:
            rng_truth = np.random.default_rng(rng_grid.bit_generator.seed_seq.spawn(3)[2])
        self._rng_truth = rng_truth
        self._late_buf = np.zeros(0)  # lateness (ns) of the samples ahead, aligned with the intervals in _buf
        self._late_drawn = 0  # samples whose lateness has been drawn (their count sets the late_every pattern)
        self._late_phase = 0
        self.edges, self.mass = response_taps(spec.window_ns, spec.lag_ns)
        widths = np.diff(self.edges)
        dens = self.mass / widths  # mean density of h in each tap
        coef = np.zeros(self.edges.size)
        coef[:-1] += dens
        coef[1:] -= dens
        self._coef = coef  # value = sum_j coef_j * E(t - delay - s_j)
        self.span_ns = float(self.edges[-1])
        self.running = False
        self.next_t = 0.0
        self._buf = np.zeros(0)
        self._pos = 0

    # ------------------------------------------------------------------ grid
    def _intervals(self, n: int) -> np.ndarray:
        """The next `n` sample intervals (ns) without consuming them."""
        while self._buf.size - self._pos < n:
            p = self.spec.period_ns
            block = p + self.spec.jitter_ns * self._rng_grid.standard_normal(max(_INTERVAL_BLOCK, n))
            block = np.clip(block, 0.3 * p, 1.7 * p)
            if self.late:
                self._late_buf = np.concatenate([self._late_buf[self._pos :], self._draw_late(block.size)])
            self._buf = np.concatenate([self._buf[self._pos :], block])
            self._pos = 0
        return self._buf[self._pos : self._pos + n]

    def _draw_late(self, n: int) -> np.ndarray:
        """The lateness (ns, >= 0, before the cut at the next sample) of the next `n` samples drawn (`SensorSpec`)."""
        spec, rng = self.spec, self._rng_late
        assert rng is not None
        if self._late_drawn == 0 and spec.late_every > 0:
            self._late_phase = int(rng.integers(spec.late_every))
        k = self._late_drawn + np.arange(n)
        self._late_drawn += n
        late = np.zeros(n)
        if spec.late_every > 0:
            z = rng.standard_normal(n)
            on = (k + self._late_phase) % spec.late_every == 0
            late[on] = np.maximum(spec.late_ns + spec.late_spread_ns * z[on], 0.0)
        if spec.late_far_share > 0:
            far = rng.random(n) < spec.late_far_share
            lo, hi = (f * spec.period_ns for f in LATE_FAR_PERIODS)
            late = np.where(far, rng.uniform(lo, hi, n), late)
        return late

    def start(self, now: float) -> None:
        """Start the grid at a random phase after `now` (ns)."""
        self.running = True
        self.next_t = now + float(self._rng_grid.uniform(0.0, self.spec.period_ns))

    def stop(self) -> None:
        self.running = False

    def earliest_needed(self, now: float) -> float:
        """Oldest host time (ns) a future sample of this stream can see."""
        t = self.next_t if self.running else now
        return min(t, now) - self.spec.delay_ns - self.span_ns - ACQUIRE_CUT_SD * self.spec.acquire_jitter_ns

    def sample_times(self, now: float) -> tuple[np.ndarray, np.ndarray]:
        """Consume the samples stamped <= now: (their grid times, their stamps) in ns, float. Without late stamps
        the two are the same array. A sample whose grid time has passed but whose late stamp has not stays for a
        later call (its lateness is drawn once)."""
        if not self.running or self.next_t > now:
            return np.zeros(0), np.zeros(0)
        n = int((now - self.next_t) / self.spec.period_ns * 1.2) + 8
        while True:
            iv = self._intervals(n)
            times = self.next_t + np.concatenate([[0.0], np.cumsum(iv)])
            if times[-1] > now:
                break
            n *= 2
        m = int(np.searchsorted(times, now, side="right"))
        grid = stamps = times[:m]
        if self.late and m:
            # late, but before the next sample's grid time (which is at or before that sample's stamp)
            cut = times[1 : m + 1] - max(int(self.spec.stamp_resolution_ns), 1)
            stamps = np.maximum(np.minimum(grid + self._late_buf[self._pos : self._pos + m], cut), grid)
            m = int(np.searchsorted(stamps, now, side="right"))
            grid, stamps = grid[:m], stamps[:m]
        self._pos += m
        self.next_t = float(times[m])
        return grid, stamps

    # ------------------------------------------------------------------ values
    def true_response(self, times: np.ndarray, timeline: PowerTimeline) -> np.ndarray:
        """Noise-free sensor reading (mW) at sample times (ns): shape (C, N)."""
        times = np.asarray(times, dtype=np.float64)
        out = np.repeat(self.idle_mw[:, None], times.size, axis=1)
        if times.size == 0:
            return out
        hi = times - self.spec.delay_ns
        act = np.flatnonzero(timeline.active(hi - self.span_ns, hi))
        if act.size == 0:
            return out
        block = max(1, _EVAL_BLOCK_POINTS // self.edges.size)
        for b in range(0, act.size, block):
            idx = act[b : b + block]
            tq = hi[idx, None] - self.edges[None, :]
            x = timeline.excess_energy(tq, self.channel_index)
            x -= x[..., -1:]
            out[:, idx] += x @ self._coef
        return out

    def acquire_offsets(self, n: int) -> np.ndarray:
        """The acquisition jitter (ns) of the next `n` samples read: N(0, acquire_jitter_ns) cut at ACQUIRE_CUT_SD sd
        and at the dead time (a sample never reads past its grid time); zeros without jitter."""
        sd = float(self.spec.acquire_jitter_ns)
        if sd <= 0 or n == 0 or self._rng_acquire is None:
            return np.zeros(n)
        return self._jitter_of(self._rng_acquire.standard_normal(n))

    def _jitter_of(self, z: np.ndarray) -> np.ndarray:
        """Acquisition offsets (ns) of standard normal draws `z`: cut at ACQUIRE_CUT_SD sd and at the dead time."""
        j = np.clip(z, -ACQUIRE_CUT_SD, ACQUIRE_CUT_SD) * float(self.spec.acquire_jitter_ns)
        return np.minimum(j, float(self.spec.delay_ns))

    def expected_response(self, times: np.ndarray, timeline: PowerTimeline) -> np.ndarray:
        """The truth of a reading at grid times (ns): the noise-free reading (mW, shape (C, N)) averaged over the
        acquisition jitter, one draw from each of TRUTH_JITTER_DRAWS equally likely strata of its distribution (a
        stratified estimate: unbiased, and scattering far less than one draw where the response is smooth over the
        jitter); the reading at the grid time itself without jitter."""
        sd = float(self.spec.acquire_jitter_ns)
        if sd <= 0 or np.asarray(times).size == 0 or self._rng_truth is None:
            return self.true_response(times, timeline)
        times = np.asarray(times, dtype=np.float64)
        k = TRUTH_JITTER_DRAWS
        acc = np.zeros((self.idle_mw.size, times.size))
        for i in range(k):
            z = np.interp((i + self._rng_truth.random(times.size)) / k, _CUT_P, _CUT_Z)
            acc += self.true_response(times + self._jitter_of(z), timeline)
        return acc / k

    def collect(
        self, now: float, timeline: PowerTimeline, visible: bool = False
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Samples stamped <= now (`visible`: <= now - the spec's visible_after_ns, what a host polling now
        sees): (stamps ns relative, int64 (N,), values mW (C, N), the truth of each reading (C, N):
        `expected_response`). The values are read at the samples' grid times (which precede late stamps) plus their
        acquisition jitter."""
        times, stamp_times = self.sample_times(now - self.spec.visible_after_ns if visible else now)
        clean = self.expected_response(times, timeline)
        jitter = self.acquire_offsets(times.size)
        vals = self.true_response(times + jitter, timeline) if jitter.any() else clean.copy()
        if times.size:
            vals += self.spec.noise_mw * self._rng_noise.standard_normal((times.size, vals.shape[0])).T
            q = self.spec.quantization_mw
            if q > 0:
                vals = np.round(vals / q) * q
            np.maximum(vals, 0.0, out=vals)
        res = self.spec.stamp_resolution_ns
        stamps = np.floor(stamp_times).astype(np.int64)
        if res > 1:
            stamps -= stamps % res
        return stamps, vals, clean
