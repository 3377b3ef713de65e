"""profiles/gpu<k>/<scenario>/summary.json: everything the differentiate stage computed for one scenario on
one GPU, as one typed result shared by the producer (`fingrav.analysis.differentiate`) and its consumers
(the report, combine, the exports). Powers in mW (`*_mw`), times in ns (`*_ns`), energies in mJ (`*_mj`);
`row` is the scenario's summary.csv row (`fingrav.contracts.summary`: W, µs, mJ, %).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.plan import Plan
from fingrav.contracts.work import Work


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Estimate(_Model):
    """A point estimate with its CI (None where not available)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


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


class RoleStats(_Model):
    """The LOIs of one role (or statistic group) on one channel: mean power, cluster-bootstrap CI, counts, the
    TOI fit (numpy.polyfit coefficients, highest power first, x = toi_frac, y = power_mw) and its pointwise CI
    band (None without a fit or with LOIs from fewer than 2 runs)."""

    mean_mw: float | None = None
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None
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


class KernelPowerEstimate(_Model):
    """The kernel power of one execution (target "sse" or "first", the interleaved one) estimated through the
    calibrated sensor model (`fingrav.analysis.kernel_power`), as opposed to the sensor reading during it.
    value/CI None when not measurable (`reason` says why)."""

    target: str
    measurable: bool
    value_mw: float | None = None
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None
    reason: str | None = None
    samples: int = 0  # samples that see the execution at all
    runs: int = 0
    max_share: float | None = None  # the largest share (0..1) of one reading that the execution contributes
    components: dict[str, float | None] = {}  # bootstrap_low/high_mw, model_mw, sensor_model_mw
    truth_mw: float | None = None  # simulator


class Throughput(_Model):
    """Rates and efficiencies of a kernel whose work is known (`work`), each a value with its CI:
    tflop_s = flop / cycle time (1e12 flop/s) and gb_s = bytes / cycle time (1e9 bytes/s), over the SSP cycle
    time (the pooled mean start-to-start time, launch gap included: what a back-to-back workload achieves; the
    time the energy per execution is computed over); tflop_s_per_w = flop / energy per execution (TFLOP/s per W
    = TFLOP per J); energy_per_flop_pj / energy_per_byte_pj = energy per execution / flop or bytes (pJ).
    CIs: the rates' from the cluster bootstrap's cycle-time replicates; the efficiencies' the image of the
    energy-per-execution CI (bootstrap over runs + the SSP's systematic part) under the monotone map E -> flop / E
    or E / flop, exact for a percentile interval (`ci_method`)."""

    tflop_s: Estimate = Estimate()
    gb_s: Estimate = Estimate()
    tflop_s_per_w: Estimate = Estimate()
    energy_per_flop_pj: Estimate = Estimate()
    energy_per_byte_pj: Estimate = Estimate()
    time_basis: str = "ssp_cycle"
    ci_method: str = ""


class RunCount(_Model):
    total: int
    golden: int


class ScenarioSummary(_Model):
    """summary.json."""

    format_version: int = FORMAT_VERSION
    scenario: str
    row: dict[str, Any]
    channels: dict[str, dict[str, RoleStats]]
    clock: dict[str, float | int | None]
    flags: list[str]
    valid: bool
    plan: Plan
    provenance: dict[str, Any]
    sensor: dict[str, Any]
    binning: dict[str, Any] | None = None
    runs: dict[str, RunCount]
    reference: dict[str, Any] | None = None
    gaps: dict[str, int]
    samples: dict[str, int]  # {total, rejected, nonfinite, nonpositive, implausible, ...}: fingrav.analysis.samples
    sample_phase: dict[str, Any]
    exec_time_ns: Estimate
    exec_time_mean_ns: float | None = None
    cycle_time_ns: Estimate
    cycle_time_mean_ns: float | None = None
    energy_per_exec_mj: Estimate
    sse_reading_vs_ssp_pct: Estimate
    interleaved_reading_vs_ssp_pct: Estimate
    kernel_power: dict[str, KernelPowerEstimate] = {}
    telemetry: dict[str, Any] | None = None  # by run phase: `fingrav.analysis.telemetry.telemetry_summary`
    validation: dict[str, Any] | None = None
    work: Work | None = None  # the kernel's work per execution, where known (fingrav.contracts.work)
    throughput: Throughput | None = None  # rates and efficiencies with CIs, where the work is known

    def role(self, channel: str, role: str) -> RoleStats | None:
        """channels[channel][role], None when absent."""
        return self.channels.get(channel, {}).get(role)
