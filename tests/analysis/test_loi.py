"""LOI/TOI mapping: clock offset and drift, delay correction, roles, samples outside executions."""

from __future__ import annotations

import polars as pl
import pytest

from fingrav.analysis.binning import bin_runs
from fingrav.analysis.differentiate import differentiate
from fingrav.analysis.loi import LOIS_SCHEMA, assign_lois, host_executions, lois_frame
from fingrav.config import AnalysisConfig
from fingrav.contracts.clock import ClockMap
from fingrav.contracts.plan import Plan
from fingrav.contracts.sensor import SensorModel
from fingrav.testing.plans import make_plan
from fingrav.testing.synthetic import SynthSpec, generate

OFFSET = 1_234_567
DRIFT = 100e-6  # 100 ppm
GPU_REF = 5_000_000_000
CLOCK = ClockMap(offset_ns=OFFSET, gpu_ref_ns=GPU_REF, drift=DRIFT, residual_ns=50.0)


PLAN_FIELDS = {"ssp_index": 2, "sse_index": 1, "warmups": 1, "executions_per_run": 3, "tail": 1, "predecessor_count": 0}
PLAN = make_plan(**PLAN_FIELDS)
EX_SCHEMA = {
    "run": pl.Int32,
    "segment": pl.String,
    "exec_index": pl.Int32,
    "gpu_start_ns": pl.Int64,
    "gpu_end_ns": pl.Int64,
}


def to_host(g: int) -> int:
    return g + OFFSET + round(DRIFT * (g - GPU_REF))


def frames(plan: Plan = PLAN, pred: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """Run 0 (an SSP run) and run 1 (timing): `pred` predecessor executions then 3 main executions of
    100 us (GPU clock) back to back, run 0 starting 10 ms after GPU_REF."""
    rows = []
    for run, g0 in ((0, GPU_REF + 10_000_000), (1, GPU_REF + 50_000_000)):
        g = g0
        for seg, n in (("pred", pred), ("main", plan.executions_per_run)):
            for i in range(n):
                rows.append((run, seg, i, g, g + 100_000))
                g += 100_000
    ex = pl.DataFrame(rows, schema=EX_SCHEMA, orient="row")
    runs = pl.DataFrame({"run": [0, 1], "phase": ["ssp", "timing"]}, schema={"run": pl.Int32, "phase": pl.String})
    binned = pl.DataFrame({"run": [0], "golden": [True]}, schema={"run": pl.Int32, "golden": pl.Boolean})
    return ex, runs, binned


def samples_at(ts: list[int], power: float = 1000.0) -> pl.DataFrame:
    return pl.DataFrame(
        {"t_ns": ts, "channel": ["total"] * len(ts), "power_mw": [power] * len(ts)},
        schema={"t_ns": pl.Int64, "channel": pl.String, "power_mw": pl.Float64},
    )


def test_clock_mapping_exact():
    ex, runs, binned = frames()
    hx = host_executions(ex, runs, PLAN, CLOCK, binned)
    assert hx.height == 3  # the timing run is not mapped
    g = ex.filter(pl.col("run") == 0)
    assert hx["exec_start_ns"].to_list() == [to_host(v) for v in g["gpu_start_ns"]]
    assert hx["exec_end_ns"].to_list() == [to_host(v) for v in g["gpu_end_ns"]]
    assert hx["dur_ns"].to_list() == [100_010] * 3  # 100 us stretched by 100 ppm
    assert hx["role"].cast(pl.String).to_list() == ["warmup", "sse", "ssp"]
    assert hx["golden"].to_list() == [True] * 3


def test_clock_map_accepts_ppm_and_objects():
    cp = ClockMap.from_record({"offset_ns": 1.5, "gpu_ref_ns": 0, "drift_ppm": 3.0})
    assert cp.drift == pytest.approx(3e-6) and cp.to_summary()["drift_ppm"] == pytest.approx(3.0)

    class Fit:
        offset_ns, gpu_ref_ns, drift, residual_ns = 10.0, 5, 0.0, 1.0

    assert ClockMap.from_record(Fit()).offset_ns == 10.0


def test_epoch_sized_clock_keeps_ns_precision():
    big = 1_700_000_000_000_000_123
    cp = ClockMap.from_record({"offset_ns": -163_000, "gpu_ref_ns": big, "drift": 2e-6})
    out = pl.DataFrame({"g": [big, big + 1_000_000_000]}).select(cp.host_expr("g"))["g"].to_list()
    assert out == [big - 163_000, big + 1_000_000_000 - 163_000 + 2000]


def test_planted_samples_exact_toi():
    ex, runs, binned = frames()
    g0 = GPU_REF + 10_000_000
    s1 = to_host(g0 + 100_000)  # start of exec 1 (sse)
    planted = [
        to_host(g0) + 0,  # exec 0 at its very start
        s1 + 50_005,  # exec 1, half way (duration 100_010)
        s1 + 100_010,  # = start of exec 2 -> exec 2, toi 0
        to_host(g0) - 1,  # before the run: not a LOI
        to_host(g0 + 300_000),  # end of the last exec: not a LOI
        to_host(GPU_REF + 50_000_000) + 10,  # inside the timing run: not a LOI
    ]
    lois = lois_frame(ex, runs, samples_at(planted), PLAN, binned, CLOCK)
    assert lois.schema == pl.Schema(LOIS_SCHEMA)
    assert lois["exec_index"].to_list() == [0, 1, 2]
    assert lois["role"].to_list() == ["warmup", "sse", "ssp"]
    assert lois["toi_ns"].to_list() == [0, 50_005, 0]
    assert lois["toi_frac"].to_list() == [0.0, 0.5, 0.0]
    assert lois["exec_start_ns"].to_list() == [to_host(g0), s1, s1 + 100_010]
    assert lois["segment"].to_list() == ["main"] * 3
    assert lois["golden"].to_list() == [True] * 3


def test_delay_correction_shifts_samples_back():
    ex, runs, binned = frames()
    s1 = to_host(GPU_REF + 10_100_000)
    delay = 30_000
    smp = samples_at([s1 + 20_000 + delay])  # power at s1 + 20 us reported 30 us later
    hx = host_executions(ex, runs, PLAN, CLOCK, binned)
    corrected = assign_lois(smp, hx, delay_ns=delay)
    assert corrected["exec_index"].to_list() == [1] and corrected["toi_ns"].to_list() == [20_000]
    assert corrected["t_ns"].to_list() == [s1 + 20_000]
    raw = assign_lois(smp, hx, delay_ns=0)
    assert raw["toi_ns"].to_list() == [50_000]
    # per-channel delays: memory samples shifted by their own delay
    mem = smp.with_columns(channel=pl.lit("memory"), t_ns=pl.col("t_ns") + 70_000)
    both = assign_lois(pl.concat([smp, mem]), hx, delay_ns={"total": delay, "memory": delay + 70_000})
    assert both.sort("channel")["toi_ns"].to_list() == [20_000, 20_000]


def test_roles_with_predecessor_and_sse_equal_ssp():
    plan = make_plan(**{**PLAN_FIELDS, "predecessor_count": 2, "sse_index": 0, "ssp_index": 0, "warmups": 0, "tail": 3})
    ex, runs, binned = frames(plan, pred=2)
    hx = host_executions(ex, runs, plan, CLOCK, binned)
    assert hx["role"].cast(pl.String).to_list() == ["pred", "pred", "ssp", "ssp", "ssp"]
    plan = make_plan(**{**PLAN_FIELDS, "predecessor_count": 2, "sse_index": 1, "ssp_index": 2, "warmups": 1})
    hx = host_executions(ex, runs, plan, CLOCK, binned)
    assert hx["role"].cast(pl.String).to_list() == ["pred", "pred", "first", "sse", "ssp"]
    assert hx["segment"].cast(pl.String).to_list() == ["pred", "pred", "main", "main", "main"]
    plan = make_plan(**{**PLAN_FIELDS, "sse_index": 0, "ssp_index": 1, "warmups": 0, "tail": 1, "trailing": 1})
    hx = host_executions(ex, runs, plan, CLOCK, binned)
    assert hx["role"].cast(pl.String).to_list() == ["pred", "pred", "sse", "ssp", "trail"]


def test_runs_not_golden_are_marked():
    ex, runs, _ = frames()
    binned = pl.DataFrame({"run": [0], "golden": [False]}, schema={"run": pl.Int32, "golden": pl.Boolean})
    s1 = to_host(GPU_REF + 10_100_000)
    lois = lois_frame(ex, runs, samples_at([s1 + 5]), PLAN, binned, CLOCK)
    assert lois["golden"].to_list() == [False]


def test_sensor_normalization():
    """Sensor records in ms become ns; differentiate shifts each channel's samples by its own sensor's delay
    (channels without a sensor: the total channel's)."""
    total = SensorModel.from_ms_record({"delay_ms": 2.5, "window_ms": 4.5})
    assert total.delay_ns == 2_500_000 and total.window_ns == 4_500_000
    memory = SensorModel.from_ms_record({"channel": "memory", "delay_ns": 7})
    assert memory.delay_ns == 7
    d = generate(SynthSpec(runs=5, sse_runs=0))
    raw = set(d["samples"]["t_ns"].to_list())

    def run(sensors: dict[str, SensorModel]) -> tuple[pl.DataFrame, dict]:
        binned, _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
        lois, summary = differentiate(
            d["executions"],
            d["runs"],
            d["samples"],
            d["plan"],
            binned,
            d["clock_fit"],
            sensors,
            AnalysisConfig(bootstrap_reps=100),
            max_clock_residual_us=20.0,
        )
        return lois, {
            **summary.model_dump(),
            "row": summary.result.flat(),
            "flags": summary.flags,
            "valid": summary.valid,
        }

    lois, s = run({"total": total, "memory": memory})
    assert s["sensor"]["delay_correction_ns"] == 2_500_000
    assert s["sensor"]["delay_correction_by_channel_ns"] == {"total": 2_500_000, "memory": 7}
    for ch, delay in (("total", 2_500_000), ("memory", 7)):
        t = lois.filter(pl.col("channel") == ch)["t_ns"]
        assert t.len() > 0 and set((t + delay).to_list()) <= raw, ch
    lois, s = run({"total": SensorModel(delay_ns=12)})
    assert s["sensor"]["delay_correction_ns"] == 12 and s["sensor"]["delay_correction_by_channel_ns"] == {"total": 12}
    t = lois.filter(pl.col("channel") == "memory")["t_ns"]
    assert t.len() > 0 and set((t + 12).to_list()) <= raw  # memory has no sensor: the total's delay


def test_launch_gap_belongs_to_the_execution_before_it():
    """Executions 100 us long with 10 us launch gaps: a sample in a gap is a LOI of the execution before
    it (toi_frac >= 1); after the run's last execution nothing is a LOI."""
    ex, runs, binned = frames()
    ex = ex.with_columns(  # shift exec i of each run by i * 10 us: gaps of 10 us between executions
        (pl.col(c) + pl.col("exec_index").cast(pl.Int64) * 10_000).alias(c) for c in ("gpu_start_ns", "gpu_end_ns")
    )
    hx = host_executions(ex, runs, PLAN, CLOCK, binned)
    assert hx["has_next"].to_list() == [True, True, False]
    assert hx["cycle_ns"].to_list() == [110_011, 110_011, 100_010]
    end1 = hx["exec_end_ns"][1]
    lois = assign_lois(samples_at([end1 + 5_000, hx["exec_end_ns"][2] + 1]), hx)
    assert lois["exec_index"].to_list() == [1]
    assert lois["toi_ns"].to_list() == [105_010] and lois["toi_frac"][0] == pytest.approx(105_010 / 100_010)


def test_sse_run_roles_and_phase():
    """An SSE run (phase "sse", warm-ups + 1 executions after the predecessor): the last is the SSE, the
    first main one is "first"; the reference run is not a measure run."""
    plan = make_plan(
        **{
            **PLAN_FIELDS,
            "predecessor_count": 2,
            "sse_index": 2,
            "warmups": 2,
            "ssp_index": 3,
            "executions_per_run": 5,
            "tail": 2,
            "sse_executions_per_run": 3,
        }
    )
    ex, runs, _ = frames(plan, pred=2)
    ex = ex.filter(~((pl.col("run") == 0) & (pl.col("segment") == "main") & (pl.col("exec_index") > 2)))
    runs = pl.DataFrame({"run": [0, 1], "phase": ["sse", "reference"]}, schema={"run": pl.Int32, "phase": pl.String})
    binned = pl.DataFrame({"run": [0], "golden": [True]}, schema={"run": pl.Int32, "golden": pl.Boolean})
    hx = host_executions(ex, runs, plan, CLOCK, binned)
    assert hx["run"].unique().to_list() == [0]
    assert hx["phase"].cast(pl.String).unique().to_list() == ["sse"]
    assert hx["role"].cast(pl.String).to_list() == ["pred", "pred", "first", "warmup", "sse"]
    # the same executions in an SSP run: exec 2 is still the SSE, later ones the SSP tail
    runs_ssp = runs.with_columns(phase=pl.when(pl.col("run") == 0).then(pl.lit("ssp")).otherwise("phase"))
    ex_full, _, _ = frames(plan, pred=2)
    hx = host_executions(ex_full, runs_ssp, plan, CLOCK, binned)
    assert hx["role"].cast(pl.String).to_list() == ["pred", "pred", "first", "warmup", "sse", "ssp", "ssp"]
    lois = assign_lois(samples_at([hx["exec_start_ns"][4] + 10]), hx)
    assert lois["phase"].to_list() == ["ssp"] and lois["role"].to_list() == ["sse"]
