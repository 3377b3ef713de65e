"""The typed records that cross stage boundaries (plan.json, calibration/gpu<k>.json, binned.parquet's metadata,
summary.json's sensor / binning / sample phase / telemetry): every committed file still loads, its typed fields are
read as attributes, and its JSON is written back with the same keys and values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav import rawio
from fingrav.analysis.sustained import ReferenceDecision
from fingrav.contracts.binning import BinningSummary, KindBin
from fingrav.contracts.calibration import Calibration, ClockRecord, LoadSteps
from fingrav.contracts.plan import Plan, ReferenceStop
from fingrav.contracts.profile import PhaseTelemetry, SamplePhase, ScenarioSummary
from fingrav.contracts.sensor import SensorModel, SensorSummary, StepResponse

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted(ROOT.glob("results/*/gpu/**/plan.json"))
CALIBRATIONS = sorted(
    p for pattern in ("results/*/calibration/*.json", "results/*/gpu/calibration/*.json") for p in ROOT.glob(pattern)
)


def test_the_committed_datasets_are_seen() -> None:
    assert len(PLANS) >= 50 and len(CALIBRATIONS) >= 7


@pytest.mark.parametrize("path", PLANS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_plan_loads_typed_and_writes_back_its_keys(path: Path) -> None:
    on_disk = json.loads(path.read_text())
    plan = rawio.read_model(path, Plan)
    again = json.loads(rawio.dumps(plan.to_json()))
    assert {k: again[k] for k in on_disk} == on_disk
    assert plan.provenance.stage == "collect" and plan.provenance.config_hash
    if plan.reference_stop is not None:
        assert isinstance(plan.reference_stop, ReferenceStop) and plan.reference_stop.reason


@pytest.mark.parametrize("path", CALIBRATIONS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_calibration_loads_typed_and_writes_back_unchanged(path: Path) -> None:
    on_disk = json.loads(path.read_text())
    cal = rawio.read_model(path, Calibration)
    assert json.loads(rawio.dumps(cal)) == on_disk
    assert isinstance(cal.clock, ClockRecord) and cal.clock.valid and cal.max_clock_residual_us == 20.0
    assert cal.steps.count > 0 and cal.steps.on_ns is not None and cal.steps.on_ns > 1e8
    assert isinstance(cal.total.response, StepResponse) and len(cal.total.response.t_ns) == len(cal.total.response.n)
    assert cal.provenance.stage == "calibrate"


def test_format_1_load_steps_in_ms_are_read_in_ns() -> None:
    steps = LoadSteps.model_validate({"count": 30, "on_ms": 150.0, "off_ms": 170.5})
    assert (steps.count, steps.on_ns, steps.off_ns) == (30, 150e6, 170.5e6)
    assert LoadSteps.model_validate({}) == LoadSteps(count=0)


def test_a_bad_record_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="clock.gpu_ref_ns"):
        Calibration.model_validate(
            {"clock": {"offset_ns": 0.0}, "sensor": {"total": {}}, "channels": ["total"], "steps": {}}
        )
    with pytest.raises(ValueError, match="reference_stop.reason"):
        Plan.model_validate({**json.loads(PLANS[0].read_text()), "reference_stop": {"elapsed_ns": 1}})


def test_the_reference_decision_is_the_plans_reference_stop() -> None:
    stop = ReferenceDecision(extend=False, reason="ci_reached", elapsed_ns=5, cycles=4, ci_pct=0.5).to_summary()
    assert stop == ReferenceStop(reason="ci_reached", elapsed_ns=5, cycles=4, ci_pct=0.5)


def test_the_sensor_summary_leaves_step_responses_out() -> None:
    resp = StepResponse(t_ns=[0.0, 1.0], mean=[0.0, 1.0], n=[3, 3], model=[0.0, 1.0])
    total = SensorModel(period_ns=1e6, response=resp)
    s = SensorSummary(**total.model_dump(exclude={"response"}), delay_correction_ns=5, channels={"total": total})
    out = json.loads(rawio.dumps(s))
    assert "response" not in out and "response" not in out["channels"]["total"]
    assert out["delay_correction_ns"] == 5 and out["channels"]["total"]["period_ns"] == 1e6
    assert SensorSummary.model_validate(out).channels["total"].period_ns == 1e6


def test_a_format_2_summary_reads_typed_records() -> None:
    data = json.loads((ROOT / "tests/contracts/data/summary_format2_sim_h200_cb-8k.json").read_text())
    s = ScenarioSummary.model_validate(data)
    assert isinstance(s.sensor, SensorSummary) and s.sensor.delay_correction_ns == data["sensor"]["delay_correction_ns"]
    assert set(s.sensor.channels) == set(data["sensor"]["channels"])
    assert isinstance(s.binning, BinningSummary) and s.binning.margin == data["binning"]["margin"]
    assert isinstance(s.binning.bins["ssp"], KindBin) and s.binning.runs_golden == data["binning"]["runs_golden"]
    assert isinstance(s.sample_phase, SamplePhase) and s.sample_phase.runs == data["sample_phase"]["runs"]
    assert s.provenance.stage == "differentiate" and s.provenance.raw is not None
    out = json.loads(rawio.dumps(s))
    for key in ("sensor", "binning", "sample_phase", "provenance", "plan"):
        assert out[key] == data[key], key


def test_phase_telemetry_defaults_and_types() -> None:
    t = PhaseTelemetry.model_validate({"runs": 3, "runs_ending_with_reason": {"sw_power_cap": 3}, "counter_unit": "ns"})
    assert t.runs == 3 and t.runs_ending_with_reason == {"sw_power_cap": 3} and t.sm_mhz_after_median is None
