"""experiments/fidelity_matrix.py's calibration figures (|error| / CI half-width percentiles, the method SSP on its
own validity, the self-consistency counts) and experiments/reference_coverage.py's comparison, on made-up rows."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "experiments" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _row(rng: np.random.Generator, truth: float, half: float, err_sd: float) -> dict:
    v = truth + rng.normal(0.0, err_sd)
    return {
        "valid": True,
        "ssp_valid": True,
        "power_w": v,
        "power_ci_low_w": v - half,
        "power_ci_high_w": v + half,
        "truth_power_w": truth,
        "ssp_power_w": v,
        "ssp_power_ci_low_w": v - half,
        "ssp_power_ci_high_w": v + half,
        "truth_ssp_power_w": truth,
        "ssp_vs_truth_pct": (v - truth) / truth * 100.0,
        "ssp_consistent": bool(rng.random() < 0.9),
    }


@pytest.mark.parametrize("seed", range(3))
def test_a_calibrated_ci_reads_about_one_third_at_p50_and_one_at_p95(seed: int) -> None:
    fm = _load("fidelity_matrix")
    rng = np.random.default_rng(seed)
    sd = float(rng.uniform(0.5, 5.0))
    rows = [_row(rng, 500.0, 1.96 * sd, sd) for _ in range(4000)]
    assert fm._ratio_pct(rows, "power_w", 50) == pytest.approx(0.674 / 1.96, abs=0.03)
    assert fm._ratio_pct(rows, "power_w", 95) == pytest.approx(1.0, abs=0.06)
    wide = [_row(rng, 500.0, 2 * 1.96 * sd, sd) for _ in range(4000)]  # twice as wide as the data need
    assert fm._ratio_pct(wide, "power_w", 95) == pytest.approx(0.5, abs=0.04)
    m = fm._method_ssp(rows)
    assert m["method_ssp_valid"] == 4000 and m["method_ssp_ci_coverage"] == pytest.approx(0.95, abs=0.015)
    assert m["ssp_consistency_tested"] == 4000
    assert m["ssp_consistency_failed"] == sum(r["ssp_consistent"] is False for r in rows)


def test_reference_coverage_compare() -> None:
    rc = _load("reference_coverage")
    peers = sys.modules["peers"]
    fg = peers.ToolResult("k", "fingrav", power_w=500.0, ci_low_w=495.0, ci_high_w=504.0, cycle_us=10.0)
    near = peers.ToolResult("k", "reference", power_w=503.0, ci_low_w=500.0, ci_high_w=506.0, cycle_us=10.1)
    far = peers.ToolResult("k", "reference", power_w=510.0, ci_low_w=508.0, ci_high_w=512.0, cycle_us=10.0)
    c = rc.compare(fg, near)
    assert c["covered"] and c["diff_pct"] == pytest.approx(-0.5964, abs=1e-3) and c["diff_over_combined"] < 1
    f = rc.compare(fg, far)
    assert f["covered"] is False and f["diff_over_combined"] == pytest.approx(10.0 / np.hypot(4.0, 2.0))
    assert rc.compare(peers.ToolResult("k", "fingrav", power_w=500.0), near) == {"covered": None}


def _cycling_reference(cycles: int) -> dict:
    """A peers.json reference row whose settled samples cycled (`limit_cycle` as peers.py stores it)."""
    lc = {"cycles": cycles, "mean_w": {"value": 690.5, "ci_low": 688.0, "ci_high": 693.0}}
    return {"kernel": "k", "tool": "reference", "status": "ok", "power_w": 694.0, "cycle_us": 10.0,
            "detail": {"limit_cycle": lc}}  # fmt: skip


def test_reference_coverage_reads_a_cycling_reference_over_whole_cycles() -> None:
    rc = _load("reference_coverage")
    three = rc.whole_cycle_reference(_cycling_reference(3))
    assert three.tool == rc.WHOLE and three.power_w == 690.5 and (three.ci_low_w, three.ci_high_w) == (688.0, 693.0)
    two = rc.whole_cycle_reference(_cycling_reference(2))  # unbiased, but too few cycles for its own t-interval
    assert two.power_w == 690.5 and two.ci_low_w is None and two.ci_high_w is None
    assert rc.whole_cycle_reference(_cycling_reference(1)) is None
    steady = dict(_cycling_reference(3), detail={"limit_cycle": None})
    assert rc.whole_cycle_reference(steady) is None
    assert rc.whole_cycle_reference(dict(_cycling_reference(3), tool="zeus")) is None


def test_reference_coverage_counts_the_whole_cycle_row_in_place_of_the_window(tmp_path: Path) -> None:
    rc = _load("reference_coverage")
    peers = sys.modules["peers"]
    fg = peers.ToolResult("k", "fingrav", power_w=690.0, ci_low_w=687.0, ci_high_w=693.0, cycle_us=10.0,
                          detail={"valid": "true"})  # fmt: skip
    rc.read_fingrav_summary = lambda *_: {"k": fg}
    (tmp_path / "ds" / "peers").mkdir(parents=True)
    doc = {"meta": {"labels": {"k": "gemm"}}, "results": [_cycling_reference(3)]}
    (tmp_path / "ds" / "peers" / "peers.json").write_text(__import__("json").dumps(doc))
    rows = rc.rows(tmp_path, "ds")
    assert [(r["tool"], r["counted"], r["covered"]) for r in rows] == [
        ("reference", False, False),
        (rc.WHOLE, True, True),
    ]
    md = rc.markdown(rows)
    assert "settled window, every kernel) (valid rows, same cycle time): headline CI covers the value in 0 of 1" in md
    assert "else the settled window) (valid rows, same cycle time): headline CI covers the value in 1 of 1" in md
