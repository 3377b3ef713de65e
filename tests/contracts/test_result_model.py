"""The typed result model (fingrav/contracts/result.py) and the old -> new column table (contracts/legacy.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fingrav.contracts import legacy
from fingrav.contracts import result as R
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import Estimate

ROOT = Path(__file__).resolve().parents[2]


def test_estimate_prints_in_one_line_with_its_unit_and_sensible_digits() -> None:
    assert str(Estimate(value=688.8123, ci_low=686.1, ci_high=691.4, unit="W")) == "688.8 W [686.1, 691.4]"
    assert str(Estimate(value=-2.624, ci_low=-3.1, ci_high=-2.2, unit="%")) == "-2.62 % [-3.10, -2.20]"
    assert str(Estimate(value=29.893178, ci_low=29.8753, ci_high=29.9111, unit="mJ")) == "29.893 mJ [29.875, 29.911]"
    assert str(Estimate(unit="W")) == "n/a" and str(Estimate(value=45.0, unit="µs")) == "45.00 µs"


def test_differences_carry_both_inputs_uncertainty() -> None:
    a = Estimate(value=110.0, ci_low=109.0, ci_high=111.0, unit="W")
    b = Estimate(value=100.0, ci_low=99.0, ci_high=101.0, unit="W")
    d = a.vs(b)
    assert d.value == pytest.approx(10.0) and d.unit == "%"
    assert (d.ci_low, d.ci_high) == pytest.approx(((109 / 101 - 1) * 100, (111 / 99 - 1) * 100))
    assert d.ci_low < d.value < d.ci_high and d.half_width > a.half_width_pct  # wider than either input's
    assert a.vs(Estimate(value=100.0)).ci_low is None  # no CI from an input without one
    t = a.vs_exact(100.0)  # an exact truth: the measured CI maps through
    assert (t.value, t.ci_low, t.ci_high) == pytest.approx((10.0, 9.0, 11.0))
    inv = b.map_monotone(lambda x: 1000.0 / x, True, "1/kW", "inverse")
    assert (inv.ci_low, inv.ci_high) == pytest.approx((1000 / 101, 1000 / 99))
    assert b.scaled(1e3, "mW").ci_high == pytest.approx(101e3)


def _result(truth: bool) -> R.ScenarioResult:
    w = Estimate(value=600.0, ci_low=598.0, ci_high=602.0, unit="W")
    return R.ScenarioResult(
        labels=R.Labels(scenario="cb-8k", kernel="gemm 8192x8192x8192 bf16"),
        valid=True,
        headline=R.Headline(power=w, power_source="sustained", energy_per_exec=Estimate(value=1.0, unit="mJ")),
        ssp=R.MethodSSP(power=w.shifted(20.0), valid=True, channels={"hbm": Estimate(value=50.0, unit="W")}),
        truth=R.Truth(power=Estimate(value=601.0, unit="W")) if truth else None,
        flags=R.Flags(invalidating=[], notes=["power_limit_cycling", "kernel_shorter_than_window"]),
    )


def test_summary_csv_is_narrow_and_its_column_names_derive_from_the_model() -> None:
    plain, sim = R.summary_columns(truth=False), R.summary_columns(truth=True)
    assert len(plain) <= R.MAX_SUMMARY_COLUMNS == 25 and len(sim) <= R.MAX_SUMMARY_COLUMNS_TRUTH == 30
    assert plain[:3] == ("scenario", "kernel", "valid") and plain[-1] == "notes"
    for col in ("power_w", "energy_per_exec_mj", "exec_time_us", "ssp_power_w", "sse_reading_w", "sse_kernel_power_w"):
        assert {col, *R.ci_columns(col)} <= set(plain)
    assert {"power_source", "ssp_valid", "flags"} <= set(plain) and set(R.SUMMARY_TRUTH) <= set(sim)
    assert R.ci_columns("energy_efficiency_tflop_s_per_w") == (
        "energy_efficiency_ci_low_tflop_s_per_w",
        "energy_efficiency_ci_high_tflop_s_per_w",
    )
    assert R.value_column_of_ci("power_ci_high_w") == "power_w" and R.value_column_of_ci("power_w") is None


def test_flat_columns_round_trip_and_the_long_form_has_every_number() -> None:
    r = _result(truth=True)
    flat = r.flat()
    assert flat["power_w"] == 600.0 and flat["ssp_power_w"] == 620.0 and flat["ssp_hbm_power_w"] == 50.0
    assert flat["notes"] == "power_limit_cycling;kernel_shorter_than_window" and flat["flags"] == ""
    back = R.unflatten(flat)
    assert back.flat() == flat
    long = list(R.long_rows(r))
    assert {m["metric"] for m in long} >= {"power_w", "ssp_power_w", "energy_per_exec_mj", "ssp_hbm_power_w"}
    assert all(set(m) == set(R.METRICS_COLUMNS) for m in long)
    assert r.metric("power_w") is r.headline.power
    with pytest.raises(KeyError):
        r.metric("power_source")  # not an Estimate
    assert r.flags.all == ["kernel_shorter_than_window", "power_limit_cycling"]  # the registry's order


def test_ci_column_names_are_spelled_only_by_the_contract() -> None:
    """`_ci_low_` / `_ci_high_` column names come from `result.ci_columns`: no other module of the package spells
    one out (the old -> new table may test for the pattern)."""
    allowed = {ROOT / "fingrav/contracts/result.py", ROOT / "fingrav/contracts/legacy.py"}
    spelled = [
        f"{p.relative_to(ROOT)}:{i}"
        for p in sorted((ROOT / "fingrav").rglob("*.py"))
        if p not in allowed
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"_ci_(low|high)_", line)
    ]
    assert not spelled, spelled


def test_old_columns_map_to_new_ones_and_old_summaries_still_load() -> None:
    assert legacy.new_column("ssp_power_w") == "power_w" and legacy.new_column("burst_power_w") == "ssp_power_w"
    assert legacy.new_column("burst_power_ci_low_w") == "ssp_power_ci_low_w"
    assert legacy.new_column("rank1_ssp_power_ci_high_w") == "rank1_power_ci_high_w"
    assert legacy.new_column("sse_kernel_vs_ssp_pct") == "sse_kernel_power_vs_ssp_pct"
    assert legacy.new_column("exec_time_us") == "exec_time_us"
    assert set(legacy.OLD_TO_NEW.values()) <= {*R.BY_COLUMN, "fleet_power_w", "fleet_power_spread_pct",
                                                "fleet_power_noise_spread_pct", "fleet_power_distinct"}  # fmt: skip
    old = {"scenario": "x", "ssp_power_w": 600.0, "ssp_power_ci_low_w": 598.0, "ssp_power_ci_high_w": 602.0,
           "ssp_source": "sustained", "burst_power_w": 620.0, "lois": 40, "valid": True,
           "flags": "imprecise;power_limit_cycling"}  # fmt: skip
    assert legacy.is_old_row(old)
    r = legacy.result_from_old_row(old)
    assert r.headline.power.value == 600.0 and r.headline.power.ci_low == 598.0 and r.ssp.power.value == 620.0
    assert r.headline.power_source == "sustained" and r.counts.ssp_lois == 40
    assert r.flags.invalidating == ["imprecise"] and r.flags.notes == ["power_limit_cycling"]


def test_a_format_2_summary_json_reads_as_the_result_model() -> None:
    """A summary.json of format 2 (a `row` of old columns; the sim-h200 sweep's cb-8k before format 3: sustained
    headline, limit cycle, truths) reads as the result model, every number of its row under its new name."""
    data = json.loads((ROOT / "tests/contracts/data/summary_format2_sim_h200_cb-8k.json").read_text())
    assert data["format_version"] == 2 and "row" in data
    s = ScenarioSummary.model_validate(data)
    assert s.format_version == 3 and s.reference is not None and s.reference.limit_cycle is not None
    flat, row = s.result.flat(), data["row"]
    assert s.result.headline.power.value == row["ssp_power_w"] and s.result.ssp.power.value == row["burst_power_w"]
    numbers = [k for k, v in row.items() if isinstance(v, float)]
    assert len(numbers) > 60
    for k in numbers:
        assert flat[legacy.new_column(k)] == row[k], k
    assert set(s.flags) == set(R.split_flags(row["flags"]))
    assert s.kernel_power["sse"].power.unit == "mW"
    old_ssp = data["channels"]["total"]["ssp"]  # a group's mW fields read into its one Estimate
    ssp = s.role("total", "ssp")
    assert (ssp.power.value, ssp.power.ci_low, ssp.power.ci_high) == (
        old_ssp["mean_mw"], old_ssp["ci_low_mw"], old_ssp["ci_high_mw"])  # fmt: skip
    assert ssp.power.unit == "mW" and "mean_mw" not in ssp.model_dump()
    assert s.result.sustained.recommended_run_s == row["sustained_run_s_for_max_ci"]  # renamed: a recommendation
    format3 = s.result.model_dump()
    format3["sustained"]["run_s_for_max_ci"] = format3["sustained"].pop("recommended_run_s")
    assert R.ScenarioResult.model_validate(format3) == s.result  # a format-3 result written before the rename


def test_architecture_doc_has_the_column_tables() -> None:
    """docs/ARCHITECTURE.md shows every result column and the old -> new column table, generated from the contract."""
    doc = (ROOT / "docs/ARCHITECTURE.md").read_text()
    assert R.markdown_table() in doc and legacy.markdown_table() in doc
