"""The calibrate stage: clock synchronization and sensor characterization on any `GPUDevice`.

GPU-side module (numpy + pyarrow + stdlib).

Measurement (`calibrate`):
1. start power sampling and idle `step_off_ms` (lead-in);
2. `steps` square-wave cycles: idle `step_off_ms` plus a random extra in [0, 0.2 * step_off_ms) (so that
   the edges land at random sensor phases), then `spin(step_on_ms)` (a constant full load);
3. idle `step_off_ms` (the last falling edge settles), stop sampling;
4. `clock_bursts` bursts of `clock_reads_per_burst` GPU-clock reads, spread evenly over the whole
   calibration, each taken right after a spin (or after the lead-in / before stopping).
Idle periods are slept in slices of at most `DRAIN_EVERY_MS`, draining the samples in between.

Raw data (`raw_dir`, schemas in `fingrav.rawio`): clock.parquet (source "burst", run -1), steps.parquet
(one row per spin, GPU clock), samples.parquet (metadata: provenance, "gaps", "channels").

Analysis (`analyze_calibration`, also run by `calibrate` on the same arrays): fit the clock
(`fingrav.clocksync.fit_clock`), map the spins to host time, characterize every channel
(`fingrav.sensorfit.characterize_channels`). The result is a `fingrav.contracts.calibration.Calibration`
(calibration/gpu<k>.json): clock {ClockFit.to_dict(), "valid": residual <= max_clock_residual_us,
"max_residual_us"}, sensor {channel: SensorModel (ns)}, channels, steps {count, on_ns, off_ns}, flags, valid,
provenance.

flags: "clock_residual" (the clock fit is invalid), "sample_gaps" (the backend lost samples),
"<channel>:<flag>" for each channel flag of the sensor fit (e.g. "memory:no_response",
"total:steps_shorter_than_settle"), "<channel>:fit_failed" when a non-total channel could not be fitted.
A "total" channel that does not respond to the load raises DataError: nothing downstream can be planned.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from fingrav import rawio
from fingrav.clocksync import ClockFit, fit_clock
from fingrav.config import CalibrationConfig, config_hash
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.provenance import Provenance, parse_provenance
from fingrav.contracts.sensor import GRID_TIMING_FIELDS, GridTiming, SensorModel
from fingrav.contracts.tables import SamplesRecord
from fingrav.contracts.units import NS_PER_MS, ms
from fingrav.device.base import ClockReads, GPUDevice, PowerSamples
from fingrav.errors import DataError
from fingrav.layout import CALIBRATION_RAW_FILES
from fingrav.provenance import provenance
from fingrav.sample_grid import fit_grid
from fingrav.sensorfit import characterize_sensor

logger = logging.getLogger(__name__)

#: longest idle slice between two drains of the sampler (NVML's buffer wants a drain every <= 50 ms)
DRAIN_EVERY_MS = 40.0
#: the random extra idle before each step, as a fraction of step_off_ms
EXTRA_OFF_FRACTION = 0.2
PROGRESS_EVERY_STEPS = 10


def _burst_positions(bursts: int, steps: int) -> list[int]:
    """For each burst, the number of spins done before it (0 = after the lead-in; steps = at the end)."""
    if bursts == 1:
        return [steps // 2]
    return [int(round(x)) for x in np.linspace(0, steps, bursts)]


class _Session:
    """The measurement loop's state: samples drained so far and clock reads taken."""

    def __init__(self, device: GPUDevice, cfg: CalibrationConfig) -> None:
        self.device = device
        self.cfg = cfg
        self.samples: list[PowerSamples] = []
        self.reads: list[ClockReads] = []
        self.slice_ns = int(DRAIN_EVERY_MS * NS_PER_MS)

    def idle(self, duration_ns: int) -> None:
        """Sleep `duration_ns`, draining the sampler at least every DRAIN_EVERY_MS."""
        left = int(duration_ns)
        while left > 0:
            part = min(left, self.slice_ns)
            self.device.sleep_ns(part)
            left -= part
            self.samples.append(self.device.drain_samples())

    def burst(self) -> None:
        self.reads.append(self.device.read_gpu_clock(self.cfg.clock_reads_per_burst))


@dataclass(frozen=True)
class SquareWave:
    """The load's schedule: `steps` spins of `on_ns`, each after `off_ns` + a random `extra_ns[k]` of idle; clock
    bursts after the spins named by `positions` (`_burst_positions`)."""

    steps: int
    on_ns: int
    off_ns: int
    extra_ns: np.ndarray
    positions: list[int]

    @classmethod
    def of(cls, cfg: CalibrationConfig, rng: np.random.Generator) -> SquareWave:
        off_ns = int(round(cfg.step_off_ms * NS_PER_MS))
        return cls(
            steps=cfg.steps,
            on_ns=int(round(cfg.step_on_ms * NS_PER_MS)),
            off_ns=off_ns,
            extra_ns=rng.uniform(0.0, EXTRA_OFF_FRACTION * off_ns, cfg.steps).astype(np.int64),
            positions=_burst_positions(cfg.clock_bursts, cfg.steps),
        )

    @property
    def duration_ns(self) -> int:
        """The whole schedule, lead-in and tail idle included (ns)."""
        return self.steps * (self.on_ns + self.off_ns) + 2 * self.off_ns + int(self.extra_ns.sum())


@dataclass(frozen=True)
class SquareWaveRun:
    """What the square wave measured: each spin's GPU start / end (ns) and the host time around its spin() call
    (`brackets`, ns), the clock reads and the power samples (sorted by time, then channel)."""

    starts: np.ndarray
    ends: np.ndarray
    brackets: np.ndarray
    reads: ClockReads
    t_ns: np.ndarray
    channel: np.ndarray
    power_mw: np.ndarray
    gaps: list[list[int]]


def _run_square_wave(device: GPUDevice, cfg: CalibrationConfig, wave: SquareWave) -> SquareWaveRun:
    """Sample the power while the GPU spins the square wave, with the clock bursts in between."""
    sess = _Session(device, cfg)
    starts = np.zeros(wave.steps, np.int64)
    ends = np.zeros(wave.steps, np.int64)
    brackets = np.zeros((wave.steps, 2), np.int64)  # host time around each spin call, for a sanity check

    def bursts_at(done: int) -> None:
        for _ in range(wave.positions.count(done)):
            sess.burst()

    device.start_sampling()
    try:
        bursts_at(0)
        sess.idle(wave.off_ns)
        for k in range(wave.steps):
            sess.idle(wave.off_ns + int(wave.extra_ns[k]))
            brackets[k, 0] = device.host_time_ns()
            rec = device.spin(wave.on_ns)
            brackets[k, 1] = device.host_time_ns()
            if len(rec) == 0:
                raise DataError(f"calibration: spin {k} returned no execution record")
            starts[k], ends[k] = int(rec.gpu_start_ns.min()), int(rec.gpu_end_ns.max())
            if k + 1 < wave.steps:
                bursts_at(k + 1)
            sess.samples.append(device.drain_samples())
            if (k + 1) % PROGRESS_EVERY_STEPS == 0:
                logger.info("calibration: %d/%d steps", k + 1, wave.steps)
        sess.idle(wave.off_ns)
        bursts_at(wave.steps)
    finally:
        sess.samples.append(device.stop_sampling())
    samples = PowerSamples.concat(sess.samples)
    order = np.lexsort((samples.channel.astype(str), samples.t_ns))
    return SquareWaveRun(
        starts=starts,
        ends=ends,
        brackets=brackets,
        reads=ClockReads.concat(sess.reads),
        t_ns=samples.t_ns[order],
        channel=samples.channel[order].astype(str),
        power_mw=samples.power_mw[order],
        gaps=[[int(a), int(b)] for a, b in samples.gaps],
    )


def _write_raw(raw_dir: Path, run: SquareWaveRun, channels: list[str], meta: dict[str, Any]) -> None:
    """The calibration's raw files (clock, steps, samples parquet), each with the provenance `meta`."""
    reads = run.reads
    rawio.write_table(
        raw_dir / "clock.parquet",
        "clock",
        {
            "host_before_ns": reads.host_before_ns,
            "gpu_ns": reads.gpu_ns,
            "host_after_ns": reads.host_after_ns,
            "source": np.full(len(reads), "burst"),
            "run": np.full(len(reads), -1, np.int32),
        },
        meta,
    )
    rawio.write_table(
        raw_dir / "steps.parquet",
        "steps",
        {"step": np.arange(len(run.starts), dtype=np.int32), "gpu_start_ns": run.starts, "gpu_end_ns": run.ends},
        meta,
    )
    rawio.write_table(
        raw_dir / "samples.parquet",
        "samples",
        {"t_ns": run.t_ns, "channel": run.channel, "power_mw": run.power_mw},
        {**meta, "gaps": run.gaps, "channels": channels},
    )
    logger.info(
        "calibration: wrote %d clock reads, %d steps, %d samples to %s",
        len(reads),
        len(run.starts),
        len(run.t_ns),
        raw_dir,
    )


def calibrate(device: GPUDevice, cfg: CalibrationConfig, seed: int, raw_dir: Path | str) -> Calibration:
    """Measure (clock reads + square-wave load with power sampling), write the raw files to `raw_dir` and
    return the calibration dict (see the module docstring). Raises DataError when the data are unusable."""
    raw_dir = Path(raw_dir)
    wave = SquareWave.of(cfg, np.random.default_rng(seed))
    logger.info(
        "calibration on %s: %d steps of %.1f ms on / %.1f ms off, %d clock bursts of %d reads (~%.1f s)",
        device.backend,
        cfg.steps,
        cfg.step_on_ms,
        cfg.step_off_ms,
        cfg.clock_bursts,
        cfg.clock_reads_per_burst,
        wave.duration_ns / 1e9,
    )
    run = _run_square_wave(device, cfg, wave)
    channels = list(device.channels)
    meta = provenance(
        device.describe(),
        config_hash=config_hash(cfg),
        stage="calibrate",
        seed=seed,
        calibration=cfg.model_dump(mode="json"),
    )
    _write_raw(raw_dir, run, channels, meta.to_json())
    result = _analyze(
        run.reads, run.starts, run.ends, run.t_ns, run.channel, run.power_mw, channels, run.gaps, cfg, meta
    )
    rawio.write_manifest(raw_dir, CALIBRATION_RAW_FILES)
    _check_brackets(ClockFit.from_dict(result.clock.model_dump()), run.starts, run.ends, run.brackets)
    return result


def _check_brackets(clock: ClockFit, starts: np.ndarray, ends: np.ndarray, brackets: np.ndarray) -> None:
    """Log a warning when a mapped spin does not lie within the host time around its spin() call
    (allowing 3 x the clock residual + 1 us): a sign of a wrong clock fit. Not part of the result,
    which must be reproducible from the raw files alone."""
    slack = 3.0 * clock.residual_ns + 1_000.0
    hs, he = clock.gpu_to_host(starts), clock.gpu_to_host(ends)
    bad = (hs < brackets[:, 0] - slack) | (he > brackets[:, 1] + slack)
    if bad.any():
        worst = float(np.max(np.maximum(brackets[:, 0] - hs, he - brackets[:, 1])))
        logger.warning(
            "calibration: %d of %d mapped spins fall outside their host brackets (by up to %.1f us)",
            int(bad.sum()),
            len(bad),
            worst / 1e3,
        )


def analyze_calibration(raw_dir: Path | str, cfg: CalibrationConfig) -> Calibration:
    """Recompute the calibration from the raw files in `raw_dir` (clock, steps, samples parquet)."""
    raw_dir = Path(raw_dir)
    paths = {name: raw_dir / name for name in CALIBRATION_RAW_FILES}
    missing = [str(p) for p in paths.values() if not p.exists()]
    if missing:
        raise DataError(f"calibration raw data missing: {', '.join(missing)}")
    clock = rawio.read_table(paths["clock.parquet"])
    if "source" in clock.column_names:
        src = np.asarray(clock.column("source").to_pylist(), dtype=object)
        if (src == "burst").any():
            clock = clock.filter(pa.array(src == "burst"))
    reads = ClockReads(
        *(clock.column(c).to_numpy().astype(np.int64) for c in ("host_before_ns", "gpu_ns", "host_after_ns"))
    )
    steps = rawio.read_table(paths["steps.parquet"])
    order = np.argsort(steps.column("step").to_numpy())
    starts = steps.column("gpu_start_ns").to_numpy().astype(np.int64)[order]
    ends = steps.column("gpu_end_ns").to_numpy().astype(np.int64)[order]
    smp = rawio.read_table(paths["samples.parquet"])
    meta = rawio.read_metadata(paths["samples.parquet"])
    ch = np.asarray(smp.column("channel").to_pylist(), dtype=object).astype(str)
    record = SamplesRecord.model_validate(meta)
    channels = list(record.channels or dict.fromkeys(ch.tolist()))
    raw_meta = parse_provenance({k: v for k, v in meta.items() if k not in ("gaps", "channels", "format_version")})
    return _analyze(
        reads,
        starts,
        ends,
        smp.column("t_ns").to_numpy().astype(np.int64),
        ch,
        smp.column("power_mw").to_numpy().astype(np.float64),
        channels,
        [list(g) for g in record.gaps],
        cfg,
        raw_meta,
    )


def _fit_clock(reads: ClockReads, cfg: CalibrationConfig, flags: list[str]) -> tuple[ClockFit, bool]:
    """The GPU-to-host clock fit and whether its residual is within calibration.max_clock_residual_us (else the
    flag clock_residual)."""
    clock = fit_clock(reads)
    clock_valid = clock.residual_ns <= cfg.max_clock_residual_us * 1e3
    if not clock_valid:
        flags.append("clock_residual")
        logger.warning(
            "calibration: clock residual %.1f us exceeds %.1f us", clock.residual_ns / 1e3, cfg.max_clock_residual_us
        )
    return clock, clock_valid


def _sensor_models(
    channels: list[str],
    channel: np.ndarray,
    t_ns: np.ndarray,
    power_mw: np.ndarray,
    host_start: np.ndarray,
    host_end: np.ndarray,
    flags: list[str],
) -> dict[str, SensorModel]:
    """Each channel's sensor model from its response to the steps (host ns); "total" must respond, another
    channel that cannot be characterized gets a model that does not respond (flag <channel>:fit_failed)."""
    sensor: dict[str, SensorModel] = {}
    for name in channels:
        m = channel == name
        try:
            char = characterize_sensor(t_ns[m], power_mw[m], host_start, host_end, name)
        except DataError as err:
            if name == "total":
                raise
            logger.warning("calibration: channel %s not characterized: %s", name, err)
            sensor[name] = SensorModel(channel=name, responds=False, error=str(err), flags=["fit_failed"])
            flags.append(f"{name}:fit_failed")
            continue
        if name == "total" and not char.responds:
            raise DataError(
                "calibration: the 'total' power channel does not respond to the load steps "
                f"(period {char.period_ms:.2f} ms, {char.n_samples} samples)"
            )
        model = SensorModel.from_ms_record(char.to_dict())
        if name == "total":
            model = model.model_copy(update={"grid": grid_timing(t_ns[m], power_mw[m], host_start, host_end, model)})
        sensor[name] = model
        flags.extend(f"{name}:{f}" for f in char.flags)
    return sensor


def grid_timing(
    t_ns: np.ndarray, power_mw: np.ndarray, host_start: np.ndarray, host_end: np.ndarray, stamped: SensorModel
) -> GridTiming | None:
    """The sensor model fitted on the samples' grid times (`fingrav.sample_grid`; samples that cannot be placed
    left out), where the stamps put some samples late and the grid times fit the steps better than the stamps
    (`stamped`: the model fitted on the stamps); else None (no grid, no late stamp, or the stamps fit better: a
    sensor that really samples late)."""
    times = fit_grid(t_ns)
    if times.grid is None or not times.grid.corrects:
        return None
    keep = times.placed
    try:
        char = characterize_sensor(
            np.round(times.t_ns[keep]).astype(np.int64), power_mw[keep], host_start, host_end, "total"
        )
    except DataError as err:
        logger.info("calibration: no sensor model on the grid times (%s)", err)
        return None
    fitted = SensorModel.from_ms_record(char.to_dict())
    g = times.grid
    if not char.responds or fitted.fit_rms_mw is None or stamped.fit_rms_mw is None:
        return None
    logger.info(
        "calibration: the total sensor samples every %.3f ms and stamps %.1f %% of its samples late (p50 %.2f ms, "
        "%.2f %% not placeable); on the grid times the step fit leaves %.2f W rms against %.2f W on the stamps%s",
        g.period_ns / 1e6,
        100 * g.late_share,
        (g.late_p50_ns or 0.0) / 1e6,
        100 * g.unplaced_share,
        fitted.fit_rms_mw / 1e3,
        stamped.fit_rms_mw / 1e3,
        "" if fitted.fit_rms_mw < stamped.fit_rms_mw else ": the stamps are kept",
    )
    if fitted.fit_rms_mw >= stamped.fit_rms_mw:
        return None
    return GridTiming(
        period_ns=g.period_ns,
        on_time_share=g.on_time_share,
        late_share=g.late_share,
        unplaced_share=g.unplaced_share,
        late_p50_ns=g.late_p50_ns,
        stamped_fit_rms_mw=stamped.fit_rms_mw,
        **{f: getattr(fitted, f) for f in GRID_TIMING_FIELDS},
    )


def _log_calibration(c: Calibration, clock: ClockFit) -> None:
    t = c.sensor["total"]
    logger.info(
        "calibration: clock offset %.3f us, drift %+.2f ppm, residual %.2f us (%s); total sensor: period "
        "%.2f ms, delay %.2f ms, window %.2f ms, lag %.2f ms, settle %.1f ms; flags %s",
        clock.offset_ns / 1e3,
        clock.drift_ppm,
        clock.residual_ns / 1e3,
        "valid" if c.valid else "INVALID",
        ms(t.period_ns),
        ms(t.delay_ns),
        ms(t.window_ns),
        ms(t.lag_ns),
        ms(t.settle_ns),
        c.flags or "none",
    )


def _analyze(
    reads: ClockReads,
    gpu_start_ns: np.ndarray,
    gpu_end_ns: np.ndarray,
    t_ns: np.ndarray,
    channel: np.ndarray,
    power_mw: np.ndarray,
    channels: list[str],
    gaps: list[list[int]],
    cfg: CalibrationConfig,
    raw_meta: Provenance,
) -> Calibration:
    """The calibration from in-memory raw data (shared by `calibrate` and `analyze_calibration`): the clock fit,
    then each channel's sensor model from the steps mapped to the host clock."""
    flags: list[str] = []
    clock, clock_valid = _fit_clock(reads, cfg, flags)
    if gaps:
        flags.append("sample_gaps")
        logger.warning("calibration: the backend reported %d sample gaps", len(gaps))
    host_start, host_end = clock.gpu_to_host(gpu_start_ns), clock.gpu_to_host(gpu_end_ns)
    channels = sorted(channels, key=lambda c: c != "total")  # "total" first, others in their order
    if "total" not in channels:
        raise DataError(f"calibration: no 'total' channel among {channels}")
    sensor = _sensor_models(channels, channel, t_ns, power_mw, host_start, host_end, flags)
    on = gpu_end_ns - gpu_start_ns
    off = gpu_start_ns[1:] - gpu_end_ns[:-1]
    result = Calibration(
        clock={**clock.to_dict(), "valid": bool(clock_valid), "max_residual_us": cfg.max_clock_residual_us},
        sensor=sensor,
        channels=channels,
        steps={
            "count": len(gpu_start_ns),
            "on_ns": float(np.median(on)),
            "off_ns": float(np.median(off)) if len(off) else None,
        },
        flags=flags,
        valid=bool(clock_valid),
        provenance=provenance(
            raw_meta.device,
            config_hash=config_hash(cfg),
            stage="calibrate",
            raw=Provenance.model_validate({k: v for k, v in raw_meta.to_json().items() if k != "device"}),
        ),
    )
    _log_calibration(result, clock)
    return result
