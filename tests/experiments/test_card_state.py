"""experiments/card_state.py without a GPU: the cycle time's course from the parts' marks, the spread between runs
per shape and input-set count, and the whole plan "quick" on the simulator (main() end to end, tables rebuilt from
the JSON it wrote); the committed dataset's tables rebuilt from its JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav.testing.experiments import load_experiment

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cs():
    return load_experiment("card_state")


def test_course_is_the_cycle_time_of_each_part(cs):
    marks = [(1_000_000, 100), (2_000_000, 200), (2_000_000, 200), (4_000_000, 300)]
    assert cs.course(marks, 0) == [[2.0, 10.0], [4.0, 20.0]]  # a mark without progress is skipped


def _row(name: str, w: float, us: float, sets: int = 1) -> dict:
    return {"scenario": name, "mean_w": w, "cycle_us": us, "input_sets": sets}


def test_spread_groups_shapes_and_set_counts(cs):
    rows = [_row("a#0@1", 100.0, 10.0), _row("a#1@1", 102.0, 10.2), _row("a#0@4", 101.0, 10.1, 4), _row("b", 50.0, 5.0)]
    rows.append({**_row("b", 0.0, 5.0), "mean_w": None})  # a run without settled samples is left out
    g = {(x["scenario"], x["input_sets"]): x for x in cs.spread({"rows": rows})}
    a1 = g[("a", 1)]
    assert (a1["runs"], a1["preparations"], a1["power_w"]) == (2, 2, 101.0)
    assert a1["power_sd_pct"] == pytest.approx(2**0.5 / 101.0 * 100.0)
    assert a1["cycle_sd_pct"] == pytest.approx((0.02**0.5) / 10.1 * 100.0)
    assert g[("a", 4)]["power_sd_pct"] is None and g[("b", 1)]["runs"] == 1
    assert "| a | 4 | 1 | 1 | 101.0 |  |" in cs.spread_table({"rows": rows})


def test_quick_plan_on_the_simulator(cs, tmp_path, capsys):
    assert cs.main(["--sim", "--plan", "quick", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "card_state.json").read_text())
    runs = [st for st in cs.PLANS["quick"] if st[0] == "run"]
    assert [r["scenario"] for r in result["rows"]] == [st[1] for st in runs]
    first, after = result["rows"][0], result["rows"][2]
    assert after["after"] == cs.C and first["after"] is None
    assert after["idle_before_s"] == pytest.approx(0.2, abs=0.15)
    assert first["mean_w"] > 0 and first["executions"] > 1000 and first["cycle_course_ms_us"]
    assert (tmp_path / "card_state.md").read_text().startswith("| t (s) |")
    out = capsys.readouterr().out
    assert cs.main(["--from-json", str(tmp_path / "card_state.json")]) == 0
    assert capsys.readouterr().out == out  # the tables come from the JSON alone


def test_committed_dataset_tables_rebuild(cs, capsys):
    for call in ("state", "prepare-1set", "prepare-4sets", "sets", "control"):
        folder = ROOT / "results" / "h200-card-state" / "gpu" / call
        assert cs.main(["--from-json", str(folder / "card_state.json")]) == 0
        assert capsys.readouterr().out == (folder / "card_state.md").read_text()


def test_committed_dataset_summary_rebuilds(cs, tmp_path):
    here = ROOT / "results" / "h200-card-state"
    calls = [
        f"{c}={here / 'gpu' / c / 'card_state.json'}"
        for c in ("state", "prepare-1set", "prepare-4sets", "sets", "control")
    ]
    assert cs.main(["--summary", str(tmp_path / "summary.csv"), *calls]) == 0
    assert (tmp_path / "summary.csv").read_text() == (here / "summary.csv").read_text()


def test_control_correction_divides_out_the_state(cs):
    """Plan "control": shapes measured right after a control whose deviation they share are corrected by it; a shape
    that does not share it (the cap-bound one) is not helped."""
    state = [0.004, -0.002, 0.001, -0.003, 0.0]
    rows = []
    for i, st in enumerate(state):
        rows.append({"scenario": cs.B1, "mean_w": 600.0 * (1 + st), "after": None if i == 0 else cs.B3})
        rows.append({"scenario": cs.B2, "mean_w": 560.0 * (1 + st) + (0.3 if i % 2 else -0.3), "after": cs.B1})
        rows.append({"scenario": cs.C, "mean_w": 690.0 + (0.5 if i % 2 else -0.5), "after": cs.B2})
    got = {g["scenario"]: g for g in cs.control_correction({"plan": "control", "rows": rows})}
    assert got[cs.B2]["corrected_sd_pct"] < 0.35 * got[cs.B2]["sd_pct"] and got[cs.B2]["correlation"] > 0.95
    assert got[cs.C]["corrected_sd_pct"] > got[cs.C]["sd_pct"]
    assert "corrected by the control" in cs.control_table({"plan": "control", "rows": rows})
    assert cs.control_table({"plan": "sets", "rows": rows}) == ""
