"""The overview figure (fingrav/report/overview.py): one point per scenario at its arithmetic intensity, from the
typed results' own numbers; rows without a work model are named, not drawn."""

from __future__ import annotations

import pytest

from fingrav.contracts.result import Estimate, Headline, Labels, ScenarioResult, Throughput
from fingrav.report.build import vegalite_spec
from fingrav.report.overview import kind_label, overview_caption, overview_chart, overview_frame, unplotted


def _result(
    name: str, kernel: str, valid: bool, power: float, flop: float | None, nbytes: float | None
) -> ScenarioResult:
    e = Estimate(value=power * 1e-3, ci_low=power * 0.99e-3, ci_high=power * 1.01e-3, unit="pJ/flop")
    return ScenarioResult(
        labels=Labels(scenario=name, kernel=kernel),
        valid=valid,
        headline=Headline(power=Estimate(value=power, ci_low=power - 1, ci_high=power + 1, unit="W")),
        throughput=Throughput(work_flop=flop, work_bytes=nbytes, energy_per_flop=e if flop else Estimate()),
    )


RESULTS = [
    _result("g1", "gemm 1024x1024x1024 bf16", True, 500.0, 2.0e9, 6.0e6),
    _result("g2", "gemv 4096x4096 bf16", False, 300.0, 3.3e7, 3.3e7),
    _result("ar", "allreduce 1 MiB bf16", True, 200.0, None, 1.0e6),
]


def test_frame_takes_the_results_numbers_and_the_work_models_intensity() -> None:
    f = overview_frame(RESULTS)
    assert f["scenario"].to_list() == ["g1", "g2", "ar"]
    assert f["kind"].to_list() == ["GEMM", "GEMV", "all-reduce"]  # the kinds registry's labels
    assert kind_label("no-such-kind 1x1") == "unknown" and kind_label(None) == "unknown"
    assert f["intensity_flop_per_byte"][0] == pytest.approx(2.0e9 / 6.0e6)
    assert f["intensity_flop_per_byte"][2] is None
    assert f["power_w"].to_list() == [500.0, 300.0, 200.0]
    assert f["power_lo_w"][1] == 299.0 and f["energy_per_flop_pj"][0] == pytest.approx(0.5)
    assert unplotted(f) == ["ar"]


def test_chart_draws_valid_and_invalid_rows_and_the_caption_names_the_rest() -> None:
    spec = vegalite_spec(overview_chart(RESULTS), validate=True)
    values = [v for d in spec["datasets"].values() for v in d]
    assert {v["scenario"] for v in values} == {"g1", "g2"}  # the collective has no intensity
    assert {v["valid"] for v in values} == {True, False}
    caption = overview_caption(RESULTS, "95 %")
    assert "1 (ar)" in caption and "95 % CIs" in caption


def test_no_chart_without_any_intensity() -> None:
    assert overview_chart(RESULTS[2:]) is None
    assert "none" in overview_caption(RESULTS[:1], "95 %")
