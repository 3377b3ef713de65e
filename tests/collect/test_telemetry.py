"""Clock / clock-event telemetry per run (issue 10): read before and after every run where the GPU offers it,
written to raw telemetry.parquet (in the manifest), absent where it offers none (the simulator)."""

from __future__ import annotations

import json
from typing import Any

import polars as pl

from fingrav.collect.runner import collect_scenario
from fingrav.config import GemmKernel, RunPolicy, Scenario, SimConfig
from fingrav.device.base import ClockTelemetry
from fingrav.device.sim import SimulatedGPU
from fingrav.layout import TELEMETRY_FILE
from fingrav.rawio import verify_manifest
from fingrav.testing.plans import sim_calibration


class TelemetryGPU(SimulatedGPU):
    """A simulated GPU that reports clocks and a power-violation counter like NVML does."""

    def __init__(self, *a: Any, **kw: Any) -> None:
        super().__init__(*a, **kw)
        self.reads = 0

    def read_telemetry(self) -> ClockTelemetry:
        self.reads += 1
        return ClockTelemetry(
            host_ns=self.host_time_ns(),
            read_ns=100_000,
            sm_mhz=1980.0 - self.reads,
            mem_mhz=3201.0,
            reasons=4,
            reason_names=("sw_power_cap",),
            violation={"power": 1_000 * self.reads},
            fields={"NVML_FI_DEV_POWER_INSTANT": 500_000.0},
        )


def _collect(dev: SimulatedGPU, tmp_path) -> Any:
    policy = RunPolicy(runs=4, sse_runs=2, max_runs=10, probe_ms=5, reference_ms=5)
    scen = Scenario(name="g", kernel=GemmKernel(m=1024, n=1024, k=1024))
    return collect_scenario(dev, scen, policy, sim_calibration("mi300x"), 1, tmp_path / "raw")


def test_telemetry_is_read_around_every_run_and_kept(tmp_path) -> None:
    dev = TelemetryGPU(SimConfig(preset="mi300x"), seed=1)
    _collect(dev, tmp_path)
    raw = tmp_path / "raw"
    t = pl.read_parquet(raw / TELEMETRY_FILE)
    runs = pl.read_parquet(raw / "runs.parquet")
    assert t.height == 2 * runs.height == dev.reads
    assert set(t["when"]) == {"before", "after"} and set(t["phase"]) == set(runs["phase"])
    assert t["reason_names"][0] == "sw_power_cap" and json.loads(t["violation_json"][-1]) == {"power": 1_000 * t.height}
    assert TELEMETRY_FILE in json.loads((raw / "MANIFEST.json").read_text())["files"]
    assert verify_manifest(raw)


def test_no_telemetry_file_where_the_gpu_offers_none(tmp_path) -> None:
    _collect(SimulatedGPU(SimConfig(preset="mi300x"), seed=1), tmp_path)
    assert not (tmp_path / "raw" / TELEMETRY_FILE).exists()


def test_telemetry_summary_counts_reasons_and_counter_increases(tmp_path) -> None:
    from fingrav.analysis.telemetry import telemetry_summary

    dev = TelemetryGPU(SimConfig(preset="mi300x"), seed=1)
    _collect(dev, tmp_path)
    t = pl.read_parquet(tmp_path / "raw" / TELEMETRY_FILE)
    s = telemetry_summary(t)
    assert set(s) == set(t["phase"])
    for phase, d in s.items():
        n = t.filter((pl.col("phase") == phase) & (pl.col("when") == "after")).height
        assert d.runs == n and d.runs_ending_with_reason == {"sw_power_cap": n}
        assert d.counters_during["power"] == 1_000 * n  # each run: one read before, one after (+1 each)
        assert d.counter_unit == "ns" and d.sm_mhz_after_median < 1980
