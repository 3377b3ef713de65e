"""A large analyzed sweep made cheaply from a small one, for the report's scale test and benchmark: each analyzed
scenario (summary.json, lois.parquet, binned parquet) copied under new names until there are `n`, with the
scenario's name rewritten inside its summary. The calibration and the raw data of the first scenario (for the
timeline figures) come along. Nothing is measured or analyzed again: a report of `n` rows at the cost of copies."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path

from fingrav.layout import SweepLayout


def _copy_summary(src: Path, dst: Path, name: str) -> None:
    """summary.json with the scenario's name set to `name` (top level and in the result's labels)."""
    data = json.loads(src.read_text(encoding="utf-8"))
    data["scenario"] = name
    data["result"]["labels"]["scenario"] = name
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(json.dumps(data), encoding="utf-8")


def clone_scenarios(src: SweepLayout, dst: SweepLayout, names: Sequence[str], n: int) -> list[str]:
    """Fill `dst` with `n` analyzed scenarios cycled from `names` of `src` (named `<name>-c<k>`); return their
    names in order. GPU 0 only."""
    if not names or n < 1:
        raise ValueError("clone_scenarios needs at least one source scenario and n >= 1")
    if src.calibration_json().exists():
        dst.calibration_json().parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src.calibration_json(), dst.calibration_json())
    raw = src.scenario_dir(names[0])
    if raw.is_dir():  # the timeline figures read one scenario's raw data
        shutil.copytree(raw, dst.scenario_dir(f"{names[0]}-c0"), dirs_exist_ok=True)
    out = []
    for k in range(n):
        base = names[k % len(names)]
        name = f"{base}-c{k}"
        _copy_summary(src.summary_json(base), dst.summary_json(name), name)
        shutil.copyfile(src.lois(base), dst.lois(name))
        if src.binned(base).exists():
            dst.binned(name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src.binned(base), dst.binned(name))
        out.append(name)
    return out
