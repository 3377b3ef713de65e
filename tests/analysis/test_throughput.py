"""Throughput and efficiency with CIs (fingrav/analysis/throughput.py); through the differentiate stage:
tests/stages/test_work_columns.py."""

from __future__ import annotations

import numpy as np
import pytest

from fingrav.analysis.throughput import row_columns, throughput
from fingrav.contracts.summary import THROUGHPUT
from fingrav.contracts.work import Work

WORK = Work(flop=2e12, bytes=1e9)
ENERGY = {"value": 400.0, "ci_low": 390.0, "ci_high": 410.0}  # mJ: 400 W x 1 ms


def test_rates_efficiencies_and_their_intervals() -> None:
    reps = np.random.default_rng(0).normal(1e6, 1e4, 2000)  # cycle-time replicates (ns) around 1 ms
    t = throughput(WORK, 1e6, reps, ENERGY, 0.95)
    assert t.tflop_s.value == pytest.approx(2000.0) and t.gb_s.value == pytest.approx(1000.0)
    lo_c, hi_c = np.quantile(reps, [0.025, 0.975])
    assert t.tflop_s.ci_low == pytest.approx(2e12 / hi_c / 1e3) and t.tflop_s.ci_high == pytest.approx(
        2e12 / lo_c / 1e3
    )
    assert t.tflop_s.ci_low < t.tflop_s.value < t.tflop_s.ci_high
    # efficiencies: flop / energy, the energy CI mapped through the (decreasing / increasing) map
    assert t.tflop_s_per_w.value == pytest.approx(2000.0 / 400.0)  # = TFLOP/s / SSP power
    assert (t.tflop_s_per_w.ci_low, t.tflop_s_per_w.ci_high) == pytest.approx((2e12 / 0.41 / 1e12, 2e12 / 0.39 / 1e12))
    assert t.energy_per_flop_pj.value == pytest.approx(0.2)  # 0.4 J / 2e12 flop
    assert (t.energy_per_flop_pj.ci_low, t.energy_per_flop_pj.ci_high) == pytest.approx((0.195, 0.205))
    assert t.energy_per_byte_pj.value == pytest.approx(400.0)  # 0.4 J / 1e9 bytes
    assert t.time_basis == "ssp_cycle" and "bootstrap" in t.ci_method


def test_unknown_work_and_missing_parts() -> None:
    assert throughput(None, 1e6, None, ENERGY, 0.95) is None
    assert throughput(Work(flop=None, bytes=None, source="declared"), 1e6, None, ENERGY, 0.95) is None
    only_bytes = throughput(Work(bytes=1e9, source="declared"), 1e6, None, ENERGY, 0.95)
    assert only_bytes.tflop_s.value is None and only_bytes.tflop_s_per_w.value is None
    assert only_bytes.gb_s.value == pytest.approx(1000.0) and only_bytes.gb_s.ci_low is None  # no replicates
    no_energy = throughput(WORK, None, None, {"value": None, "ci_low": None, "ci_high": None}, 0.95)
    assert no_energy.tflop_s.value is None and no_energy.energy_per_flop_pj.value is None
    cols = row_columns(None, None)
    assert tuple(cols) == THROUGHPUT and all(v is None for v in cols.values())
