"""Non-physical samples are set aside, counted and flagged, and never move a number."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from fingrav.analysis.samples import screen_samples
from fingrav.config import AnalysisConfig
from fingrav.testing.synthetic import SynthSpec, analyze, generate

ANALYSIS = AnalysisConfig(bootstrap_reps=200)


def _ssp_sample_index(d: dict, k: int = 0) -> int:
    """Row of the k-th "total" sample that is an SSP LOI (its power is the SSP level)."""
    s = analyze(d, ANALYSIS)
    assert s["valid"]
    tot = d["samples"].with_row_index().filter(pl.col("channel") == "total")
    return int(tot.filter(pl.col("power_mw") == 400_000.0)["index"][k])  # the synthetic SSP level: 400 W


@pytest.mark.parametrize("bad", [float(0xFFFFFFFF), 0.0, -5_000.0, float("nan"), float("inf"), 6e6])
def test_one_bad_sample_on_an_ssp_point_changes_nothing(bad: float) -> None:
    d = generate(SynthSpec(runs=40, sse_runs=10, seed=3))
    clean = analyze(d, ANALYSIS)
    i = _ssp_sample_index(d)
    power = d["samples"]["power_mw"].to_numpy().copy()
    power[i] = bad
    d["samples"] = d["samples"].with_columns(power_mw=pl.Series(power))
    s = analyze(d, ANALYSIS)
    assert s["valid"] and "nonphysical_samples" in s["flags"]
    assert s["samples"]["rejected"] == 1
    r, c = s["row"], clean["row"]
    assert r["power_ci_low_w"] <= c["power_w"] <= r["power_ci_high_w"]
    assert r["power_w"] == pytest.approx(c["power_w"], rel=1e-3)
    assert r["ssp_lois"] == c["ssp_lois"] - 1


def test_conflicting_duplicates_are_all_set_aside_identical_ones_kept_once() -> None:
    t = np.array([10, 20, 20, 30, 30, 40], np.int64)
    frame = pl.DataFrame({"t_ns": t, "channel": ["total"] * 6, "power_mw": [1.0, 2.0, 2.0, 3.0, 9.0, 4.0]})
    kept, counts = screen_samples(frame)
    assert kept["t_ns"].to_list() == [10, 20, 40]
    assert counts["conflicting_duplicates"] == 2 and counts["identical_duplicates"] == 1
    assert counts["rejected"] == 3


def test_time_going_backwards_is_counted() -> None:
    frame = pl.DataFrame({"t_ns": [10, 30, 20, 40], "channel": ["total"] * 4, "power_mw": [1.0, 1.0, 1.0, 1.0]})
    _, counts = screen_samples(frame)
    assert counts["time_backwards"] == 1


def test_clean_data_has_no_flag() -> None:
    s = analyze(generate(SynthSpec(runs=20, seed=1)), ANALYSIS)
    assert "nonphysical_samples" not in s["flags"] and s["samples"]["rejected"] == 0
