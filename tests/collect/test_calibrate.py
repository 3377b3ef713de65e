"""calibrate() end to end on a tiny fake GPUDevice with virtual time and a simple boxcar sensor."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fingrav import rawio
from fingrav.clocksync import ClockFit
from fingrav.collect.calibrate import analyze_calibration, calibrate
from fingrav.config import CalibrationConfig
from fingrav.contracts.calibration import Calibration
from fingrav.contracts.sensor import SensorModel
from fingrav.device.base import ClockReads, ExecRecords, GPUDevice, KernelHandle, PowerSamples
from fingrav.errors import DataError
from fingrav.layout import CALIBRATION_RAW_FILES

HOST0 = 1_764_400_000_000_000_000
GPU0 = 5_000_000_000  # the GPU clock counts from its own epoch
MS = 1_000_000


class FakeGPU(GPUDevice):
    """Virtual host clock; GPU clock host = gpu + offset + drift * (gpu - GPU0) (+ HOST0 - GPU0);
    a "total" channel that averages the load over [t - delay - window, t - delay] (boxcar, no lag) and
    a "memory" channel that ignores it. Samples every `period` ms with jitter, noise, 1 W steps."""

    backend = "fake"

    def __init__(
        self,
        offset_ns: float = 250_000.0,
        drift_ppm: float = 30.0,
        period_ms: float = 1.0,
        delay_ms: float = 0.3,
        window_ms: float = 1.0,
        step_mw: float = 200_000.0,
        seed: int = 0,
    ) -> None:
        self.now = HOST0
        self.offset = float(offset_ns) + (HOST0 - GPU0)
        self.drift = drift_ppm * 1e-6
        self.period, self.delay, self.window = period_ms * 1e6, delay_ms * 1e6, window_ms * 1e6
        self.step_mw = step_mw
        self.rng = np.random.default_rng(seed)
        self.on: list[tuple[int, int]] = []
        self.next_sample: float | None = None

    @property
    def channels(self) -> tuple[str, ...]:
        return ("total", "memory")

    def describe(self) -> dict[str, Any]:
        return {"name": "fake gpu", "backend": self.backend}

    def host_time_ns(self) -> int:
        return self.now

    def sleep_ns(self, duration_ns: int) -> None:
        self.now += int(duration_ns)

    def _gpu(self, host: int) -> int:
        return GPU0 + int(round((host - GPU0 - self.offset) / (1.0 + self.drift)))

    def read_gpu_clock(self, n: int) -> ClockReads:
        hb, g, ha = [], [], []
        for _ in range(n):
            hb.append(self.now)
            self.now += int(4_000 + self.rng.pareto(1.5) * 1_500)
            g.append(self._gpu(self.now))
            self.now += int(4_000 + self.rng.pareto(1.5) * 1_500)
            ha.append(self.now)
        return ClockReads(*(np.array(v, dtype=np.int64) for v in (hb, g, ha)))

    def prepare(self, kernel: Any) -> KernelHandle:
        raise NotImplementedError

    def execute(self, segments: Sequence[tuple[KernelHandle, int]]) -> ExecRecords:
        raise NotImplementedError

    def spin(self, duration_ns: int) -> ExecRecords:
        self.now += 6_000  # launch
        start = self.now
        self.now += int(duration_ns * (1.0 + self.drift))  # duration is GPU time
        self.on.append((start, self.now))
        rec = ExecRecords(
            np.zeros(1, np.int32),
            np.zeros(1, np.int32),
            np.array([self._gpu(start)], np.int64),
            np.array([self._gpu(self.now)], np.int64),
        )
        self.now += 8_000  # synchronize
        return rec

    def start_sampling(self) -> None:
        self.next_sample = self.now + self.rng.uniform(0, self.period)

    def drain_samples(self) -> PowerSamples:
        if self.next_sample is None:
            return PowerSamples.empty()
        ts = []
        while self.next_sample <= self.now:
            ts.append(self.next_sample)
            self.next_sample += self.period * self.rng.uniform(0.95, 1.05)
        t = np.array(ts)
        hi = t - self.delay
        lo = hi - self.window
        busy = np.zeros(len(t))
        for a, b in self.on:
            busy += np.clip(np.minimum(hi, b) - np.maximum(lo, a), 0.0, None)
        total = 120_000.0 + self.step_mw * busy / self.window + self.rng.normal(0, 1_000.0, len(t))
        memory = 40_500.0 + self.rng.normal(0, 300.0, len(t))
        t_ns = np.floor(t).astype(np.int64)
        return PowerSamples(
            np.concatenate([t_ns, t_ns]),
            np.array(["total"] * len(t) + ["memory"] * len(t), dtype=object),
            np.round(np.concatenate([total, memory]) / 1_000.0) * 1_000.0,
        )

    def stop_sampling(self) -> PowerSamples:
        out = self.drain_samples()
        self.next_sample = None
        return out


CFG = CalibrationConfig(clock_bursts=6, clock_reads_per_burst=30, steps=12, step_on_ms=30.0, step_off_ms=30.0)


def test_calibrate_end_to_end(tmp_path: Path) -> None:
    dev = FakeGPU(offset_ns=250_000.0, drift_ppm=30.0, seed=1)
    result = calibrate(dev, CFG, seed=4, raw_dir=tmp_path)
    assert isinstance(result, Calibration)
    # JSON-able as is, and calibration/gpu<k>.json reads back into the same model
    assert Calibration.model_validate_json(json.dumps(result.model_dump(mode="json"))) == result
    assert Calibration.model_validate(json.loads(rawio.dumps(result))) == result

    clock = result.clock
    true_offset = dev.offset + dev.drift * (clock.gpu_ref_ns - GPU0)
    assert abs(clock.offset_ns - true_offset) < 1_000
    assert clock.drift_ppm == pytest.approx(30.0, abs=1.0)
    assert clock.valid and result.valid
    assert clock.n_pairs == 6 * 30

    assert result.channels == ["total", "memory"]
    assert list(result.sensor) == ["total", "memory"]
    tot = result.sensor["total"]
    assert isinstance(tot, SensorModel) and tot is result.total and tot.channel == "total"
    assert tot.responds
    # the sensor model is in ns
    assert tot.period_ns == pytest.approx(1.0 * MS, abs=0.05 * MS)
    assert tot.delay_ns == pytest.approx(0.3 * MS, abs=0.1 * MS)
    assert tot.window_ns == pytest.approx(1.0 * MS, abs=0.15 * MS)
    assert tot.lag_ns < 0.1 * MS
    assert tot.settle_ns == pytest.approx(1.29 * MS, abs=0.15 * MS)
    assert tot.step_mw == pytest.approx(200_000.0, rel=0.01)
    assert tot.quantization_mw == pytest.approx(1_000.0)
    assert not result.sensor["memory"].responds
    assert result.flags == ["memory:no_response"]
    assert result.steps.count == 12
    assert result.steps.on_ns == pytest.approx(30.0 * MS, abs=0.01 * MS)

    # raw files with schemas and provenance
    for name in CALIBRATION_RAW_FILES:
        meta = rawio.read_provenance(tmp_path / name)
        assert meta.device.name == "fake gpu" and meta.stage == "calibrate" and meta.seed == 4
        kind = name.removesuffix(".parquet")
        assert rawio.read_table(tmp_path / name).schema.remove_metadata() == rawio.SCHEMAS[kind]
    assert rawio.read_metadata(tmp_path / "samples.parquet")["channels"] == ["total", "memory"]
    assert rawio.read_table(tmp_path / "steps.parquet").num_rows == 12
    assert result.provenance.device.name == "fake gpu"

    # the spins happened where the calibration says (host clock) and the edges are at random phases
    host = np.array(dev.on)
    steps = rawio.read_table(tmp_path / "steps.parquet")
    fit = ClockFit.from_dict(clock.model_dump())
    mapped = fit.gpu_to_host(steps.column("gpu_start_ns").to_numpy())
    assert np.max(np.abs(mapped - host[:, 0])) < 2_000
    assert np.std(np.diff(host[:, 0])) > 0.5e6

    # replay: the same calibration from the raw files alone (up to creation time)
    again = analyze_calibration(tmp_path, CFG)
    assert isinstance(again, Calibration)

    def strip(c: Calibration) -> dict[str, Any]:
        d = c.model_dump(mode="json")
        return {**d, "provenance": {k: v for k, v in d["provenance"].items() if k != "created_utc"}}

    replayed, live = json.loads(rawio.dumps(strip(again))), json.loads(rawio.dumps(strip(result)))
    assert {k: v for k, v in replayed.items() if k != "provenance"} == {
        k: v for k, v in live.items() if k != "provenance"
    }
    assert replayed["provenance"] == live["provenance"]


def test_invalid_clock_is_flagged(tmp_path: Path) -> None:
    cfg = CFG.model_copy(update={"max_clock_residual_us": 1e-4})
    result = calibrate(FakeGPU(seed=2), cfg, seed=0, raw_dir=tmp_path)
    assert not result.clock.valid and not result.valid
    assert "clock_residual" in result.flags


def test_slow_sensor_and_missing_raw(tmp_path: Path) -> None:
    dev = FakeGPU(period_ms=5.0, delay_ms=2.0, window_ms=10.0, seed=3)
    cfg = CFG.model_copy(update={"steps": 10, "step_on_ms": 60.0, "step_off_ms": 60.0})
    tot = calibrate(dev, cfg, seed=1, raw_dir=tmp_path).total
    assert tot.delay_ns == pytest.approx(2.0 * MS, abs=0.6 * MS)
    assert tot.window_ns == pytest.approx(10.0 * MS, abs=1.0 * MS)
    with pytest.raises(DataError):
        analyze_calibration(tmp_path / "nothing", cfg)


def test_total_without_response_raises(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not respond"):
        calibrate(FakeGPU(step_mw=0.0, seed=5), CFG, seed=0, raw_dir=tmp_path)
    assert (tmp_path / "samples.parquet").exists()  # the raw data are kept for inspection


def test_calibrate_on_simulated_h200(tmp_path: Path) -> None:
    """The other backends' simulator: the measured clock and sensor match the preset's truth."""
    from fingrav.config import SimConfig
    from fingrav.device.sim import SimulatedGPU

    dev = SimulatedGPU(SimConfig(preset="h200"), seed=3)
    p = dev.preset
    result = calibrate(dev, CalibrationConfig(steps=30), seed=3, raw_dir=tmp_path)
    assert result.valid and result.flags == []

    # sim: gpu = host0 + x + offset + drift * x for host time host0 + x
    fit = ClockFit.from_dict(result.clock.model_dump())
    host0 = dev.describe()["host_epoch_ns"]
    g = fit.gpu_ref_ns + np.array([-6e9, 0, 6e9]).astype(np.int64)
    truth = host0 + np.rint((g - host0 - p.clock_offset_ns) / (1.0 + p.clock_drift)).astype(np.int64)
    assert np.max(np.abs(fit.gpu_to_host(g) - truth)) < 1_000
    assert fit.drift_ppm == pytest.approx(-p.clock_drift * 1e6, abs=0.5)

    # the clock mapping of the contracts agrees with the fit
    cmap = result.clock_map
    assert np.max(np.abs(cmap.to_host_ns(g) - fit.gpu_to_host(g))) <= 1

    tot, mem = result.sensor["total"], result.sensor["memory"]
    spec = p.sensors[0]
    assert tot.period_ns == pytest.approx(spec.period_ns, abs=1.0 * MS)
    assert tot.delay_ns == pytest.approx(spec.delay_ns, abs=1.0 * MS)
    assert tot.window_ns == pytest.approx(spec.window_ns, abs=1.5 * MS)
    assert tot.lag_ns == pytest.approx(spec.lag_ns, abs=1.0 * MS)
    assert tot.settle_ns == pytest.approx(60.0 * MS, abs=3.0 * MS)
    # the memory stream (100 ms samples of a 100 ms average, 2.5 W step) pins down the group delay
    # (5 + 100 / 2 ms) better than how it splits into delay / window / lag
    mspec = p.sensors[1]
    assert mem.responds and mem.period_ns == pytest.approx(mspec.period_ns, abs=5.0 * MS)
    true_gd = mspec.delay_ns + mspec.window_ns / 2 + mspec.lag_ns
    assert mem.group_delay_ns == pytest.approx(true_gd, abs=4 * mem.group_delay_se_ns)


@pytest.mark.parametrize("late", [True, False])
def test_calibration_finds_the_sensors_grid_where_stamps_are_late(tmp_path: Path, late: bool) -> None:
    """The h200 preset stamps one sample in five ~2.8 ms late (as the card does): the calibration finds the grid and
    the sensor model fitted on the grid times is nearer the preset's truth and fits better; with every stamp on time
    there is nothing to correct and no grid timing."""
    from fingrav.config import SimConfig, SimOverrides
    from fingrav.device.sim import SimulatedGPU

    ov = SimOverrides() if late else SimOverrides(sensor_late_every=0, sensor_late_far_share=0.0)
    dev = SimulatedGPU(SimConfig(preset="h200", overrides=ov), seed=5)
    spec = dev.preset.sensors[0]
    result = calibrate(dev, CalibrationConfig(steps=40), seed=5, raw_dir=tmp_path)
    tot = result.sensor["total"]
    if not late:
        assert tot.grid is None and tot.on_grid() is tot
        return
    g = tot.grid
    assert g is not None
    assert g.late_share == pytest.approx(1 / spec.late_every, abs=0.05)
    assert g.late_p50_ns == pytest.approx(spec.late_ns, rel=0.3)
    assert g.period_ns == pytest.approx(spec.period_ns, rel=1e-3)
    assert g.fit_rms_mw is not None and tot.fit_rms_mw is not None and g.fit_rms_mw < tot.fit_rms_mw
    truth_group = spec.delay_ns + spec.window_ns / 2 + spec.lag_ns
    grid_model = tot.on_grid()
    assert abs(grid_model.group_delay_ns - truth_group) < abs(tot.group_delay_ns - truth_group)
    assert grid_model.group_delay_ns == pytest.approx(truth_group, abs=0.5 * MS)
