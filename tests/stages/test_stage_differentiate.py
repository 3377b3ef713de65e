"""Stage differentiate (fingrav/stages/differentiate.py): the scenario's clock map (its own reads, bursts alone
where they span the scenario, else the calibration's) and its sensors (the calibration's, the total channel's
unknown timing filled from the plan)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fingrav.contracts.calibration import Calibration
from fingrav.contracts.sensor import SensorModel
from fingrav.stages.differentiate import scenario_clock, scenario_sensors
from fingrav.testing.synthetic import SynthSpec, generate

OFFSET_NS, DRIFT = 123_456_789, 20e-6
CALIBRATION = Calibration(
    clock={"offset_ns": 5.0, "gpu_ref_ns": 0, "drift": 0.0, "residual_ns": 50.0},
    sensor={"total": SensorModel(period_ns=1e6, delay_ns=None, window_ns=None, lag_ns=None, settle_ns=None),
            "memory": SensorModel(channel="memory", period_ns=1e8)},
    channels=["total", "memory"],
    steps={},
)  # fmt: skip


def _reads(host_ns: np.ndarray, source: str, slow_ns: int = 0) -> pl.DataFrame:
    """Bracketed reads of a GPU clock = host - OFFSET_NS, drifting by DRIFT; `slow_ns` makes the bracket's end
    late by 4 x slow_ns and the GPU read by slow_ns (an asymmetric slow read after idle: the bracket's midpoint
    is biased by slow_ns)."""
    rt = 20_000
    gpu = ((host_ns + rt // 2 + slow_ns - OFFSET_NS) * (1 - DRIFT)).astype(np.int64)
    return pl.DataFrame({"host_before_ns": host_ns, "gpu_ns": gpu, "host_after_ns": host_ns + rt + 4 * slow_ns,
                         "source": [source] * host_ns.size})  # fmt: skip


def test_the_scenario_clock_fits_its_bursts_when_they_span_it() -> None:
    """Bursts at both ends span the scenario: the run reads (slow, asymmetric) are left out of the fit, so their
    bias does not move the map."""
    t0 = 10_000_000_000
    bursts = np.concatenate([t0 + np.arange(50) * 30_000, t0 + 5_000_000_000 + np.arange(50) * 30_000])
    runs = t0 + np.linspace(1e8, 4.9e9, 40).astype(np.int64)
    reads = pl.concat([_reads(bursts, "burst"), _reads(runs, "run", slow_ns=60_000)])
    cmap, source = scenario_clock(reads, CALIBRATION)
    assert source == "scenario"
    gpu = (t0 + 2_500_000_000 - OFFSET_NS) * (1 - DRIFT)
    assert cmap.to_host_ns(np.array([gpu]))[0] == pytest.approx(t0 + 2_500_000_000, abs=200)
    runs_only, source = scenario_clock(reads.filter(pl.col("source") == "run"), CALIBRATION)
    assert source == "scenario"  # without bursts the run reads are fitted, and their bias moves the map
    assert runs_only.to_host_ns(np.array([gpu]))[0] - (t0 + 2_500_000_000) == pytest.approx(60_000, abs=2_000)


def test_no_reads_or_a_failed_fit_take_the_calibration_clock() -> None:
    empty = _reads(np.array([], np.int64), "burst")
    assert scenario_clock(empty, CALIBRATION) == (CALIBRATION.clock_map, "calibration")
    one = _reads(np.array([10_000_000_000]), "burst")  # too few reads to fit
    assert scenario_clock(one, CALIBRATION) == (CALIBRATION.clock_map, "calibration")


def test_the_total_sensor_takes_the_plans_timing_where_calibration_did_not_identify_it() -> None:
    plan = generate(SynthSpec())["plan"]
    sensors = scenario_sensors(CALIBRATION, plan)
    assert list(sensors) == ["total", "memory"] and sensors["memory"] == CALIBRATION.sensor["memory"]
    total = sensors["total"]
    assert total.period_ns == 1e6  # calibrated: kept
    assert (total.delay_ns, total.window_ns, total.lag_ns, total.settle_ns) == (
        plan.sensor.delay_ns, plan.sensor.window_ns, plan.sensor.lag_ns, plan.sensor.settle_ns)  # fmt: skip
