"""Throughput and efficiency with CIs (fingrav/analysis/throughput.py); through the differentiate stage:
tests/stages/test_work_columns.py."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.analysis.throughput import cycle_estimate, throughput
from fingrav.contracts.result import Estimate, Throughput
from fingrav.contracts.work import Work

WORK = Work(flop=2e12, bytes=1e9)
ENERGY = Estimate(value=400.0, ci_low=390.0, ci_high=410.0, unit="mJ")  # 400 W x 1 ms


def test_rates_efficiencies_and_their_intervals() -> None:
    reps = np.random.default_rng(0).normal(1e6, 1e4, 2000)  # cycle-time replicates (ns) around 1 ms
    t = throughput(WORK, cycle_estimate(1e6, reps, 0.95), ENERGY)
    assert t.tflop_s.value == pytest.approx(2000.0) and t.gb_s.value == pytest.approx(1000.0)
    lo_c, hi_c = np.quantile(reps, [0.025, 0.975])
    assert t.tflop_s.ci_low == pytest.approx(2e12 / hi_c / 1e3) and t.tflop_s.ci_high == pytest.approx(
        2e12 / lo_c / 1e3
    )
    assert t.tflop_s.ci_low < t.tflop_s.value < t.tflop_s.ci_high
    assert t.tflop_s.unit == "TFLOP/s" and "bootstrap" in t.tflop_s.method
    # efficiencies: flop / energy, the energy CI mapped through the (decreasing / increasing) map
    assert t.tflop_s_per_w.value == pytest.approx(2000.0 / 400.0)  # = TFLOP/s / SSP power
    assert (t.tflop_s_per_w.ci_low, t.tflop_s_per_w.ci_high) == pytest.approx((2e12 / 0.41 / 1e12, 2e12 / 0.39 / 1e12))
    assert t.energy_per_flop.value == pytest.approx(0.2)  # 0.4 J / 2e12 flop
    assert (t.energy_per_flop.ci_low, t.energy_per_flop.ci_high) == pytest.approx((0.195, 0.205))
    assert t.energy_per_byte.value == pytest.approx(400.0)  # 0.4 J / 1e9 bytes
    assert t.work_flop == 2e12 and t.work_bytes == 1e9


def test_sustained_cycle_carries_the_stamped_cycles_relative_uncertainty() -> None:
    """The uninstrumented cycle (two stamps over the whole run) gets the stamped cycle's relative CI: the rates
    over it are intervals, never a point printed as one (the old zero-width CI)."""
    reps = np.random.default_rng(1).normal(1e6, 1e4, 2000)
    c = cycle_estimate(1e6, reps, 0.95, scale_to_ns=0.9e6)
    lo_c, hi_c = np.quantile(reps, [0.025, 0.975])
    assert c.value == pytest.approx(0.9e6)
    assert (c.ci_low, c.ci_high) == pytest.approx((lo_c * 0.9, hi_c * 0.9))
    t = throughput(WORK, c, ENERGY)
    assert t.tflop_s.ci_low < t.tflop_s.value < t.tflop_s.ci_high


def test_unknown_work_and_missing_parts() -> None:
    cyc = cycle_estimate(1e6, None, 0.95)
    assert throughput(None, cyc, ENERGY) == Throughput()
    assert throughput(Work(flop=None, bytes=None, source="declared"), cyc, ENERGY) == Throughput()
    only_bytes = throughput(Work(bytes=1e9, source="declared"), cyc, ENERGY)
    assert only_bytes.tflop_s.value is None and only_bytes.tflop_s_per_w.value is None
    assert only_bytes.gb_s.value == pytest.approx(1000.0) and only_bytes.gb_s.ci_low is None  # no replicates
    no_energy = throughput(WORK, cycle_estimate(None, None, 0.95), Estimate(unit="mJ"))
    assert no_energy.tflop_s.value is None and no_energy.energy_per_flop.value is None
