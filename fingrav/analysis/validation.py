"""Validation against the simulator's ground truth (truth parquet, `fingrav.contracts.tables.RAW["truth"]`).

Truth of a group (groups as in profiles.group_exprs: SSP truth = the SSP-tail executions of golden SSP runs,
SSE truth = the SSE executions of golden runs of both kinds, like the measured numbers) is **time-weighted**:
the true energy of those executions' cycles (start of an execution to the start of the next in the same
run; start to end for a run's last) over their total duration, pooled over the golden runs. That is what a
sensor integrates and what a user pays for; an unweighted mean of per-cycle powers reads high when launch
gaps vary. The truth file need not hold every execution (the collector writes only those that matter: SSE,
first, SSP tail); a group without truth rows has no truth. The energy truth matches the measured energy per
execution (SSP cycle power x SSP cycle time): the mean true energy of the SSP cycles that have a successor
(given the host-clock executions; else of every SSP cycle). Errors are signed, in % of truth:
(measured - truth) / truth * 100. The reference run's settled power is validated against the SSP truth (both
are the steady-state back-to-back cycle power). The SSE and interleaved numbers have two truths each (`validate`):
the true kernel power, and the truth of the sensor reading (the expected reading at the same samples).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import polars as pl

from fingrav.analysis.profiles import GROUPS, group_exprs
from fingrav.contracts.plan import Plan
from fingrav.contracts.roles import SSE, TOTAL
from fingrav.contracts.units import MJ_PER_MW_NS

logger = logging.getLogger(__name__)


def truth_by_group(
    truth: pl.DataFrame, binned: pl.DataFrame, plan: Plan, host_execs: pl.DataFrame | None = None
) -> pl.DataFrame:
    """channel, group, power_mw (time-weighted: sum of cycle energies / sum of cycle lengths), energy_mj (mean
    execution energy, start to end), cycle_energy_mj (mean true cycle energy of the executions with a
    successor; every execution without host_execs), pooled over the golden runs.

    binned: bin-stage output (run, golden and phase)."""
    golden = binned.filter(pl.col("golden")).select(pl.col("run").cast(pl.Int32), pl.col("phase").cast(pl.String))
    t = (
        truth.lazy()
        .with_columns(pl.col("run").cast(pl.Int32), pl.col("exec_index").cast(pl.Int32))
        .join(golden.lazy(), on="run", how="inner")
    )
    if host_execs is not None:
        nxt = host_execs.lazy().select(
            pl.col("run").cast(pl.Int32), pl.col("segment").cast(pl.String), "exec_index", "has_next"
        )
        t = t.join(nxt, on=["run", "segment", "exec_index"], how="left").with_columns(
            pl.col("has_next").fill_null(False)
        )
    else:
        t = t.with_columns(has_next=pl.lit(True))
    groups = group_exprs(plan, "phase")
    label = pl.lit(None, dtype=pl.String)
    for g in reversed(GROUPS):  # first matching group in GROUPS order
        label = pl.when(groups[g]).then(pl.lit(g)).otherwise(label)
    t = t.with_columns(group=label).collect()

    def by_group(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.group_by("channel", "group").agg(
            power_mw=pl.col("cycle_energy_mj").sum() / pl.col("cycle_ns").sum() / MJ_PER_MW_NS,
            energy_mj=pl.col("energy_mj").mean(),
            cycle_energy_mj=pl.col("cycle_energy_mj").filter(pl.col("has_next")).mean(),
        )

    out = by_group(t.filter(pl.col("group").is_not_null()))
    # groups overlap only in edge cases (sse inside the SSP tail, first == sse): such a group lost
    # rows to the label precedence above and is recomputed on its own
    for g in GROUPS:
        n_member, n_label = t.select(groups[g].sum(), (pl.col("group") == g).sum()).row(0)
        if n_member != n_label:
            sub = t.filter(groups[g]).with_columns(group=pl.lit(g))
            out = pl.concat([out.filter(pl.col("group") != g), by_group(sub)])
    return out.select("channel", "group", "power_mw", "energy_mj", "cycle_energy_mj").sort("channel", "group")


def reading_truth_by_group(
    reading_truth: pl.DataFrame, lois: pl.DataFrame, plan: Plan, delay_ns: int
) -> dict[str, float]:
    """{group: mW}: the truth of a sensor *reading* per statistic group of the total channel: the mean of the
    expected readings (`reading_truth`: noise-free, averaged over the acquisition jitter; raw sample clock) of
    exactly the golden LOIs whose mean is the measured reading (LOI times are delay-corrected: the raw stamp is
    t_ns + delay_ns)."""
    groups = group_exprs(plan, "phase")
    clean = (
        reading_truth.lazy()
        .filter(pl.col("channel") == TOTAL)
        .select(pl.col("t_ns").cast(pl.Int64), clean_mw=pl.col("power_mw"))
    )
    base = (
        lois.lazy()
        .filter(pl.col("golden") & (pl.col("channel") == TOTAL))
        .with_columns(raw_t=pl.col("t_ns").cast(pl.Int64) + int(delay_ns))
        .join(clean, left_on="raw_t", right_on="t_ns", how="inner")
    )
    out: dict[str, float] = {}
    for g in ("ssp", "sse", "first"):
        v = base.filter(groups[g]).select(pl.col("clean_mw").mean()).collect().item()
        if v is not None:
            out[g] = float(v)
    return out


def _err(measured: float | None, true: float | None) -> float | None:
    if measured is None or true is None or true == 0:
        return None
    return (measured - true) / true * 100.0


@dataclass(frozen=True)
class Validation:
    """The simulator's truths (W, mJ; `groups` / `reading_groups` mW) and the signed errors of the measured
    numbers (% of truth; None where not available) of one scenario (`validate`), under the result's names
    (`contracts.result.Truth`: truth_power_w is the headline's truth, truth_ssp_power_w the method SSP's)."""

    groups: dict[str, dict[str, float]]
    reading_groups: dict[str, float]
    truth_power_w: float | None
    truth_sse_kernel_power_w: float | None
    truth_interleaved_kernel_power_w: float | None
    truth_sse_reading_w: float | None
    truth_interleaved_reading_w: float | None
    truth_energy_per_exec_mj: float | None
    truth_exec_energy_mj: float | None
    energy_truth: str
    power_vs_truth_pct: float | None
    sse_reading_vs_truth_pct: float | None
    sse_kernel_power_vs_truth_pct: float | None
    interleaved_reading_vs_truth_pct: float | None
    interleaved_kernel_power_vs_truth_pct: float | None
    energy_per_exec_vs_truth_pct: float | None
    reference_vs_truth_pct: float | None
    truth_ssp_power_w: float | None
    ssp_vs_truth_pct: float | None


def _sse_kernel_truth(
    truth: pl.DataFrame, binned: pl.DataFrame, plan: Plan, host_execs: pl.DataFrame | None, pooled: float | None
) -> float | None:
    """The true SSE kernel power (mW): the time-weighted power of the SSE of the golden SSE runs, the execution
    that the name means (METHOD.md: an SSE profile's runs are the warm-ups + 1). Their SSE is their last execution,
    so its cycle is the execution itself. The statistics' "sse" group also holds the SSP runs' execution at the
    SSE's index (`profiles.group_exprs`: more LOIs for the readings), whose cycle reaches to the next execution's
    start: pooled into this truth, their launch gaps (idle power) pulled it 0.3-0.9 % below the SSE's own power on
    the base-run matrix's devices (launch gaps of 20-100 µs), while the estimate reads the SSE runs' SSE against
    their base runs. `pooled`: the "sse" group's truth, kept where no golden SSE run has an SSE."""
    own = binned.filter(pl.col("phase") == SSE)
    if own.filter(pl.col("golden")).height == 0:
        return pooled
    hit = truth_by_group(truth, own, plan, host_execs).filter((pl.col("channel") == TOTAL) & (pl.col("group") == "sse"))
    value = hit["power_mw"].item() if hit.height else None
    return float(value) if value is not None else pooled


def _truth_groups(tb: pl.DataFrame) -> dict[str, dict[str, float]]:
    """{channel: {group: true power (mW)}} of `truth_by_group`'s rows with a power."""
    groups: dict[str, dict[str, float]] = {}
    for row in tb.iter_rows(named=True):
        if row["power_mw"] is not None:
            groups.setdefault(row["channel"], {})[row["group"]] = float(row["power_mw"])
    return groups


def _log(out: Validation) -> None:
    """One log line with the headline's, the energy's and the SSE's errors against their truths."""
    shown = {
        k: "n/a" if getattr(out, k) is None else f"{getattr(out, k):+.3f} %"
        for k in (
            "power_vs_truth_pct",
            "energy_per_exec_vs_truth_pct",
            "sse_reading_vs_truth_pct",
            "sse_kernel_power_vs_truth_pct",
        )
    }
    logger.info(
        "validation: SSP error %s, energy error %s, SSE reading error %s, SSE kernel power error %s",
        shown["power_vs_truth_pct"],
        shown["energy_per_exec_vs_truth_pct"],
        shown["sse_reading_vs_truth_pct"],
        shown["sse_kernel_power_vs_truth_pct"],
    )


def validate(
    truth: pl.DataFrame,
    binned: pl.DataFrame,
    plan: Plan,
    power_mw: float | None,
    sse_reading_mw: float | None,
    energy_per_exec_mj: float | None,
    interleaved_reading_mw: float | None = None,
    host_execs: pl.DataFrame | None = None,
    reference_power_mw: float | None = None,
    *,
    sse_kernel_mw: float | None = None,
    interleaved_kernel_mw: float | None = None,
    reading_truth: pl.DataFrame | None = None,
    lois: pl.DataFrame | None = None,
    delay_ns: int = 0,
    ssp_power_mw: float | None = None,
    sustained_run: int | None = None,
) -> Validation:
    """Truth numbers and signed errors (% of truth). Powers in mW, energy in mJ.

    Two truths for the SSE and the interleaved execution: the *kernel power* (time-weighted true power of those
    executions, `truth_by_group`) validates the kernel-power estimates (sse_kernel_mw, interleaved_kernel_mw);
    the *reading* truth (`reading_truth_by_group`: the expected reading at the same LOIs; needs reading_truth,
    lois and delay_ns) validates the sensor readings (sse_reading_mw, interleaved_reading_mw).

    sustained_run: the reference run whose sustained power is the headline (`analysis.sustained.headline`); its
    truth row (the simulator's sustained truth: whole limit cycles, no stamps) is then the headline power's
    (power_mw: truth_power_w, power_vs_truth_pct) and energy truth, and the SSP-tail truth validates the method SSP
    (ssp_power_mw: truth_ssp_power_w, ssp_vs_truth_pct).

    host_execs: loi.host_executions output; with it the energy truth is the true SSP cycle energy
    (see the module docstring), without it the execution energy of the truth file.
    reference_power_mw: the reference run's settled power, compared with the headline power's truth.
    Returns the `Validation` ("groups": {channel: {group: truth_mw}}, "reading_groups": {group: mW}; energy_truth
    "cycle" | "execution"; None where not available)."""
    tb = truth_by_group(truth, binned, plan, host_execs)
    groups = _truth_groups(tb)

    def total(g: str, col: str = "power_mw") -> float | None:
        hit = tb.filter((pl.col("channel") == TOTAL) & (pl.col("group") == g))
        v = hit[col].item() if hit.height else None
        return float(v) if v is not None else None

    t_power, t_sse = total("ssp"), _sse_kernel_truth(truth, binned, plan, host_execs, total("sse"))
    t_first = total("first") if plan.predecessor_count > 0 else None
    t_exec_energy = total("ssp", "energy_mj")
    t_cycle_energy = total("ssp", "cycle_energy_mj")
    t_energy = t_cycle_energy if t_cycle_energy is not None else t_exec_energy
    t_ssp = t_power
    if sustained_run is not None:
        hit = truth.filter((pl.col("run") == sustained_run) & (pl.col("channel") == TOTAL))
        if hit.height:
            t_power = float(hit["power_mw"][0])
            t_energy = float(hit["energy_mj"][0])
    readings: dict[str, float] = {}
    if reading_truth is not None and lois is not None:
        readings = reading_truth_by_group(reading_truth, lois, plan, delay_ns)
    r_sse = readings.get("sse")
    r_first = readings.get("first") if plan.predecessor_count > 0 else None
    out = Validation(
        **{
            "groups": {ch: {g: v for g, v in d.items() if g in GROUPS} for ch, d in groups.items()},
            "truth_power_w": t_power / 1e3 if t_power is not None else None,
            "truth_sse_kernel_power_w": t_sse / 1e3 if t_sse is not None else None,
            "truth_interleaved_kernel_power_w": t_first / 1e3 if t_first is not None else None,
            "reading_groups": readings,
            "truth_sse_reading_w": r_sse / 1e3 if r_sse is not None else None,
            "truth_interleaved_reading_w": r_first / 1e3 if r_first is not None else None,
            "truth_energy_per_exec_mj": t_energy,
            "truth_exec_energy_mj": t_exec_energy,
            "energy_truth": "cycle" if t_cycle_energy is not None else "execution",
            "power_vs_truth_pct": _err(power_mw, t_power),
            "sse_reading_vs_truth_pct": _err(sse_reading_mw, r_sse),
            "sse_kernel_power_vs_truth_pct": _err(sse_kernel_mw, t_sse),
            "interleaved_reading_vs_truth_pct": _err(interleaved_reading_mw, r_first),
            "interleaved_kernel_power_vs_truth_pct": _err(interleaved_kernel_mw, t_first),
            "energy_per_exec_vs_truth_pct": _err(energy_per_exec_mj, t_energy),
            "reference_vs_truth_pct": _err(reference_power_mw, t_power),
            "truth_ssp_power_w": t_ssp / 1e3 if t_ssp is not None else None,
            "ssp_vs_truth_pct": _err(ssp_power_mw, t_ssp),
        }
    )
    _log(out)
    return out
