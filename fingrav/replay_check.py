"""`fingrav replay --check`: does a replay reproduce a committed result?

Compares the committed summary.csv of a dataset (any format: the columns before format 3 are renamed through
`fingrav.contracts.legacy.OLD_TO_NEW`) with a replayed sweep folder's numbers under their new names: every number
of the committed file against the replay's metrics.csv (long form: every number the replay computed), every text
cell (kernel, valid, power_source, flags split into invalidating and notes, ...) against its summary.json results.
Numbers match within a relative tolerance (default 0.1 %); changes the restructuring made on purpose
(`legacy.intended_change`, `legacy.intended_flag_change`) are counted and listed apart, never silently. Takes
paths, so that it does not depend on where a replay writes its output.
"""

from __future__ import annotations

import csv
import logging
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fingrav import rawio
from fingrav.contracts import legacy
from fingrav.contracts import result as R
from fingrav.contracts.profile import ScenarioSummary
from fingrav.errors import DataError

logger = logging.getLogger(__name__)

DEFAULT_REL_TOL = 1e-3


def read_csv_rows(path: Path) -> dict[str, dict[str, str]]:
    """A CSV with a `scenario` column, by scenario."""
    if not path.is_file():
        raise DataError(f"{path}: missing")
    with open(path, newline="") as fh:
        return {r["scenario"]: r for r in csv.DictReader(fh)}


def committed_columns(path: Path) -> dict[str, dict[str, str]]:
    """A committed summary.csv by scenario, under the new column names (`legacy.new_columns` for an old one)."""
    rows = read_csv_rows(path)
    if rows and legacy.is_old_row(next(iter(rows.values()))):
        return {
            name: {k: "" if v is None else str(v) for k, v in legacy.new_columns(r).items()} for name, r in rows.items()
        }
    return rows


def replayed_columns(root: Path) -> dict[str, dict[str, Any]]:
    """Every number of a replayed sweep folder (its metrics.csv: value and CI columns by `result.ci_columns`) and
    the text cells of each scenario's result (its summary.json under profiles/, the first GPU's; else summary.csv)."""
    out: dict[str, dict[str, Any]] = {}
    metrics = root / "metrics.csv"
    if not metrics.is_file():
        raise DataError(f"{metrics}: missing (replay with this version of fingrav first)")
    with open(metrics, newline="") as fh:
        for r in csv.DictReader(fh):
            cols = out.setdefault(r["scenario"], {})
            cols[r["metric"]] = float(r["value"])
            try:
                lo, hi = R.ci_columns(r["metric"])
            except ValueError:
                continue
            for col, v in ((lo, r["ci_low"]), (hi, r["ci_high"])):
                if v != "":
                    cols[col] = float(v)
    for name, row in read_csv_rows(root / "summary.csv").items():
        cols = out.setdefault(name, {})
        cols.update({k: v for k, v in row.items() if k not in cols and R.column_kind(k) in ("str", "bool", "flags")})
        for path in (
            root / "profiles" / "gpu0" / name / "summary.json",
            *sorted(root.glob(f"cards/*/profiles/gpu0/{name}/summary.json")),
        ):
            if path.is_file():
                flat = rawio.read_model(path, ScenarioSummary).result.flat()
                cols.update({k: v for k, v in flat.items() if k not in cols and v is not None and not R.is_finite(v)})
                break
    return out


@dataclass
class CheckReport:
    """What `compare` found: cells compared, the worst relative difference, the differences beyond the tolerance
    and the intended changes (`legacy.intended_change`)."""

    scenarios: int = 0
    numbers: int = 0
    texts: int = 0
    worst_rel: float = 0.0
    worst_cell: tuple[str, str] | None = None
    differences: list[tuple[str, str, str, str]] = field(default_factory=list)
    intended: list[tuple[str, str, str, str, str]] = field(default_factory=list)
    missing_scenarios: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.differences and not self.missing_scenarios

    def lines(self, rel_tol: float) -> list[str]:
        out = [
            f"replay check: {self.scenarios} scenarios, {self.numbers} numbers and {self.texts} text cells compared; "
            f"worst relative difference {self.worst_rel:.2e}"
            + (f" ({self.worst_cell[0]} {self.worst_cell[1]})" if self.worst_cell else "")
        ]
        out += [f"missing scenario: {n}" for n in self.missing_scenarios]
        out += [f"differs: {n} {c}: committed {a!r}, replayed {b!r}" for n, c, a, b in self.differences]
        out += [
            f"intended change: {n} {c}: committed {a!r}, replayed {b!r} ({why})" for n, c, a, b, why in self.intended
        ]
        if self.ok:
            out.append(f"replay check: every number reproduced within {100 * rel_tol:g} % under its new name")
        return out


def _flags(v: Any) -> set[str]:
    return set(R.split_flags(v if isinstance(v, str) else None))


def compare(
    committed: Mapping[str, Mapping[str, str]],
    replayed: Mapping[str, Mapping[str, Any]],
    rel_tol: float = DEFAULT_REL_TOL,
    off_grid_before: bool | Collection[str] = False,
) -> CheckReport:
    """Every committed cell against the replay's (module docstring). `off_grid_before` (true: every scenario; else
    the scenarios named): the committed numbers were computed on the stamps where the replay reads the sensor's grid
    times (`committed_off_grid`), or with another sensor model than the replay's (`legacy.STAMPED_MODEL_SCENARIOS`):
    the kernel powers and the self-consistency note may change on purpose (`legacy.GRID_TIME_VALUES`)."""
    rep = CheckReport(scenarios=len(committed))
    for name, old in committed.items():
        off_grid = off_grid_before if isinstance(off_grid_before, bool) else name in off_grid_before
        new = replayed.get(name)
        if new is None:
            rep.missing_scenarios.append(name)
            continue
        for col, a in old.items():
            if a in ("", None) and R.column_kind(col) != "flags":  # an empty flag cell is a statement: none fired
                continue
            b = new.get(col)
            try:
                x = float(a)
            except ValueError:
                x = None
            if x is not None and col not in ("valid", "ssp_valid") and R.column_kind(col) not in ("str", "flags"):
                rep.numbers += 1
                why = legacy.intended_change(col, old, new, off_grid)
                y = float(b) if R.is_finite(b) else None
                if y is None and math.isnan(x):
                    continue
                rel = math.inf if y is None else (abs(y - x) / abs(x) if x else abs(y))
                if why and rel > 1e-12:  # a change made on purpose: listed, never the worst difference
                    rep.intended.append((name, col, a, str(b), why))
                    continue
                if rel > rel_tol:
                    rep.differences.append((name, col, a, str(b)))
                    continue
                if rel > rep.worst_rel:
                    rep.worst_rel, rep.worst_cell = rel, (name, col)
                continue
            rep.texts += 1
            if R.column_kind(col) == "flags":
                gone = _flags(a) - _flags(b)
                added = _flags(b) - _flags(a)
                why = legacy.intended_flag_change(gone, added, new, off_grid)
                if gone or added:
                    (
                        rep.intended.append((name, col, a, str(b), why))
                        if why
                        else rep.differences.append((name, col, a, str(b)))
                    )
            elif str(a).lower() != str(b).lower():
                why = _validity_why(col, old, new)
                (rep.intended if why else rep.differences).append(
                    (name, col, a, str(b), why) if why else (name, col, a, str(b))
                )
    return rep


def _validity_why(col: str, old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """Why a `valid` or `ssp_valid` cell differs on purpose ("" when it should not, and for any other text cell)."""
    if col == "valid":
        return legacy.intended_valid_change(old, new)
    return legacy.intended_ssp_valid_change(old, new) if col == "ssp_valid" else ""


def check(committed_csv: Path, replay_root: Path, rel_tol: float = DEFAULT_REL_TOL) -> CheckReport:
    """Compare a committed summary.csv with a replayed sweep folder (module docstring); logs the report."""
    committed = committed_columns(committed_csv)
    dataset = committed_csv.parent.name
    before = set(committed) if committed_off_grid(committed_csv.parent, replay_root) else set()
    before |= {s for d, s in legacy.STAMPED_MODEL_SCENARIOS if d == dataset}
    rep = compare(committed, replayed_columns(replay_root), rel_tol, before)
    for line in rep.lines(rel_tol):
        (logger.info if rep.ok or not line.startswith(("differs", "missing")) else logger.error)("%s", line)
    return rep


def _has_grid(calibrations: list[Path]) -> bool:
    """Whether any of these calibration files has a total sensor read on its sampling grid."""
    import json

    return any((json.loads(p.read_text()).get("sensor", {}).get("total") or {}).get("grid") for p in calibrations)


def committed_off_grid(dataset: Path, replay_root: Path) -> bool:
    """Whether the committed dataset's numbers were computed without the sensor's grid times (its calibrations,
    `dataset`/**/calibration/gpu*.json, have no grid timing: written before `fingrav.sample_grid`) while the
    replay's calibration has one."""
    committed = sorted(dataset.glob("**/calibration/gpu*.json"))
    return bool(committed) and not _has_grid(committed) and _has_grid(sorted(replay_root.glob("calibration/*.json")))


def summary_json_columns(root: Path) -> dict[str, dict[str, Any]]:
    """Every scenario's summary.json under root/profiles/gpu0 (any format) as flat columns under the new names:
    format 3 its result (`ScenarioResult.flat`), formats 1-2 their `row` renamed (`legacy.new_columns`)."""
    import json

    out: dict[str, dict[str, Any]] = {}
    for path in sorted((root / "profiles" / "gpu0").glob("*/summary.json")):
        data = json.loads(path.read_text())
        if "row" in data:
            cols = legacy.new_columns({**data["row"], "scenario": data.get("scenario")})
        else:
            cols = rawio.read_model(path, ScenarioSummary).result.flat()
        out[path.parent.name] = {
            k: "" if v is None else str(v) if isinstance(v, str | bool) else repr(v) for k, v in cols.items()
        }
    return out


def check_summaries(committed_root: Path, replay_root: Path, rel_tol: float) -> CheckReport:
    """Compare two sweep folders' summary.json files scenario by scenario (every number of the committed one under
    its new name; the simulator baselines are checked at 1e-9)."""
    new = {
        k: {c: (float(v) if _is_number(v) else v) for c, v in cols.items()}
        for k, cols in summary_json_columns(replay_root).items()
    }
    rep = compare(summary_json_columns(committed_root), new, rel_tol)
    for line in rep.lines(rel_tol):
        (logger.info if rep.ok or not line.startswith(("differs", "missing")) else logger.error)("%s", line)
    return rep


def _is_number(v: Any) -> bool:
    try:
        float(v)
    except (TypeError, ValueError):
        return False
    return v not in ("True", "False")


_CI_CELL = re.compile(r"^(-?\d+(?:\.\d+)?) \[(-?\d+(?:\.\d+)?), (-?\d+(?:\.\d+)?)\]$")


def table_differences(new: str, old: str) -> list[str]:
    """Where a markdown table rebuilt from a replay (`new`) differs from a dataset's committed one (`old`) beyond the
    CIs that later stops widened (the card-state term pooled over more cards, `legacy.CARD_STATE_VALUES`): a cell
    "value [low, high]" may keep its value and widen, a column whose header has "±" may grow, and one headed
    "covered" may turn NO into yes (a wider CI covers more); every other cell must be equal. One line per
    difference; none: the same table."""
    a, b = new.strip("\n").splitlines(), old.strip("\n").splitlines()
    if len(a) != len(b):
        return [f"{len(a)} lines replayed, {len(b)} committed"]
    head = [c.strip() for c in b[0].strip().strip("|").split("|")] if b else []
    out = []
    for n, (x, y) in enumerate(zip(a, b, strict=True)):
        cx, cy = (line.strip().strip("|").split("|") for line in (x, y))
        if len(cx) != len(cy):
            out.append(f"line {n + 1}: {len(cx)} cells replayed, {len(cy)} committed")
            continue
        for k, (u, v) in enumerate(zip(cx, cy, strict=True)):
            u, v = u.strip(), v.strip()
            col = head[k] if k < len(head) else ""
            if u != v and not _widened_cell(u, v, col):
                out.append(f"line {n + 1}, {col or k}: replayed {u!r}, committed {v!r}")
    return out


def _widened_cell(new: str, old: str, column: str) -> bool:
    """`table_differences`' rule for one cell that differs."""
    m, o = _CI_CELL.match(new), _CI_CELL.match(old)
    if m and o:
        (v1, l1, h1), (v0, l0, h0) = ([float(g) for g in x.groups()] for x in (m, o))
        return v1 == v0 and l1 <= l0 and h1 >= h0
    if "±" in column:
        try:
            return float(new) >= float(old)
        except ValueError:
            return False
    return "covered" in column.lower() and old == "NO" and new == "yes"
