"""analysis/differentiate.py as a composition of typed steps: LOIs -> profiles -> method SSP -> sustained headline ->
kernel power -> flags -> validation, each a named function returning a dataclass or a result group; the composition
is what `differentiate` returns."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pydantic import BaseModel

from fingrav.analysis import differentiate as D
from fingrav.analysis.binning import bin_runs
from fingrav.analysis.profiles import ProfileNumbers, ProfileResult
from fingrav.analysis.sources import SourceTerm, collection_counter_vs_samples, collection_mean_power_mw
from fingrav.config import AnalysisConfig
from fingrav.contracts import result as R
from fingrav.contracts.profile import KernelPower, ReferenceStats, ScenarioSummary
from fingrav.testing.synthetic import SynthSpec, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200, ci_level=0.95, min_lois=10)
STEPS = (
    D.lois_step,
    D.profiles_step,
    D.method_ssp,
    D.sustained_headline,
    D.kernel_powers,
    D.flag_step,
    D.validation_step,
    D.executions_vs_ssp,
    D.sustained_group,
    D.throughput_group,
    D.truth_group,
    D.assemble,
)


def _typed(tp: object) -> bool:
    """Whether a return annotation is a dataclass, a pydantic model, or a mapping / tuple / optional of them."""
    if tp is None or tp is type(None):
        return True
    if isinstance(tp, type):
        return dataclasses.is_dataclass(tp) or issubclass(tp, BaseModel)
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (dict, typing.Union) or origin is getattr(__import__("types"), "UnionType", None) or origin is tuple:
        return all(_typed(a) or a is str for a in args)
    return False


def test_every_step_returns_a_typed_object_never_an_untyped_dict() -> None:
    for step in STEPS:
        hints = typing.get_type_hints(step)
        assert _typed(hints["return"]), (step.__name__, hints["return"])
        assert typing.Any not in typing.get_args(hints["return"]), step.__name__


@pytest.fixture(scope="module")
def data() -> dict:
    d = generate(SynthSpec(runs=40, sse_runs=20, predecessor_count=2, reference_executions=1000, seed=2))
    d["binned"], _ = bin_runs(d["executions"], d["runs"], d["plan"], d["margin"])
    return d


def test_the_steps_compose_to_what_differentiate_returns(data: dict) -> None:
    d = data
    args = (d["executions"], d["runs"], d["samples"], d["plan"], d["binned"], d["clock_fit"], d["sensor"], ANALYSIS)
    _, summary = D.differentiate(*args, d["truth"], max_clock_residual_us=20.0, scenario="s")
    assert isinstance(summary, ScenarioSummary) and isinstance(summary.result, R.ScenarioResult)

    loi = D.lois_step(*args)
    assert isinstance(loi, D.LoiStep) and loi.lois.height > 0 and loi.sample_counts["rejected"] == 0
    prof = D.profiles_step(loi, d["plan"], ANALYSIS, d["sensor"], 0)
    assert isinstance(prof, ProfileResult) and isinstance(prof.numbers, ProfileNumbers)
    ssp = D.method_ssp(prof)
    hs = D.sustained_headline(d["executions"], d["runs"], loi, d["plan"], d["clock_fit"], ANALYSIS, prof)
    assert isinstance(hs.reference, ReferenceStats) and hs.headline.source in R.POWER_SOURCES
    # the absolute numbers carry the sensor-source term of the collection (analysis.sources) in their CIs
    # (a power offset: its share of the collection's mean power)
    cmp_args = (d["runs"], loi.host_execs, loi.samples, loi.delay_ns)
    term = SourceTerm.of(collection_counter_vs_samples(*cmp_args), collection_mean_power_mw(*cmp_args))
    assert term.pct is not None and term.mw is not None and summary.result.headline.counter_vs_samples.value is not None
    hs_abs, ssp_abs = D.with_systematics(hs, ssp, term)
    assert ssp_abs.power == summary.result.ssp.power and ssp.power.unit == "W" and ssp.power.has_ci
    assert hs_abs.headline.power.scaled(1e-3, "W") == summary.result.headline.power
    assert hs_abs.headline.power.ci_low <= hs.headline.power.ci_low <= hs.headline.power.value
    grid = D.grid_view(loi.samples, d["sensor"]["total"], loi.delay_ns)
    kernel = D.kernel_powers(loi, d["runs"], d["plan"], grid, prof, ANALYSIS)
    assert set(kernel) == {"sse", "first"} and all(isinstance(k, KernelPower) for k in kernel.values())
    fl = D.flag_step(loi, d["runs"], d["binned"], d["plan"], d["clock_fit"], d["sensor"], ANALYSIS, prof, hs, ssp,
                     20.0, ())  # fmt: skip
    assert fl.flags == summary.result.flags and fl.valid == summary.valid
    readings = D.executions_vs_ssp(prof, kernel, ANALYSIS.min_lois, True)
    assert readings == (summary.result.sse, summary.result.interleaved)
    v = D.validation_step(d["truth"], None, d["binned"], d["plan"], loi, prof, hs, readings, kernel)
    assert v is not None and summary.result.truth is not None
    assert summary.result.truth.power.value == v.truth_power_w


def test_the_method_ssp_is_named_and_valid_on_its_own(data: dict) -> None:
    """With a reference run the headline is sustained (power_w) and the method SSP (ssp_power_w) is the short
    stamped runs' SSP, with its own validity; every comparison names both sides and carries a CI."""
    d = data
    _, s = D.differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], d["binned"], d["clock_fit"], d["sensor"], ANALYSIS,
        d["truth"], max_clock_residual_us=20.0,
    )  # fmt: skip
    r = s.result
    assert r.headline.power_source in ("sustained", "sustained_stamped")
    assert r.ssp.power.value == pytest.approx(s.channels["total"]["ssp"].power.value / 1e3)
    assert r.ssp.valid is True and r.ssp.invalid_by == []
    for e in (r.sustained.ssp_vs_power, r.sustained.ssp_vs_reference, r.sse.reading_vs_ssp):
        assert e.unit == "%" and e.has_ci and e.ci_low <= e.value <= e.ci_high
    assert r.sustained.ssp_vs_power.value == pytest.approx((r.ssp.power.value / r.headline.power.value - 1) * 100)
    assert "ssp_reference_mismatch" not in r.flags.all  # the headline is the reference run: no contradiction
    assert r.truth is not None and r.truth.power_vs_truth.has_ci  # the measured CI maps through the exact truth


def test_too_few_ssp_lois_invalidate_the_method_ssp_only(data: dict) -> None:
    """ssp_valid is the method SSP's own: too few SSP LOIs make it invalid (burst_too_few_lois under a sustained
    headline, which stays valid)."""
    d = data
    strict = ANALYSIS.model_copy(update={"min_lois": 100_000})
    _, s = D.differentiate(
        d["executions"], d["runs"], d["samples"], d["plan"], d["binned"], d["clock_fit"], d["sensor"], strict,
        None, max_clock_residual_us=20.0,
    )  # fmt: skip
    r = s.result
    assert r.ssp.valid is False and "too_few_lois" in r.ssp.invalid_by
    assert "burst_too_few_lois" in r.flags.notes and "too_few_lois" not in r.flags.invalidating
