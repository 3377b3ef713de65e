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


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Estimate(_Model):
    """A point estimate with its CI (None where not available)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


class RoleStats(_Model):
    """The LOIs of one role (or statistic group) on one channel: mean power, cluster-bootstrap CI, counts, and
    the TOI fit (numpy.polyfit coefficients, highest power first, x = toi_frac, y = power_mw)."""

    mean_mw: float | None = None
    ci_low_mw: float | None = None
    ci_high_mw: float | None = None
    lois: int = 0
    lois_by_phase: dict[str, int] = {}
    runs_with_lois: int = 0
    fit_coeffs: list[float] | None = None
    truth_mw: float | None = None  # simulator
    # SSP only: what the CI is made of (bootstrap interval over runs, + the lag bias of a tail trend) and the
    # tail's trend test (`fingrav.analysis.settling`)
    ci_components: dict[str, float | None] | None = None
    tail_trend: dict[str, float | bool | None] | None = None


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
    sse_vs_ssp_error_pct: Estimate
    interleaved_vs_ssp_pct: Estimate
    validation: dict[str, Any] | None = None

    def role(self, channel: str, role: str) -> RoleStats | None:
        """channels[channel][role], None when absent."""
        return self.channels.get(channel, {}).get(role)
