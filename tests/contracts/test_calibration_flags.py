"""Every calibration flag the code can raise is explained once (`contracts.calibration.CALIBRATION_FLAGS`) and in
docs/ARCHITECTURE.md."""

from __future__ import annotations

import re

from conftest import ROOT

from fingrav.contracts.calibration import CALIBRATION_FLAGS, calibration_flag_meaning


def emitted_flags() -> set[str]:
    """The flag names the calibration code appends (sensorfit and collect/calibrate)."""
    out: set[str] = set()
    for rel in ("fingrav/sensorfit.py", "fingrav/collect/calibrate.py"):
        text = (ROOT / rel).read_text()
        out |= set(re.findall(r'flags\.append\(f?"(?:\{name\}:)?([a-z_]+)"\)', text))
        out |= set(re.findall(r'flags=\["([a-z_]+)"\]', text))
    return out


def test_every_emitted_calibration_flag_is_explained() -> None:
    emitted = emitted_flags()
    assert {"steps_shorter_than_settle", "sparse_edges", "clock_residual", "no_response"} <= emitted
    assert emitted <= set(CALIBRATION_FLAGS), emitted - set(CALIBRATION_FLAGS)
    assert "settle time" in calibration_flag_meaning("memory:steps_shorter_than_settle")


def test_the_architecture_doc_lists_every_calibration_flag() -> None:
    doc = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    for flag in CALIBRATION_FLAGS:
        assert f"| `{flag}` |" in doc, flag
