"""`fingrav replay --check` (fingrav/replay_check.py): a committed summary.csv of any format against a replayed
sweep folder's numbers under their new names."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl

from fingrav.cli import main
from fingrav.contracts.result import Counts, Estimate, Flags, Headline, Labels, MethodSSP, ScenarioResult, Throughput
from fingrav.replay_check import check, committed_columns, compare, replayed_columns
from fingrav.report.table import metrics_frame, summary_frame, write_metrics, write_summary_csv

OLD_HEADER = (
    "scenario,kernel,ssp_power_w,ssp_power_ci_low_w,ssp_power_ci_high_w,ssp_source,burst_power_w,lois,valid,flags,"
    "throughput_tflop_s,throughput_ci_low_tflop_s,throughput_ci_high_tflop_s"
)


def _replay(root: Path, power: float = 688.8, flags: Flags | None = None) -> Path:
    """A replayed sweep folder (summary.csv + metrics) of one scenario."""
    e = Estimate(value=power, ci_low=686.1, ci_high=691.4, unit="W")
    r = ScenarioResult(
        labels=Labels(scenario="cb-8k", kernel="gemm 8192x8192x8192 bf16"),
        valid=True,
        headline=Headline(power=e, power_source="sustained"),
        ssp=MethodSSP(power=Estimate(value=725.0, ci_low=724.0, ci_high=726.0, unit="W"), valid=True),
        throughput=Throughput(tflop_s=Estimate(value=700.0, ci_low=699.0, ci_high=701.0, unit="TFLOP/s")),
        counts=Counts(ssp_lois=120),
        flags=flags or Flags(notes=["power_limit_cycling"]),
    )
    write_summary_csv(summary_frame([r]), root / "summary.csv")
    write_metrics(metrics_frame([r]), root / "metrics.parquet", root / "metrics.csv")
    return root


def _committed(path: Path, power: str = "688.8", extra_flag: str = "") -> Path:
    path.write_text(
        OLD_HEADER + "\n"
        f"cb-8k,gemm 8192x8192x8192 bf16,{power},686.1,691.4,sustained,725.0,120,true,"
        f"power_limit_cycling{extra_flag},700.0,700.0,700.0\n"
    )
    return path


def test_an_old_summary_is_read_under_the_new_names(tmp_path: Path) -> None:
    cols = committed_columns(_committed(tmp_path / "old.csv"))["cb-8k"]
    assert cols["power_w"] == "688.8" and cols["ssp_power_w"] == "725.0" and cols["power_source"] == "sustained"
    assert cols["ssp_lois"] == "120" and cols["notes"] == "power_limit_cycling" and cols["flags"] == ""


def test_a_faithful_replay_passes_and_lists_the_intended_changes(tmp_path: Path) -> None:
    root = _replay(tmp_path / "new")
    rep = check(_committed(tmp_path / "old.csv", extra_flag=";ssp_reference_mismatch"), root)
    assert rep.ok and rep.numbers >= 8 and rep.worst_rel == 0.0
    why = {(c, w) for _, c, _, _, w in rep.intended}
    assert ("throughput_ci_low_tflop_s", "was a zero-width CI: the cycle's uncertainty is now carried over") in why
    assert any(c == "notes" for c, _ in why)  # ssp_reference_mismatch under a sustained headline
    assert replayed_columns(root)["cb-8k"]["power_ci_low_w"] == 686.1
    assert main(["replay", "--check", "cb-8k", "--committed", str(tmp_path / "old.csv"), "--replayed", str(root)]) == 0


def test_a_number_off_by_more_than_the_tolerance_fails(tmp_path: Path) -> None:
    root = _replay(tmp_path / "new", power=690.0)  # +0.17 %
    rep = check(_committed(tmp_path / "old.csv"), root)
    assert not rep.ok and [c for _, c, _, _ in rep.differences] == ["power_w"]
    assert check(_committed(tmp_path / "old.csv"), root, rel_tol=1e-2).ok
    assert main(["replay", "--check", "x", "--committed", str(tmp_path / "old.csv"), "--replayed", str(root)]) == 1


def test_a_new_flag_is_a_difference(tmp_path: Path) -> None:
    root = _replay(tmp_path / "new", flags=Flags(invalidating=["imprecise"], notes=["power_limit_cycling"]))
    rep = check(_committed(tmp_path / "old.csv"), root)
    assert not rep.ok and ("cb-8k", "flags", "", "imprecise") in rep.differences


def test_new_summaries_compare_as_they_are(tmp_path: Path) -> None:
    a, b = _replay(tmp_path / "a"), _replay(tmp_path / "b")
    rep = check(a / "summary.csv", b)
    assert rep.ok and not rep.intended
    with open(a / "summary.csv") as fh:
        assert len(next(csv.reader(fh))) <= 25
    assert pl.read_csv(a / "metrics.csv").columns[:3] == ["scenario", "metric", "value"]


def test_the_sensor_source_term_and_the_consistency_note_are_intended_changes() -> None:
    """Issue 22: a CI of an absolute number that only widens where the replay measured the counter against the
    samples, and the note ssp_inconsistent, are listed as intended; a narrower CI or another new flag are not."""

    committed = {
        "s": {"power_w": "500", "power_ci_low_w": "499", "power_ci_high_w": "501", "notes": "power_limit_cycling"}
    }
    new = {
        "power_w": 500.0,
        "power_ci_low_w": 497.0,
        "power_ci_high_w": 503.0,
        "notes": "ssp_inconsistent;power_limit_cycling",
        "counter_vs_samples_pct": 0.6,
        "power_source": "sustained",
    }
    rep = compare(committed, {"s": new})
    assert rep.ok and len(rep.intended) == 3 and not rep.differences
    assert {w for *_, w in rep.intended} >= {"the sensor-source term (|counter_vs_samples_pct|) in the CI: only wider"}
    moved = compare(committed, {"s": {**new, "power_w": 500.2, "power_ci_high_w": 499.0}})
    assert not moved.ok and {c for _, c, *_ in moved.differences} >= {"power_ci_high_w"}
    other_flag = compare(committed, {"s": {**new, "notes": "power_limit_cycling;reference_drifting"}})
    assert [c for _, c, *_ in other_flag.differences] == ["notes"]


def test_a_recalibrated_ci_of_an_unchanged_number_is_intended_and_a_moved_number_is_not() -> None:
    """Issue 22's CI calibration (the drift beyond its noise in quadrature, the sensor-source term in W) moves the
    CIs of committed rows either way while their numbers stay: listed as intended, with the recommendation derived
    from the CI's width and `imprecise` that stops firing; a number that moves, or another flag, stays a difference."""
    from fingrav.replay_check import compare

    committed = {
        "s": {
            "power_w": "500",
            "power_ci_low_w": "494",
            "power_ci_high_w": "506",
            "recommended_sustained_run_s": "9.5",
            "valid": "false",
            "flags": "imprecise",
        }
    }
    new = {
        "power_w": 500.0,
        "power_ci_low_w": 497.5,
        "power_ci_high_w": 502.5,
        "recommended_sustained_run_s": 3.1,
        "valid": True,
        "flags": "",
        "power_source": "sustained",
    }
    rep = compare(committed, {"s": new})
    assert rep.ok and not rep.differences
    assert {c for _, c, *_ in rep.intended} == {
        "power_ci_low_w",
        "power_ci_high_w",
        "recommended_sustained_run_s",
        "valid",
        "flags",
    }
    moved = compare(committed, {"s": {**new, "power_w": 503.0}})
    assert {c for _, c, *_ in moved.differences} >= {
        "power_w",
        "power_ci_low_w",
        "valid",
        "recommended_sustained_run_s",
    }
    other = compare(committed, {"s": {**new, "flags": "reference_unsettled", "valid": False}})
    assert [c for _, c, *_ in other.differences] == ["flags"]


def test_the_placement_term_widens_the_execution_time_ci_as_an_intended_change() -> None:
    """Issue 22: the execution time's CI carries the placement term where the kernel rotated through several input
    sets: only wider with the time unchanged is listed as intended; narrower, or a moved time, is a difference."""
    from fingrav.replay_check import compare

    committed = {"s": {"exec_time_us": "32.48", "exec_time_ci_low_us": "32.0", "exec_time_ci_high_us": "33.0"}}
    new = {"exec_time_us": 32.48, "exec_time_ci_low_us": 31.36, "exec_time_ci_high_us": 33.61}
    rep = compare(committed, {"s": new})
    assert rep.ok and len(rep.intended) == 2 and not rep.differences
    assert {w for *_, w in rep.intended} == {
        "the placement term (the input sets' spread) in the CI: only wider; the number unchanged"
    }
    narrower = compare(committed, {"s": {**new, "exec_time_ci_low_us": 32.3}})
    assert [c for _, c, *_ in narrower.differences] == ["exec_time_ci_low_us"]
    moved = compare(committed, {"s": {**new, "exec_time_us": 32.6}})
    assert {c for _, c, *_ in moved.differences} >= {"exec_time_us", "exec_time_ci_low_us"}


def test_the_card_state_widens_a_steady_headline_ci_as_an_intended_change() -> None:
    """Stop 35: the headline of a reference run that does not limit-cycle carries the card's state between runs: its
    CI only wider with the power unchanged is listed as that; in a limit-cycling row, or with the power moved, it is a
    difference."""
    from fingrav.replay_check import compare

    row = {"power_source": "sustained", "notes": "sse_skipped", "power_w": "500.0"}
    committed = {"s": {**row, "power_ci_low_w": "499.8", "power_ci_high_w": "500.2"}}
    new = {**row, "power_w": 500.0, "power_ci_low_w": 497.0, "power_ci_high_w": 503.0}
    rep = compare(committed, {"s": new})
    assert rep.ok and len(rep.intended) == 2 and not rep.differences
    assert {w for *_, w in rep.intended} == {
        "the card's state between runs in the headline's CI (stop 35): only wider; the number unchanged"
    }
    cycling = compare(
        {"s": {**committed["s"], "notes": "power_limit_cycling"}}, {"s": {**new, "notes": "power_limit_cycling"}}
    )
    assert not any("card's state" in w for *_, w in cycling.intended)
    moved = compare(committed, {"s": {**new, "power_w": 501.0}})
    assert "power_w" in {c for _, c, *_ in moved.differences}


def test_the_method_ssps_ci_widened_for_few_runs_is_an_intended_change() -> None:
    """Stop 36: the method SSP's bootstrap over few SSP runs is widened (`profiles.widen_ssp_ci`): its CI only wider
    with the SSP unchanged is listed as that; narrower it is not this change (stop 33's recalibration may move it
    either way), and with the SSP moved it is a difference."""
    from fingrav.replay_check import compare

    row = {"power_source": "sustained", "notes": "power_limit_cycling", "ssp_power_w": "700.0"}
    committed = {"s": {**row, "ssp_power_ci_low_w": "698.0", "ssp_power_ci_high_w": "702.0"}}
    new = {**row, "ssp_power_w": 700.0, "ssp_power_ci_low_w": 697.4, "ssp_power_ci_high_w": 702.6}
    rep = compare(committed, {"s": new})
    assert rep.ok and len(rep.intended) == 2 and not rep.differences
    assert all("few SSP runs (stop 36" in w for *_, w in rep.intended)
    narrower = compare(committed, {"s": {**new, "ssp_power_ci_high_w": 701.0}})
    assert not any("stop 36" in w for _, c, *_, w in narrower.intended if c == "ssp_power_ci_high_w")
    moved = compare(committed, {"s": {**new, "ssp_power_w": 701.0}})
    assert "ssp_power_w" in {c for _, c, *_ in moved.differences}
    # another channel's method SSP (here the memory's) is widened the same way; a named metric is not a channel
    mem = {"ssp_memory_power_w": "60.0", "ssp_memory_power_ci_low_w": "59.0", "ssp_memory_power_ci_high_w": "61.0"}
    wider = {"ssp_memory_power_w": 60.0, "ssp_memory_power_ci_low_w": 58.5, "ssp_memory_power_ci_high_w": 61.5}
    base = committed["s"]
    channel = compare({"s": {**base, **mem}}, {"s": {**new, **wider}})
    assert channel.ok and all("stop 36" in w for *_, w in channel.intended) and len(channel.intended) == 4
    steady = {"ssp_steady_kernel_power_w": "700.0", "ssp_steady_kernel_power_ci_high_w": "702.0"}
    steady_new = {"ssp_steady_kernel_power_w": 700.0, "ssp_steady_kernel_power_ci_high_w": 703.0}
    other = compare({"s": {**base, **steady}}, {"s": {**new, **steady_new}})
    assert not any("stop 36" in w for _, c, *_, w in other.intended if c.startswith("ssp_steady"))


def test_cis_carrying_the_sensor_errors_may_only_widen() -> None:
    """Stop 32: the calibration's standard errors are cluster-robust (never smaller) and the kernel powers' bootstrap
    part is widened for few runs: a CI of a number that carries them may only widen, the number unchanged."""
    from fingrav.replay_check import compare

    committed = {
        "s": {
            "ssp_vs_unstamped_burst_pct": "-0.58",
            "ssp_vs_unstamped_burst_ci_low_pct": "-1.27",
            "ssp_vs_unstamped_burst_ci_high_pct": "-0.21",
        }
    }
    new = {
        "ssp_vs_unstamped_burst_pct": -0.58,
        "ssp_vs_unstamped_burst_ci_low_pct": -1.28,
        "ssp_vs_unstamped_burst_ci_high_pct": -0.20,
    }
    rep = compare(committed, {"s": new})
    assert rep.ok and len(rep.intended) == 2 and not rep.differences
    # narrower: not this change, but the method SSP's systematic part in quadrature (stop 39) narrows it
    narrower = compare(committed, {"s": {**new, "ssp_vs_unstamped_burst_ci_high_pct": -0.25}})
    assert narrower.ok and any("stop 39" in w for _, c, *_, w in narrower.intended if c.endswith("_ci_high_pct"))
    moved = compare(committed, {"s": {**new, "ssp_vs_unstamped_burst_pct": -0.6}})
    assert "ssp_vs_unstamped_burst_pct" in {c for _, c, *_ in moved.differences}
    # the SSE's kernel power, read over its execution since stop 32: its number may move by <= 0.01 %
    kp = {"sse_kernel_power_w": "964.09", "sse_kernel_power_ci_low_w": "901.1", "sse_kernel_power_ci_high_w": "1030.7"}
    near = {"sse_kernel_power_w": 964.16, "sse_kernel_power_ci_low_w": 897.8, "sse_kernel_power_ci_high_w": 1034.1}
    assert compare({"s": kp}, {"s": near}).ok
    far = compare({"s": kp}, {"s": {**near, "sse_kernel_power_w": 964.9}})
    assert {c for _, c, *_ in far.differences} == {"sse_kernel_power_ci_low_w", "sse_kernel_power_ci_high_w"}


def test_grid_time_changes_are_intended_only_for_numbers_computed_on_the_stamps() -> None:
    """A kernel power and the note ssp_inconsistent may change on replay only where the committed numbers were
    computed on the stamps and the replay reads the sensor's grid times; otherwise they are differences."""
    committed = {"s": {"sse_kernel_power_w": "900.0", "notes": "ssp_inconsistent"}}
    replayed = {"s": {"sse_kernel_power_w": 950.0, "notes": ""}}
    assert not compare(committed, replayed).ok
    rep = compare(committed, replayed, off_grid_before=True)
    assert rep.ok and len(rep.intended) == 2


def test_committed_off_grid_reads_the_calibrations(tmp_path: Path) -> None:
    import json

    from fingrav.replay_check import committed_off_grid

    def cal(folder: Path, grid: bool) -> None:
        folder.mkdir(parents=True)
        total = {"delay_ns": 1.0, **({"grid": {"period_ns": 2e7}} if grid else {})}
        (folder / "gpu0.json").write_text(json.dumps({"sensor": {"total": total}}))

    cal(tmp_path / "old" / "gpu" / "calibration", grid=False)
    cal(tmp_path / "new" / "gpu" / "calibration", grid=True)
    cal(tmp_path / "replay" / "calibration", grid=True)
    assert committed_off_grid(tmp_path / "old", tmp_path / "replay")
    assert not committed_off_grid(tmp_path / "new", tmp_path / "replay")


def test_listed_scenarios_read_with_another_sensor_model_may_change_their_kernel_powers() -> None:
    """`legacy.STAMPED_MODEL_SCENARIOS`: only the scenarios named may change their kernel powers; the dataset's
    others may not."""
    committed = {"a": {"sse_kernel_power_w": "849.6"}, "b": {"sse_kernel_power_w": "900.0"}}
    replayed = {"a": {"sse_kernel_power_w": 858.0}, "b": {"sse_kernel_power_w": 908.0}}
    rep = compare(committed, replayed, off_grid_before={"a"})
    assert not rep.ok and [d[0] for d in rep.differences] == ["b"] and [i[0] for i in rep.intended] == ["a"]
    from fingrav.contracts.legacy import STAMPED_MODEL_SCENARIOS

    assert ("h200-sse2", "gemm-16k-16k-6k") in STAMPED_MODEL_SCENARIOS


def test_the_limit_cycles_own_numbers_may_change_while_the_headline_stays() -> None:
    """Stop 33: a "cycle" shorter than half the median joins its neighbour, which changes the limit cycle's count,
    period, duty and levels (intended) but not the headline; with a moved headline they are differences."""
    from fingrav.contracts.legacy import intended_change

    committed = {"power_w": "690.2", "limit_cycles": "8", "limit_cycle_period_ci_low_ms": "498.8"}
    same = {"power_w": 690.2, "limit_cycles": 7.0, "limit_cycle_period_ci_low_ms": 701.9}
    for col in ("limit_cycles", "limit_cycle_period_ci_low_ms"):
        assert "brief release" in intended_change(col, committed, same)
        assert intended_change(col, committed, {**same, "power_w": 689.0}) == ""


def test_the_method_ssps_systematic_part_in_quadrature_may_narrow_its_cis_and_gain_validity() -> None:
    """Stop 39: the method SSP's systematic part in quadrature (`profiles._with_systematic`): a narrower CI of every
    channel's method SSP and of the SSP against the unstamped burst is intended where the SSP is unchanged, and so is
    ssp_valid false -> true with a narrower CI; ssp_valid true -> false, or with the SSP moved, is a difference."""
    from fingrav.replay_check import compare

    row = {"power_source": "sustained", "notes": "", "ssp_power_w": "700.0", "ssp_valid": "false"}
    old = {
        **row,
        "ssp_power_ci_low_w": "692.0",
        "ssp_power_ci_high_w": "708.0",
        "ssp_memory_power_w": "60.0",
        "ssp_memory_power_ci_low_w": "59.0",
        "ssp_memory_power_ci_high_w": "61.0",
        "ssp_vs_unstamped_burst_pct": "-1.0",
        "ssp_vs_unstamped_burst_ci_low_pct": "-2.0",
        "ssp_vs_unstamped_burst_ci_high_pct": "0.0",
    }
    new = {
        **old,
        "ssp_power_w": 700.0,
        "ssp_memory_power_w": 60.0,
        "ssp_vs_unstamped_burst_pct": -1.0,
        "ssp_valid": "true",
        "ssp_power_ci_low_w": 694.0,
        "ssp_power_ci_high_w": 706.0,
        "ssp_memory_power_ci_low_w": 59.3,
        "ssp_memory_power_ci_high_w": 60.7,
        "ssp_vs_unstamped_burst_ci_low_pct": -1.8,
        "ssp_vs_unstamped_burst_ci_high_pct": -0.2,
    }
    rep = compare({"s": old}, {"s": new})
    assert rep.ok and not rep.differences and len(rep.intended) == 7
    assert any(c == "ssp_valid" and "stop 39" in w for _, c, *_, w in rep.intended)
    lost = compare({"s": {**old, "ssp_valid": "true"}}, {"s": {**new, "ssp_valid": "false"}})
    assert ("s", "ssp_valid", "true", "false") in lost.differences
    moved = compare({"s": old}, {"s": {**new, "ssp_power_w": 701.0}})
    assert {"ssp_power_w", "ssp_valid"} <= {c for _, c, *_ in moved.differences}


def test_a_committed_table_may_come_back_with_wider_cis_only() -> None:
    """`table_differences` (results/h200-state-reps*/pairs.md, results/h200-state/state.md): a "value [low, high]"
    cell may widen with its value unchanged, a ± column grow and a covered column turn NO -> yes; nothing else."""
    from fingrav.replay_check import table_differences

    old = "| k | fingrav W [95 % CI] | ± % | covered |\n|---|---|---|---|\n| a | 600.0 [595.0, 605.0] | 0.83 | NO |\n"
    wider = old.replace("[595.0, 605.0] | 0.83 | NO", "[594.0, 606.0] | 1.00 | yes")
    assert table_differences(wider, old) == []
    assert table_differences(old, old) == []
    narrower = old.replace("[595.0, 605.0]", "[596.0, 604.0]")
    moved = old.replace("600.0 [", "601.0 [")
    lost = wider.replace("| yes |", "| NO |")
    other = old.replace("| a |", "| b |")
    for new in (narrower, moved, other):
        assert len(table_differences(new, old)) == 1
    assert table_differences(lost, wider) and table_differences(old + "| x | 1 | 2 | 3 |\n", old)
