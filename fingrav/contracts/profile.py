"""profiles/gpu<k>/<scenario>/summary.json: everything the differentiate stage computed for one scenario on
one GPU, as one typed result shared by the producer (`fingrav.analysis.differentiate`) and its consumers
(the report, combine, the exports). Powers in mW (`*_mw`), times in ns (`*_ns`), energies in mJ (`*_mj`);
`result` is the scenario's typed result (`fingrav.contracts.result`: W, µs, mJ, %), which summary.csv and the
metrics table are derived from. Format 2 files (a `row` of old columns) are read through
`fingrav.contracts.legacy`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fingrav.contracts import RESULT_FORMAT_VERSION
from fingrav.contracts.binning import BinningSummary
from fingrav.contracts.plan import Plan
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.result import Estimate, ScenarioResult
from fingrav.contracts.sensor import SensorSummary
from fingrav.contracts.work import Work


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FitBand(_Model):
    """The pointwise CI band of a TOI fit (`fingrav.analysis.profiles.fit_band`): at each toi_frac of a grid over
    the execution (0..1), the band's low and high power (mW) at `level`, from a cluster bootstrap over the golden
    runs that re-fits the polynomial at the fit's degree in every replicate (LOIs of one run are correlated: runs,
    not LOIs, are the independent units), widened for few runs. runs: runs with LOIs; replicates: the bootstrap
    replicates whose fit could be solved."""

    toi_frac: list[float]
    ci_low_mw: list[float]
    ci_high_mw: list[float]
    level: float
    runs: int
    replicates: int
    method: str = "cluster_bootstrap_refit"


ROLE_STATS_METHOD = "mean of the golden LOIs; CI: cluster bootstrap over runs (+ systematic parts for the SSP)"


class RoleStats(_Model):
    """The LOIs of one role (or statistic group) on one channel: mean power, cluster-bootstrap CI, counts, the
    TOI fit (numpy.polyfit coefficients, highest power first, x = toi_frac, y = power_mw) and its pointwise CI
    band (None without a fit or with LOIs from fewer than 2 runs). `power`: the mean power with its CI (mW); a
    summary written before it (`mean_mw`, `ci_low_mw`, `ci_high_mw`) is read into it."""

    power: Estimate = Estimate(unit="mW", method=ROLE_STATS_METHOD)
    lois: int = 0
    lois_by_phase: dict[str, int] = {}
    runs_with_lois: int = 0
    fit_coeffs: list[float] | None = None
    fit_band: FitBand | None = None
    truth_mw: float | None = None  # simulator
    # SSP only: what the CI is made of (bootstrap interval over runs, + the lag bias of a tail trend) and the
    # tail's trend test (`fingrav.analysis.settling`)
    ci_components: dict[str, float | None] | None = None
    tail_trend: dict[str, float | bool | None] | None = None

    @model_validator(mode="before")
    @classmethod
    def _power_from_mw_fields(cls, data: Any) -> Any:
        """The mean and CI of a summary written before `power` (mW fields) as the one value-with-CI shape."""
        if not isinstance(data, dict) or not {"mean_mw", "ci_low_mw", "ci_high_mw"} & set(data):
            return data
        data = dict(data)
        mw = [data.pop(k, None) for k in ("mean_mw", "ci_low_mw", "ci_high_mw")]
        data.setdefault("power", Estimate.of(*mw, unit="mW", method=ROLE_STATS_METHOD))
        return data


class KernelPower(_Model):
    """The kernel power of one execution (target "sse" or "first", the interleaved one) estimated through the
    calibrated sensor model (`fingrav.analysis.kernel_power`), as opposed to the sensor reading during it.
    `power` (mW) without a value when not measurable (`reason` says why)."""

    target: str
    measurable: bool
    power: Estimate = Estimate(unit="mW")
    reason: str | None = None
    samples: int = 0  # samples that see the execution at all
    runs: int = 0
    # base runs (`Plan.base_runs`) in the fit beside `runs`; 0: none (not written, as before them)
    base_runs: int = Field(0, exclude_if=lambda v: v == 0)
    max_share: float | None = None  # the largest share (0..1) of one reading that the execution contributes
    components: dict[str, float | None] = {}  # bootstrap_low/high_mw, model_mw, sensor_model_mw
    truth_mw: float | None = None  # simulator


class Drift(_Model):
    """How much settled power still changes over the last half of a run (the die warming, a slow clock change):
    `change_pct` (least-squares slope x the half's length, % of its mean) with its standard error `se_pct` (from
    the batch means' spread: samples are autocorrelated), the half's mean and batch-means CI (mW) and its start."""

    change_pct: float
    se_pct: float
    mean_mw: float
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None
    start_ns: int

    def drifting(self, tol_pct: float) -> bool:
        """Whether the change exceeds `tol_pct` by more than two standard errors."""
        return abs(self.change_pct) - 2.0 * self.se_pct > tol_pct


class LimitCycleStats(_Model):
    """The limit cycle of one sustained run (`fingrav.analysis.sustained.limit_cycle`): `cycles` whole cycles
    between `start_ns` and `end_ns`; period (ns), duty (released fraction, 0..1), high / low levels and the
    whole-cycle mean (mW: the sustained power), each an Estimate (t-interval over cycles)."""

    cycles: int
    start_ns: int
    end_ns: int
    period_ns: Estimate
    duty: Estimate
    high_mw: Estimate
    low_mw: Estimate
    mean_mw: Estimate


class EarlyPower(_Model):
    """The reference run's power right after it settles and before the limiter first clamps (mW, ns;
    `fingrav.analysis.reference.early_power`)."""

    start_ns: int
    end_ns: int
    samples: int
    power_mw: float | None = None
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None

    @property
    def power(self) -> Estimate:
        return Estimate.of(self.power_mw, self.ci_low_mw, self.ci_high_mw, "mW", "batch means")


class ReferenceStats(_Model):
    """The reference run (`fingrav.analysis.reference.reference_stats`; mW, ns, mJ): its executions and busy span,
    settled mean with batch-means CI, block spread, limit cycle, early power, drift, energy counter."""

    run: int
    executions: int = 0
    executions_planned: int | None = None
    busy_start_ns: int | None = None
    busy_end_ns: int | None = None
    busy_ns: int | None = None
    t_stable_ns: int | None = None
    t_stable_source: str | None = None
    settled_samples: int = 0
    power_mw: float | None = None
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None
    ci_method: str = ""
    unsettled: bool = False
    block_ms: float | None = None
    block_spread_pct: float | None = None
    span_start_ns: int | None = None
    span_end_ns: int | None = None
    span_ns: int | None = None
    unstamped: bool = False
    cycle_ns: float | None = None
    limit_cycle: LimitCycleStats | None = None
    early: EarlyPower | None = None
    drift: Drift | None = None
    drifting: bool = False
    energy_counter_mj: float | None = None
    energy_power_mw: float | None = None
    samples_energy_mj: float | None = None
    counter_vs_samples_pct: float | None = None
    counter_power: Estimate | None = None  # energy_power_mw with its bounds (`fingrav.analysis.reference`)
    samples_power: Estimate | None = None  # samples_energy_mj / span with its batch-means CI
    note: str = ""

    @property
    def power(self) -> Estimate:
        """The settled mean (mW) with its batch-means CI."""
        return Estimate.of(self.power_mw, self.ci_low_mw, self.ci_high_mw, "mW", self.ci_method)


class TruthGroups(_Model):
    """The simulator's truths that are not one of the result's numbers (`ScenarioResult.truth` has those): the true
    power of every statistic group per channel (mW), the noise-free reading per group (mW) and the true energy of
    one execution alone (mJ; the result's energy truth is the cycle's)."""

    groups: dict[str, dict[str, float]] = {}
    reading_groups: dict[str, float] = {}
    truth_exec_energy_mj: float | None = None


class SamplePhase(_Model):
    """Whether the sensor's samples fall at random phases of the runs (`fingrav.analysis.flags.sample_phase_ks`):
    the Kolmogorov-Smirnov distance `ks_d` (None with fewer than 2 runs) over `runs` measure runs."""

    ks_d: float | None = None
    runs: int = 0
    note: str = "first sample after each run start, as a fraction of the sensor period, vs uniform"


class PhaseTelemetry(_Model):
    """The GPU's clocks and clock-event (throttle) telemetry over the runs of one phase
    (`fingrav.analysis.telemetry.telemetry_summary`): runs read, median SM clock before and after a run and
    memory clock after it (MHz), how many runs ended with each clock-event reason, each violation counter's total
    increase during the runs (in `counter_unit`) and the median time one telemetry read took (ns). A measure run's
    "before" is read in the second half of its idle (`GPUDevice.idle_reading_telemetry`; before stop 36, right after
    the idle), so its counters' increase covers the run and up to half its idle."""

    runs: int = 0
    sm_mhz_before_median: float | None = None
    sm_mhz_after_median: float | None = None
    mem_mhz_after_median: float | None = None
    runs_ending_with_reason: dict[str, int] = {}
    counters_during: dict[str, int] = {}
    counter_unit: str | None = None
    read_ns_median: float | None = None


class RunCount(_Model):
    total: int
    golden: int


class ScenarioSummary(_Model):
    """summary.json."""

    format_version: int = RESULT_FORMAT_VERSION
    scenario: str
    result: ScenarioResult
    channels: dict[str, dict[str, RoleStats]]
    clock: dict[str, float | int | None]
    plan: Plan
    provenance: Provenance
    sensor: SensorSummary
    binning: BinningSummary | None = None
    runs: dict[str, RunCount]
    reference: ReferenceStats | None = None
    gaps: dict[str, int]
    samples: dict[str, int]  # {total, rejected, nonfinite, nonpositive, implausible, ...}: fingrav.analysis.samples
    sample_phase: SamplePhase
    exec_time_mean_ns: float | None = None
    cycle_time_mean_ns: float | None = None
    kernel_power: dict[str, KernelPower] = {}
    telemetry: dict[str, PhaseTelemetry] | None = None  # by run phase
    validation: TruthGroups | None = None  # simulator
    work: Work | None = None  # the kernel's work per execution, where known (fingrav.contracts.work)

    @model_validator(mode="before")
    @classmethod
    def _from_format_2(cls, data: Any) -> Any:
        """A format 1/2 summary.json (its `row` of old columns, top-level flags / valid / Estimates): the result
        from the row (`fingrav.contracts.legacy`), the rest as it was; kernel powers in the new shape."""
        if not isinstance(data, dict) or "row" not in data or "result" in data:
            return data
        from fingrav.contracts.legacy import result_from_old_row  # noqa: PLC0415 (legacy imports result only)

        d = dict(data)
        row = {**d.pop("row"), "scenario": d.get("scenario")}
        if "flags" not in row and isinstance(d.get("flags"), list):  # the top level has them too: the same list
            row["flags"] = ";".join(d["flags"])
        if "valid" not in row and isinstance(d.get("valid"), bool):
            row["valid"] = d["valid"]
        d["result"] = result_from_old_row(row)
        for key in ("flags", "valid", "exec_time_ns", "cycle_time_ns", "energy_per_exec_mj",
                    "sse_reading_vs_ssp_pct", "interleaved_reading_vs_ssp_pct", "throughput"):  # fmt: skip
            d.pop(key, None)
        kp = {}
        for target, k in (d.get("kernel_power") or {}).items():
            k = dict(k)
            k["power"] = Estimate.of(k.pop("value_mw", None), k.pop("ci_low_mw", None), k.pop("ci_high_mw", None), "mW")
            kp[target] = k
        d["kernel_power"] = kp
        if isinstance(d.get("validation"), dict):  # its numbers are the row's: the groups stay
            d["validation"] = {k: d["validation"][k] for k in TruthGroups.model_fields if k in d["validation"]}
        d["format_version"] = RESULT_FORMAT_VERSION
        return d

    @property
    def flags(self) -> list[str]:
        """Every flag that fired (invalidating first)."""
        return self.result.flags.all

    @property
    def valid(self) -> bool:
        return self.result.valid

    @property
    def row(self) -> dict[str, Any]:
        """The result's flat columns (`ScenarioResult.flat`; derived, not stored)."""
        return self.result.flat()

    def role(self, channel: str, role: str) -> RoleStats | None:
        """channels[channel][role], None when absent."""
        return self.channels.get(channel, {}).get(role)
