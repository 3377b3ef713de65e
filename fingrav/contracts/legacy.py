"""Results written before format 3 (summary.csv / summary.json `row` of formats 1 and 2): their column names and
how each maps to the result model's (`fingrav.contracts.result`). One table, `OLD_TO_NEW` (value columns; a CI
column maps through its value column), rendered in docs/ARCHITECTURE.md ("old -> new column"); readers of old
results and `fingrav replay --check` use it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from fingrav.contracts import result as R
from fingrav.contracts.flags import BY_NAME

#: old value column -> new value column (columns not listed keep their name)
OLD_TO_NEW: Final[dict[str, str]] = {
    "ssp_power_w": "power_w",  # the headline (sustained where there is a reference run)
    "ssp_source": "power_source",
    "burst_power_w": "ssp_power_w",  # the method's SSP of the short stamped runs after idle
    "burst_vs_sustained_pct": "ssp_vs_power_pct",
    "sse_kernel_vs_ssp_pct": "sse_kernel_power_vs_ssp_pct",
    "interleaved_kernel_vs_ssp_pct": "interleaved_kernel_power_vs_ssp_pct",
    "cycle_time_us": "ssp_cycle_time_us",
    "runs_total": "ssp_runs_total",
    "runs_golden": "ssp_runs_golden",
    "lois": "ssp_lois",
    "lois_sse": "sse_lois",
    "reference_energy_power_w": "reference_counter_power_w",
    "sustained_run_s_for_max_ci": "recommended_sustained_run_s",  # a recommendation, not a measured number
    "instrumentation_cycle_pct": "ssp_cycle_vs_sustained_cycle_pct",
    "instrumentation_power_pct": "ssp_vs_unstamped_burst_pct",
    "truth_ssp_power_w": "truth_power_w",
    "truth_burst_power_w": "truth_ssp_power_w",
    "ssp_error_pct": "power_vs_truth_pct",
    "burst_error_pct": "ssp_vs_truth_pct",
    "energy_error_pct": "energy_per_exec_vs_truth_pct",
    "reference_error_pct": "reference_vs_truth_pct",
    "sse_reading_error_pct": "sse_reading_vs_truth_pct",
    "sse_kernel_power_error_pct": "sse_kernel_power_vs_truth_pct",
    "interleaved_reading_error_pct": "interleaved_reading_vs_truth_pct",
    "interleaved_kernel_power_error_pct": "interleaved_kernel_power_vs_truth_pct",
    "fleet_ssp_power_w": "fleet_power_w",
    "fleet_ssp_power_spread_pct": "fleet_power_spread_pct",
    "fleet_ssp_power_noise_spread_pct": "fleet_power_noise_spread_pct",
    "fleet_ssp_power_distinct": "fleet_power_distinct",
}
#: old columns whose content moved to two new ones: every flag -> invalidating `flags` + informational `notes`
FLAG_COLUMNS: Final = ("flags", "notes")


#: numbers whose old CI was a point printed as an interval (zero width): now the inputs' uncertainty is carried over
ZERO_WIDTH_BEFORE: Final = frozenset(
    c for m in ("throughput_tflop_s", "bandwidth_gb_s") for c in (m, *R.ci_columns(m)) if c != m
)
#: flags that no longer fire where they contradicted the row: the method SSP vs the reference run is reported as
#: ssp_vs_power_pct where the headline is the reference run (power_source sustained / sustained_stamped)
RETIRED_UNDER_SUSTAINED: Final = frozenset({"ssp_reference_mismatch"})
#: absolute numbers whose CIs carry the sensor-source term since issue 22 (`fingrav.analysis.sources`): their CIs
#: widen where the replay measures the counter against the samples (`counter_vs_samples_pct`)
SOURCE_TERM_VALUES: Final = frozenset(
    {
        "power_w",
        "energy_per_exec_mj",
        "ssp_power_w",
        "ssp_energy_per_exec_mj",
        "energy_efficiency_tflop_s_per_w",
        "energy_per_flop_pj",
        "energy_per_byte_pj",
    }
)
#: numbers whose CIs carry the card's state between runs since stop 35 (`fingrav.analysis.card_state`): the headline's
#: power and energy per execution and what is derived from the energy, where the headline comes from a reference run
#: that does not limit-cycle (the method SSP keeps its CI)
CARD_STATE_VALUES: Final = SOURCE_TERM_VALUES - {"ssp_power_w", "ssp_energy_per_exec_mj"}
#: the method SSP's numbers whose CIs carry, since stop 36, its cluster bootstrap widened for few SSP runs
#: (`fingrav.analysis.profiles.widen_ssp_ci`, `small_sample_factor`: 1.29 at 8 runs, 1.07 at 20): only wider; so
#: do the other channels' method SSPs (`fingrav.contracts.result.channel_column`)
SSP_FEW_RUNS_VALUES: Final = frozenset({"ssp_power_w", "ssp_energy_per_exec_mj"})
#: notes added since (issue 22): the method SSP's self-consistency check (`fingrav.analysis.consistency`)
ADDED_NOTES: Final = frozenset({"ssp_inconsistent"})
#: numbers whose CIs issue 22's calibration recomputed while the numbers stayed (`fingrav.analysis.sustained`
#: `drift_term_pct`: the drift beyond its noise, in quadrature; `fingrav.analysis.sources`: the sensor-source term as
#: a watt offset; since stop 33 the whole-cycle mean's CI time-weighted over cycles, `sustained._cycle_ratio_half`;
#: since stop 39 the method SSP's systematic part in quadrature, `profiles._with_systematic`): their CI columns may
#: move either way where the number itself is unchanged
RECALIBRATED_CI_VALUES: Final = SOURCE_TERM_VALUES | {"ssp_vs_power_pct"}
#: numbers whose CIs carry the placement term since issue 22 (`fingrav.analysis.placement`: the spread of the input
#: sets' execution (or cycle) times beyond noise): their CIs widen where the kernel rotated through more than one
#: input set; the SSP cycle's comparison with the sustained cycle carries it through the cycle time's CI
PLACEMENT_TERM_VALUES: Final = frozenset({"exec_time_us", "ssp_cycle_time_us", "ssp_cycle_vs_sustained_cycle_pct"})
#: numbers the kernel-power estimators give (`fingrav.analysis.kernel_power`), which since issue 22 read the samples
#: at the sensor's grid times with the timing fitted on them, where the calibration finds late stamps
#: (`fingrav.sample_grid`): they and their CIs change, and a number may become measurable or stop being so
GRID_TIME_VALUES: Final = frozenset(
    {
        "sse_kernel_power_w",
        "interleaved_kernel_power_w",
        "sse_kernel_power_vs_ssp_pct",
        "interleaved_kernel_power_vs_ssp_pct",
    }
)
#: scenarios of committed datasets whose kernel powers were computed on their stamps with the grid-time sensor model
#: (dataset, scenario): where a scenario's own stamps show no grid (`fingrav.sample_grid.fit_grid` finds none:
#: h200-sse2's 16384x16384x6144 GEMM, whose sample intervals spread 15-25 ms p10-p90), commit c78c181 reads them with
#: the stamped model, after the dataset's summary was made: its GRID_TIME_VALUES change on purpose (849.6 -> 858.0 W)
STAMPED_MODEL_SCENARIOS: Final = frozenset({("h200-sse2", "gemm-16k-16k-6k")})
#: how far a number of SENSOR_ERROR_VALUES may move (relative): the SSE's kernel power is read over its execution since
#: stop 32 (in an SSP run the launch gap after it was in its piece), which moves the H200 datasets' by <= 0.007 %
#: (gaps of a few µs)
SENSOR_ERROR_REL: Final = 1e-4
#: numbers whose CIs carry the calibrated sensor's standard errors (the kernel powers' sensor-model part, the method
#: SSP's residual transient at the lag + 2 standard errors, `fingrav.analysis.settling.residual_transient_mw`, and
#: what is compared with them), which are cluster-robust since stop 32 (`fingrav.sensorfit._param_se`: never
#: smaller than before), and the kernel powers' bootstrap part widened for few runs (`small_sample_factor`): their
#: CIs only widen, the numbers unchanged (within `SENSOR_ERROR_REL`)
SENSOR_ERROR_VALUES: Final = GRID_TIME_VALUES | frozenset(
    {"ssp_power_w", "ssp_energy_per_exec_mj", "ssp_vs_power_pct", "ssp_vs_unstamped_burst_pct"}
)
#: the method SSP's numbers whose CIs combine its systematic part in quadrature with the bootstrap since stop 39
#: (`fingrav.analysis.profiles._with_systematic`; it was added to each side): as wide or narrower, the number
#: unchanged; so do the other channels' method SSPs and the SSP against the unstamped burst, computed from its CI
SSP_QUADRATURE_VALUES: Final = frozenset({"ssp_power_w", "ssp_energy_per_exec_mj", "ssp_vs_unstamped_burst_pct"})
#: why ssp_valid may now be true where it was false: the narrower CI is within the validity limit
SSP_VALID_GAINED: Final = (
    "ssp_valid: the method SSP's CI, its systematic part now in quadrature (stop 39), is within the validity limit; "
    "the number unchanged"
)
#: the limit cycle's own numbers, which change where a "cycle" shorter than half the median one joins its neighbour
#: (stop 33: `fingrav.analysis.sustained._merge_short_cycles`); the whole-cycle mean (the headline) does not
LIMIT_CYCLE_VALUES: Final = frozenset(
    {"limit_cycles", "limit_cycle_period_ms", "limit_cycle_duty_pct", "limit_cycle_high_w", "limit_cycle_low_w"}
)
#: numbers derived from the headline CI's width (a recommendation, not a measurement)
FROM_CI_WIDTH: Final = frozenset({"recommended_sustained_run_s"})
#: the flag that can stop firing when a CI narrows (the validity limit analysis.max_ci_pct)
CI_WIDTH_FLAGS: Final = frozenset({"imprecise"})
#: why it stopped firing
IMPRECISE_GONE: Final = (
    "imprecise no longer fires: the headline CI recalibrated (issue 22; stop 33: the whole-cycle CI over cycles) is "
    "within analysis.max_ci_pct"
)


def _card_state_widened(column: str, committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> bool:
    """A CI of `CARD_STATE_VALUES` only wider, its number unchanged, in a row whose headline is sustained and does not
    limit-cycle: where `fingrav.analysis.card_state` puts its term."""
    base = R.value_column_of_ci(column)
    notes = f"{replayed.get('flags') or ''};{replayed.get('notes') or ''}"
    sustained = str(replayed.get("power_source") or "").startswith("sustained")
    if base not in CARD_STATE_VALUES or not sustained or "power_limit_cycling" in notes:
        return False
    return _same_number(committed.get(base), replayed.get(base)) and _only_wider(column, committed, replayed)


def intended_change(
    column: str, committed: Mapping[str, Any], replayed: Mapping[str, Any], off_grid_before: bool = False
) -> str:
    """Why a number differs on purpose ("" when it should not): a CI that was zero width; a CI of an absolute number
    widened by the sensor-source term (only wider, and only where the replay measured the term); the execution
    time's CI widened by the placement term (only wider, the number unchanged); a CI carrying the calibrated sensor's
    standard errors or a kernel power's bootstrap part, widened since stop 32 (`SENSOR_ERROR_VALUES`); a kernel power
    read at the sensor's grid times where the committed one was computed on the stamps (`off_grid_before`); the
    headline's CI widened by the card's state between runs (`_card_state_widened`); the method SSP's CI widened
    for few SSP runs (`SSP_FEW_RUNS_VALUES`, only wider, the number unchanged) and its systematic part combined in
    quadrature (`ssp_quadrature`, either way, the number unchanged); the limit
    cycle's own numbers where a short "cycle" joined its neighbour (`LIMIT_CYCLE_VALUES`, the headline unchanged)."""
    if column in ZERO_WIDTH_BEFORE:
        base = R.value_column_of_ci(column) or column
        lo, hi = R.ci_columns(base)
        if committed.get(lo) not in (None, "") and committed.get(lo) == committed.get(hi):
            return "was a zero-width CI: the cycle's uncertainty is now carried over"
    if _card_state_widened(column, committed, replayed):
        return "the card's state between runs in the headline's CI (stop 35): only wider; the number unchanged"
    base = R.value_column_of_ci(column)
    few = _method_ssp_unchanged(base, SSP_FEW_RUNS_VALUES, committed, replayed)
    if few and _only_wider(column, committed, replayed):
        return (
            "the method SSP's bootstrap widened for few SSP runs (stop 36; with the sensor-source term where the "
            "replay measures it): only wider; the number unchanged"
        )
    if ssp_quadrature(column, committed, replayed):
        return (
            "the method SSP's systematic part in quadrature with its bootstrap (stop 39): as wide or narrower, with "
            "what earlier stops widened; the number unchanged"
        )
    source = base in SOURCE_TERM_VALUES and R.finite(replayed.get("counter_vs_samples_pct"))
    if source and _only_wider(column, committed, replayed):
        return "the sensor-source term (|counter_vs_samples_pct|) in the CI: only wider"
    if base in RECALIBRATED_CI_VALUES and _same_number(committed.get(base), replayed.get(base)):
        return (
            "the CI recalibrated (issue 22: drift beyond its noise in quadrature, sensor-source term in W; stop 33: "
            "the whole-cycle CI time-weighted over cycles; stop 39: the method SSP's systematic part in quadrature); "
            "the number unchanged"
        )
    placed = base in PLACEMENT_TERM_VALUES and _same_number(committed.get(base), replayed.get(base))
    if placed and _only_wider(column, committed, replayed):
        return "the placement term (the input sets' spread) in the CI: only wider; the number unchanged"
    wider = base in SENSOR_ERROR_VALUES and _same_number(committed.get(base), replayed.get(base), SENSOR_ERROR_REL)
    if wider and _only_wider(column, committed, replayed):
        return (
            "the calibration's standard errors cluster-robust and the kernel powers' bootstrap widened for few runs "
            "(stop 32): only wider; the number unchanged (within 0.01 %: the SSE read over its execution)"
        )
    if off_grid_before and (base or column) in GRID_TIME_VALUES:
        return "the kernel power's sample times or sensor model changed (issue 22: fingrav.sample_grid; legacy.py)"
    if (base or column) in LIMIT_CYCLE_VALUES and _same_number(committed.get("power_w"), replayed.get("power_w")):
        return "a brief release within a clamp no longer makes a cycle of its own (stop 33); the headline unchanged"
    if column in FROM_CI_WIDTH and _same_number(committed.get("power_w"), replayed.get("power_w")):
        return "derived from the headline CI's width, which issue 22's calibration changed; the headline unchanged"
    return ""


def ssp_quadrature(column: str, committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> bool:
    """A CI bound of `SSP_QUADRATURE_VALUES` or of another channel's method SSP, the number unchanged: where the
    stop-39 quadrature moves it (either way: earlier stops' terms may widen the same CI)."""
    return _method_ssp_unchanged(R.value_column_of_ci(column), SSP_QUADRATURE_VALUES, committed, replayed)


def _method_ssp_unchanged(
    base: str | None, values: frozenset[str], committed: Mapping[str, Any], replayed: Mapping[str, Any]
) -> bool:
    """Whether `base` is one of `values` or another channel's method SSP (`result.channel_of_column`), its number
    the same in both."""
    ssp = base in values or (base is not None and R.channel_of_column(base) is not None)
    return ssp and _same_number(committed.get(base), replayed.get(base))


def intended_ssp_valid_change(committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> str:
    """Why `ssp_valid` differs on purpose ("" when it should not): false before, true now, the method SSP unchanged
    and its CI narrower (`SSP_VALID_GAINED`)."""
    if str(committed.get("ssp_valid")).lower() != "false" or str(replayed.get("ssp_valid")).lower() != "true":
        return ""
    if not _same_number(committed.get("ssp_power_w"), replayed.get("ssp_power_w")):
        return ""
    lo, hi = R.ci_columns("ssp_power_w")
    try:
        narrower = float(replayed[hi]) - float(replayed[lo]) < float(committed[hi]) - float(committed[lo])
    except (KeyError, TypeError, ValueError):
        return ""
    return SSP_VALID_GAINED if narrower else ""


def _only_wider(column: str, committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> bool:
    """Whether the CI bound `column` moved outwards (a low bound down, a high bound up) or stayed; False when either
    side is not a number."""
    try:
        old, new = float(committed[column]), float(replayed[column])
    except (KeyError, TypeError, ValueError):
        return False
    return (new <= old) if "_ci_low_" in column else (new >= old)


def _same_number(a: Any, b: Any, rel: float = 1e-9) -> bool:
    """Both finite and equal within `rel` (relative)."""
    try:
        x, y = float(a), float(b)
    except (TypeError, ValueError):
        return False
    return math.isfinite(x) and math.isfinite(y) and abs(x - y) <= rel * max(abs(x), abs(y), 1e-300)


def intended_valid_change(committed: Mapping[str, Any], replayed: Mapping[str, Any]) -> str:
    """Why `valid` differs on purpose ("" when it should not): a row invalid only for `imprecise` whose headline
    (unchanged) now has a CI within the limit, after issue 22's calibration."""
    old = set(R.split_flags(committed.get("flags") or None))
    new = set(R.split_flags(replayed.get("flags") if isinstance(replayed.get("flags"), str) else None))
    if old and old <= CI_WIDTH_FLAGS and not new and _same_number(committed.get("power_w"), replayed.get("power_w")):
        return IMPRECISE_GONE
    return ""


def intended_flag_change(
    gone: set[str], added: set[str], replayed: Mapping[str, Any], off_grid_before: bool = False
) -> str:
    """Why the flags differ on purpose ("" when they should not); `off_grid_before` as in `intended_change`."""
    if gone and gone <= CI_WIDTH_FLAGS and not added:
        return IMPRECISE_GONE
    if off_grid_before and gone and gone <= ADDED_NOTES and not added:
        return "the note ssp_inconsistent no longer fires: the self-consistency check reads the sensor's grid times"
    sustained = replayed.get("power_source") in ("sustained", "sustained_stamped")
    if gone and not (gone <= RETIRED_UNDER_SUSTAINED and sustained):
        return ""
    if added and added <= ADDED_NOTES:
        return "the note ssp_inconsistent: the method SSP's self-consistency check (issue 22)" + (
            "; ssp_reference_mismatch no longer fires where the headline is the reference run" if gone else ""
        )
    if not added and gone:
        return "ssp_reference_mismatch no longer fires where the headline is the reference run"
    return ""


def new_column(old: str) -> str:
    """The new name of an old summary column (CI columns through their value column)."""
    m = re.match(r"^(combined_|rank\d+_)(.+)$", old)
    if m:
        return m.group(1) + new_column(m.group(2))
    base = R.value_column_of_ci(old)
    if base is None:
        return OLD_TO_NEW.get(old, old)
    new = OLD_TO_NEW.get(base, base)
    lo, hi = R.ci_columns(new)
    return lo if "_ci_low_" in old else hi


def new_columns(row: Mapping[str, Any]) -> dict[str, Any]:
    """An old row under the new names; its `flags` (every flag) split into `flags` and `notes` by the registry."""
    out = {new_column(k): v for k, v in row.items()}
    if "burst_power_w" not in row and row.get("ssp_source") in (None, "", "burst") and "ssp_power_w" in row:
        # format 1 (no reference run, no burst column) or a burst headline: the SSP is the method's SSP
        for col in ("ssp_power_w", *R.ci_columns("ssp_power_w")):  # the same names then and now
            out[col] = row.get(col)
        out.setdefault("power_source", "burst")
    if "flags" in row and "notes" not in row:
        every = R.split_flags(row.get("flags"))
        out["flags"] = R.FLAG_SEPARATOR.join(f for f in every if f in BY_NAME and BY_NAME[f].invalidates)
        out["notes"] = R.FLAG_SEPARATOR.join(f for f in every if not (f in BY_NAME and BY_NAME[f].invalidates))
    return out


def is_old_row(row: Mapping[str, Any]) -> bool:
    """Whether a summary row (or a summary.csv header) is in the names before format 3."""
    if "power_w" in row or "power_source" in row:  # every format-3 row has them
        return False
    return any(c in row for c in ("ssp_power_w", "ssp_source", "runs_total", "lois"))


def result_from_old_row(row: Mapping[str, Any]) -> R.ScenarioResult:
    """The result model of an old summary.json `row` (summary.csv row): renamed, then `result.unflatten`; the
    method SSP's validity and the old derived numbers without a column stay unknown (defaults)."""
    return R.unflatten(new_columns(row), units_method="format 2 summary")


def markdown_table() -> str:
    """The old -> new column table as docs/ARCHITECTURE.md shows it (a test keeps them equal)."""
    lines = ["| old column (format 1-2) | new column (format 3) |", "|---|---|"]
    lines += [f"| `{old}` | `{new}` |" for old, new in OLD_TO_NEW.items()]
    lines.append("| `flags` (every flag) | `flags` (invalidating) + `notes` (informational) |")
    lines.append("| `<col>_ci_low_<unit>` / `<col>_ci_high_<unit>` | those of the new value column |")
    lines.append("| `rank<k>_<col>`, `combined_<col>` | `rank<k>_<new col>`, `combined_<new col>` (metrics table) |")
    return "\n".join(lines)
