"""GPU-clock to host-clock synchronization: fit offset and drift from bracketed timestamp reads.

GPU-side module (numpy + stdlib only).

Model (ARCHITECTURE.md, "Clocks and units")::

    host_ns = gpu_ns + offset_ns + drift * (gpu_ns - gpu_ref_ns)        (drift as a fraction)

Each `ClockReads` row is one GPU-timestamp read bracketed by two host-clock reads. The host time of
the GPU stamp is taken as the midpoint of the bracket; its error is at most half the round trip
(host_after - host_before), so only the fastest reads are kept: the time span of the reads is cut into
bins of consecutive reads and the lowest-round-trip fraction of each bin is kept, so that the kept
reads still cover the whole span and constrain the drift. A linear least-squares fit of the
instantaneous offset (host_mid - gpu) against (gpu - gpu_ref) follows, then one pass of outlier
rejection (robust 5-sigma on the residuals) and a refit. Reads spanning less than 100 ms (one burst)
cannot constrain the drift: it is then fixed at 0 (with a warning).

All epoch-sized int64 values are reduced by integer references before they are converted to float64,
so nanosecond precision survives 64-bit epochs. `offset_ns` itself is a float64: for clocks whose
epochs differ by more than 2**53 ns (~104 days) it is quantized to a few hundred ns at most, far below
the fit's uncertainty.
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fingrav.device.base import ClockReads
from fingrav.errors import DataError

logger = logging.getLogger(__name__)

#: reads per selection bin (the span is cut into about len(reads) / this many bins, at most MAX_BINS)
READS_PER_BIN = 25
MAX_BINS = 40
#: kept reads whose |residual| exceeds this many robust sigmas (and OUTLIER_FLOOR_NS) are dropped
OUTLIER_SIGMAS = 5.0
OUTLIER_FLOOR_NS = 200.0
#: kept reads spanning less GPU time than this cannot pin the drift down (a single burst): drift := 0
MIN_DRIFT_SPAN_NS = 100_000_000


@dataclass(frozen=True)
class ClockFit:
    """A fitted GPU-to-host clock mapping: host = gpu + offset_ns + drift * (gpu - gpu_ref_ns).

    offset_ns: host minus GPU clock at gpu_ref_ns (ns, float);
    gpu_ref_ns: reference point on the GPU clock (ns), the mean GPU time of the kept reads;
    drift: rate of the host clock relative to the GPU clock minus one (a fraction; `drift_ppm` in ppm);
    residual_ns: rms residual of the kept reads around the fitted line (ns);
    n_pairs: reads given; n_kept: reads used in the final fit;
    round_trip_min_ns / round_trip_median_ns: host_after - host_before over all reads (ns).
    """

    offset_ns: float
    gpu_ref_ns: int
    drift: float
    residual_ns: float
    n_pairs: int
    n_kept: int
    round_trip_min_ns: float
    round_trip_median_ns: float

    @property
    def drift_ppm(self) -> float:
        """Drift in parts per million."""
        return self.drift * 1e6

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every field plus `drift_ppm`."""
        d = asdict(self)
        d["gpu_ref_ns"] = int(self.gpu_ref_ns)
        d["drift_ppm"] = self.drift_ppm
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockFit:
        """Inverse of `to_dict`; ignores unknown keys (e.g. "valid"); accepts `drift_ppm` without `drift`."""
        drift = d.get("drift")
        if drift is None:
            drift = float(d.get("drift_ppm", 0.0)) * 1e-6
        try:
            return cls(
                offset_ns=float(d["offset_ns"]),
                gpu_ref_ns=int(d["gpu_ref_ns"]),
                drift=float(drift),
                residual_ns=float(d.get("residual_ns", math.nan)),
                n_pairs=int(d.get("n_pairs", 0)),
                n_kept=int(d.get("n_kept", 0)),
                round_trip_min_ns=float(d.get("round_trip_min_ns", math.nan)),
                round_trip_median_ns=float(d.get("round_trip_median_ns", math.nan)),
            )
        except KeyError as err:
            raise DataError(f"clock fit lacks {err.args[0]!r}: {d!r}") from None

    # -- mapping ------------------------------------------------------------------------------
    def _split_offset(self) -> tuple[int, float]:
        whole = int(round(self.offset_ns))
        return whole, float(self.offset_ns) - whole

    def gpu_to_host(self, gpu_ns: np.ndarray | int) -> np.ndarray:
        """Map GPU-clock ns to host-clock ns (int64, rounded to the nearest ns)."""
        g = np.asarray(gpu_ns, dtype=np.int64)
        whole, frac = self._split_offset()
        corr = np.rint((g - np.int64(self.gpu_ref_ns)).astype(np.float64) * self.drift + frac).astype(np.int64)
        return g + np.int64(whole) + corr

    def host_to_gpu(self, host_ns: np.ndarray | int) -> np.ndarray:
        """Map host-clock ns to GPU-clock ns (int64, rounded); the inverse of `gpu_to_host`."""
        h = np.asarray(host_ns, dtype=np.int64)
        whole, frac = self._split_offset()
        # host - whole - ref = (gpu - ref) * (1 + drift) + frac
        rel = (h - np.int64(whole) - np.int64(self.gpu_ref_ns)).astype(np.float64)
        return np.int64(self.gpu_ref_ns) + np.rint((rel - frac) / (1.0 + self.drift)).astype(np.int64)


def _select_fastest(gpu: np.ndarray, rtt: np.ndarray, keep_fraction: float, min_kept: int) -> np.ndarray:
    """Indices of the lowest-round-trip reads, `keep_fraction` of each bin of consecutive reads
    (in GPU-time order), at least `min_kept` in all."""
    n = len(gpu)
    order = np.argsort(gpu, kind="stable")
    n_bins = int(min(MAX_BINS, max(1, n // READS_PER_BIN)))
    per_bin_total = max(keep_fraction * n, float(min_kept))
    kept: list[np.ndarray] = []
    for chunk in np.array_split(order, n_bins):
        if len(chunk) == 0:
            continue
        k = int(min(len(chunk), max(1, math.ceil(per_bin_total * len(chunk) / n))))
        kept.append(chunk[np.argsort(rtt[chunk], kind="stable")[:k]])
    return np.sort(np.concatenate(kept))


def _linfit(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares y = a + b x; b = 0 when x spans less than MIN_DRIFT_SPAN_NS."""
    a = float(np.mean(y))
    sxx = float(np.sum((x - x.mean()) ** 2))
    if x.max() - x.min() < MIN_DRIFT_SPAN_NS or sxx <= 0.0:
        return a, 0.0
    b = float(np.sum((x - x.mean()) * (y - a)) / sxx)
    return a - b * float(x.mean()), b


@dataclass(frozen=True)
class ValidReads:
    """The clock reads whose host bracket is not reversed (int64 ns) and their round trips (ns); `n_pairs` reads
    were given."""

    hb: np.ndarray
    g: np.ndarray
    ha: np.ndarray
    rtt: np.ndarray
    n_pairs: int

    @classmethod
    def of(cls, reads: ClockReads, min_kept: int) -> ValidReads:
        hb = np.asarray(reads.host_before_ns, dtype=np.int64)
        g = np.asarray(reads.gpu_ns, dtype=np.int64)
        ha = np.asarray(reads.host_after_ns, dtype=np.int64)
        if not (len(hb) == len(g) == len(ha)):
            raise DataError(f"clock reads of unequal lengths: {len(hb)}, {len(g)}, {len(ha)}")
        n_pairs = len(g)
        ok = ha - hb >= 0
        if not ok.all():
            logger.warning("clock sync: dropping %d reads with host_after < host_before", int((~ok).sum()))
            hb, g, ha = hb[ok], g[ok], ha[ok]
        if len(g) < min_kept:
            raise DataError(f"clock sync needs at least {min_kept} valid GPU-clock reads, got {len(g)}")
        return cls(hb, g, ha, (ha - hb).astype(np.float64), n_pairs)


@dataclass(frozen=True)
class LineFit:
    """host_mid - gpu - `off_base` = a + b x (gpu - `gpu_ref`) over the reads `idx`; `res` their residuals (ns)."""

    gpu_ref: int
    off_base: int
    idx: np.ndarray
    a: float
    b: float
    res: np.ndarray
    x_all: np.ndarray


def _fit_line(r: ValidReads, idx: np.ndarray, min_kept: int) -> LineFit:
    """The line through the fastest reads `idx`, fitted again without the outliers (beyond OUTLIER_SIGMAS robust
    standard deviations, at least OUTLIER_FLOOR_NS) while at least `min_kept` reads remain."""
    g, hb = r.g, r.hb
    # integer references first, floats only for small differences
    g_base = int(g[idx].min())
    gpu_ref = g_base + int(round(float(np.mean((g[idx] - g_base).astype(np.float64)))))
    off_base = int(np.median(hb[idx] - g[idx]))
    x_all = (g - np.int64(gpu_ref)).astype(np.float64)
    # host_mid - gpu - off_base, computed as (hb - g - off_base) + rtt/2
    y_all = (hb - g - np.int64(off_base)).astype(np.float64) + r.rtt / 2.0
    a, b = _linfit(x_all[idx], y_all[idx])
    res = y_all[idx] - (a + b * x_all[idx])
    mad = float(np.median(np.abs(res - np.median(res))))
    limit = max(OUTLIER_SIGMAS * 1.4826 * mad, OUTLIER_FLOOR_NS)
    good = np.abs(res) <= limit
    if (~good).any() and good.sum() >= min_kept:
        logger.debug("clock sync: rejecting %d of %d kept reads beyond %.0f ns", int((~good).sum()), len(idx), limit)
        idx = idx[good]
        a, b = _linfit(x_all[idx], y_all[idx])
        res = y_all[idx] - (a + b * x_all[idx])
    return LineFit(gpu_ref, off_base, idx, a, b, res, x_all)


def fit_clock(reads: ClockReads, keep_fraction: float = 0.2, min_kept: int = 4) -> ClockFit:
    """Fit offset and drift of the GPU clock against the host clock.

    reads: bracketed GPU-timestamp reads (int64 ns); keep_fraction: fraction of the reads (the fastest
    of each time bin) used in the fit; min_kept: fewest reads the fit may use.
    Raises DataError when fewer than `min_kept` valid reads (host_after >= host_before) are given.
    Steps: the valid reads -> the fastest of each time bin (`_select_fastest`) -> a robust line (`_fit_line`).
    """
    if not 0.0 < keep_fraction <= 1.0:
        raise ValueError(f"keep_fraction must be in (0, 1], got {keep_fraction}")
    min_kept = max(int(min_kept), 2)
    r = ValidReads.of(reads, min_kept)
    line = _fit_line(r, _select_fastest(r.g, r.rtt, keep_fraction, min_kept), min_kept)
    span = float(line.x_all[line.idx].max() - line.x_all[line.idx].min())
    if span < MIN_DRIFT_SPAN_NS:
        logger.warning("clock sync: the reads span only %.1f ms of GPU time; drift fixed at 0", span / 1e6)
    fit = ClockFit(
        offset_ns=float(line.off_base) + line.a,
        gpu_ref_ns=line.gpu_ref,
        drift=line.b,
        residual_ns=float(np.sqrt(np.mean(line.res**2))),
        n_pairs=r.n_pairs,
        n_kept=len(line.idx),
        round_trip_min_ns=float(r.rtt.min()),
        round_trip_median_ns=float(np.median(r.rtt)),
    )
    logger.info(
        "clock sync: offset %.3f us, drift %+.3f ppm, residual %.0f ns (%d of %d reads, span %.3f s, "
        "round trip min %.1f us / median %.1f us)",
        fit.offset_ns / 1e3,
        fit.drift_ppm,
        fit.residual_ns,
        fit.n_kept,
        r.n_pairs,
        span / 1e9,
        fit.round_trip_min_ns / 1e3,
        fit.round_trip_median_ns / 1e3,
    )
    return fit
