"""The report's rough edges: calibration flags explained on hover, readable calibration columns, long provenance
values folded instead of one wide cell."""

from __future__ import annotations

from fingrav.contracts.calibration import Calibration, ClockRecord, LoadSteps
from fingrav.contracts.sensor import SensorModel
from fingrav.report.html import calibration_section, flag_chips, meta_section, sensor_label


def test_a_calibration_flag_is_explained_on_hover() -> None:
    chip = flag_chips(["memory:steps_shorter_than_settle"])
    assert "settle time" in chip and "see docs" not in chip


def test_calibration_columns_have_labels_not_keys() -> None:
    assert sensor_label("settle_ms") == "settle (ms)" and sensor_label("noise_mw") == "noise (mW)"
    assert sensor_label("period_p90_ms") == "period p90 (ms)" and sensor_label("responds") == "responds"
    cal = Calibration(
        clock=ClockRecord(offset_ns=0.0, gpu_ref_ns=0),
        sensor={"total": SensorModel(period_ns=1e6, settle_ns=2e6, noise_mw=5.0)},
        channels=["total"],
        steps=LoadSteps(),
    )
    html = calibration_section(cal)
    assert ">settle (ms)<" in html and ">settle_ms<" not in html


def test_a_long_provenance_value_is_folded() -> None:
    job = {f"field_{i}": "x" * 40 for i in range(60)}  # ~3,000 characters as one key=value line
    html = meta_section({"sweep": "s", "provenance": {"scheduler_job": job}}, None)
    assert "<details><summary>60 fields</summary>" in html and html.count("<li>") == 60
    short = meta_section({"sweep": "s", "provenance": {"scheduler_job": {"id": 7}}}, None)
    assert "id=7" in short and "<details>" not in short


def test_the_headline_names_each_kernel_and_its_shape() -> None:
    from fingrav.contracts.result import Labels, ScenarioResult
    from fingrav.report.html import kernel_line

    def result(kernel: str | None, predecessor: str | None = None) -> ScenarioResult:
        return ScenarioResult(labels=Labels(scenario="s", kernel=kernel, predecessor=predecessor), valid=True)

    assert "gemm 2048x2048x2048 bf16" in kernel_line(result("gemm 2048x2048x2048 bf16"))
    line = kernel_line(result("gemm 2048x2048x2048 bf16", "gemv 4096x4096 bf16 x40"))
    assert "gemm 2048x2048x2048 bf16 after gemv 4096x4096 bf16 x40" in line
    assert kernel_line(result(None)) == ""
