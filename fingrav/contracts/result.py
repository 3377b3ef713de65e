"""The typed result of one scenario: one `Estimate` shape, typed groups, and every column name derived from them.

The differentiate stage builds a `ScenarioResult` (in summary.json, `ScenarioSummary.result`); the report, the API,
the exports, combine and fleet read its groups. summary.csv (narrow), metrics.parquet / metrics.csv (every number,
long form) and the result's flat columns are derived from it here, by `METRICS` (column name, group, field, unit):
no other module spells a column's CI name (`ci_columns`).

Names say what a number is:

* `headline`: `power_w` with `power_source` (`POWER_SOURCES`: "sustained" / "sustained_stamped" = the reference
  run, launched as users launch kernels; "burst" = no reference run: the method's SSP) and `energy_per_exec_mj`;
* `ssp`: the method's steady-state power, the FinGraV SSP of the short stamped runs after idle (`ssp_power_w`),
  with its own validity (`ssp_valid`: none of `SSP_INVALIDATING` fired for it);
* `sse` / `interleaved`: the sensor's reading and the execution's own (kernel) power, each against the SSP;
* `sustained`: the reference run (settled power, limit cycle, what the stamps cost);
* `throughput`, `truth` (simulator), `counts`, `flags` (invalidating / notes).

Every comparison names both sides (`<a>_vs_<b>_pct` = (a - b) / b x 100). A derived number carries its inputs'
uncertainty (`Estimate.vs`, `Estimate.map_monotone`: interval arithmetic).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from fingrav.contracts import RESULT_FORMAT_VERSION
from fingrav.contracts.flags import REGISTRY


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def finite(v: Any) -> float | None:
    """v as a float when it is a finite real number (not a bool), else None: the one test every consumer uses."""
    if v is None or isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def is_finite(v: Any) -> bool:
    """Whether v is a finite real number (not a bool)."""
    return finite(v) is not None


def _digits(value: float, half: float | None) -> int:
    """Significant digits of `value` that show a CI half-width `half` to two significant digits (3..7; 4 without
    a CI)."""
    if not half or half <= 0 or not math.isfinite(half) or not value:
        return 4
    sig = int(math.floor(math.log10(abs(value)))) - int(math.floor(math.log10(half))) + 2
    return min(7, max(3, sig))


def _fmt(v: float, sig: int) -> str:
    if v == 0:
        return "0"
    decimals = max(0, sig - 1 - int(math.floor(math.log10(abs(v)))))
    return f"{v:.{decimals}f}"


class Estimate(_Model):
    """A value with its CI (None where not available), its unit and how it was obtained (`method`).

    ci_low == ci_high == value only for exact inputs (a count, a work model's flop); a derived number's CI comes
    from its inputs' (`vs`, `map_monotone`, `scaled`)."""

    value: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    unit: str = ""
    method: str = ""

    @classmethod
    def of(cls, value: Any, ci_low: Any = None, ci_high: Any = None, unit: str = "", method: str = "") -> Estimate:
        """An Estimate from possibly non-finite numbers (those become None; no value: no CI)."""
        v = finite(value)
        if v is None:
            return cls(unit=unit, method=method)
        return cls(value=v, ci_low=finite(ci_low), ci_high=finite(ci_high), unit=unit, method=method)

    @property
    def has_value(self) -> bool:
        return self.value is not None

    @property
    def has_ci(self) -> bool:
        return self.value is not None and self.ci_low is not None and self.ci_high is not None

    @property
    def half_width(self) -> float | None:
        """Half the CI's width (unit of the value), None without a CI."""
        if self.ci_low is None or self.ci_high is None:
            return None
        return (self.ci_high - self.ci_low) / 2.0

    @property
    def half_width_pct(self) -> float | None:
        """Half the CI's width in % of the value, None without a CI or with a zero value."""
        h = self.half_width
        if h is None or not self.value:
            return None
        return h / abs(self.value) * 100.0

    def scaled(self, factor: float, unit: str, method: str | None = None) -> Estimate:
        """value and CI x factor (> 0: a change of unit or an exact multiplier)."""
        if self.value is None:
            return Estimate(unit=unit, method=self.method if method is None else method)
        lo = self.ci_low * factor if self.ci_low is not None else None
        hi = self.ci_high * factor if self.ci_high is not None else None
        if factor < 0:
            lo, hi = hi, lo
        return Estimate.of(self.value * factor, lo, hi, unit, self.method if method is None else method)

    def with_term(self, share: float, method: str) -> Estimate:
        """The CI with a systematic term of `share` x |value| (a fraction) combined in quadrature with each
        half-width, the value unchanged; `method` is appended to the CI's. Unchanged without a value, a CI or a
        term."""
        if not share or self.value is None or self.ci_low is None or self.ci_high is None:
            return self
        v, t = float(self.value), abs(float(self.value)) * share
        lo, hi = v - math.hypot(v - float(self.ci_low), t), v + math.hypot(float(self.ci_high) - v, t)
        return Estimate.of(v, lo, hi, self.unit, f"{self.method}; {method}" if self.method else method)

    def map_monotone(self, f: Callable[[float], float], decreasing: bool, unit: str, method: str) -> Estimate:
        """f(value) with the image of the CI under the monotone f (exact for a percentile interval; `decreasing`
        swaps the ends). Ends where f is not defined (<= 0) are dropped."""
        if self.value is None or self.value <= 0:
            return Estimate(unit=unit, method=method)
        ends = [f(x) if x is not None and x > 0 else None for x in (self.ci_low, self.ci_high)]
        if decreasing:
            ends.reverse()
        return Estimate.of(f(self.value), ends[0], ends[1], unit, method)

    def vs(self, other: Estimate, method: str = "interval arithmetic of the two CIs") -> Estimate:
        """(self - other) / other in %, its CI from the two intervals (conservative interval arithmetic:
        [self.lo / other.hi - 1, self.hi / other.lo - 1]); no CI where either has none; None without values."""
        if self.value is None or not other.value:
            return Estimate(unit="%", method=method)
        v = (self.value - other.value) / other.value * 100.0
        if not self.has_ci or not other.has_ci or other.ci_low is None or other.ci_low <= 0:
            return Estimate.of(v, unit="%", method=method)
        assert self.ci_low is not None and self.ci_high is not None and other.ci_high is not None
        return Estimate.of(
            v, (self.ci_low / other.ci_high - 1.0) * 100.0, (self.ci_high / other.ci_low - 1.0) * 100.0, "%", method
        )

    def vs_exact(self, truth: float | None, method: str = "the CI against an exact reference") -> Estimate:
        """(self - truth) / truth in % against an exact truth (the simulator's): the CI maps through exactly."""
        if self.value is None or not truth:
            return Estimate(unit="%", method=method)

        def pct(x: float | None) -> float | None:
            return None if x is None else (x - truth) / truth * 100.0

        lo, hi = pct(self.ci_low), pct(self.ci_high)
        if truth < 0:
            lo, hi = hi, lo
        return Estimate.of(pct(self.value), lo, hi, "%", method)

    def shifted(self, offset: float) -> Estimate:
        """value and CI + offset (same unit)."""
        if self.value is None:
            return self
        lo = self.ci_low + offset if self.ci_low is not None else None
        hi = self.ci_high + offset if self.ci_high is not None else None
        return self.model_copy(update={"value": self.value + offset, "ci_low": lo, "ci_high": hi})

    def text(self, sig: int | None = None, unit: bool = True) -> str:
        """One line: `688.8 W [686.1, 691.4]` (digits from the CI's width unless `sig`); "n/a" without a value."""
        if self.value is None:
            return "n/a"
        n = sig if sig is not None else _digits(self.value, self.half_width)
        u = f" {self.unit}" if unit and self.unit else ""
        out = f"{_fmt(self.value, n)}{u}"
        if self.ci_low is not None and self.ci_high is not None:
            out += f" [{_fmt(self.ci_low, n)}, {_fmt(self.ci_high, n)}]"
        return out

    def __str__(self) -> str:
        return self.text()


NONE: Final = Estimate()

# ---------------------------------------------------------------------------------------------------- groups
POWER_SOURCES: Final = ("burst", "sustained", "sustained_stamped")  # `fingrav.analysis.sustained.headline`
PowerSource = Literal["burst", "sustained", "sustained_stamped"]


class Labels(_Model):
    """What was measured: scenario, kernel label, backend, predecessor ("<kernel> x<count>")."""

    scenario: str
    kernel: str | None = None
    backend: str | None = None
    predecessor: str | None = None


class Headline(_Model):
    """What the kernel draws as users run it (`power_source`): power (W), energy per execution (mJ) and the
    execution time of the stamped runs (µs); the card's two sources over the collection (`counter_vs_samples`, %:
    energy counter vs samples), whose absolute value is the sensor-source term in the CIs of the absolute numbers
    (`fingrav.analysis.sources`)."""

    power: Estimate = NONE
    power_source: PowerSource = "burst"
    energy_per_exec: Estimate = NONE
    exec_time: Estimate = NONE
    counter_vs_samples: Estimate = NONE


class MethodSSP(_Model):
    """The method's SSP: the FinGraV steady-state power of the short stamped runs after idle (W), per channel,
    its cycle (start to start, µs) and energy per execution (mJ), and its own validity (`valid`, `invalid_by`:
    the flags of `SSP_INVALIDATING` that fired for it). Its self-consistency check (`fingrav.analysis.consistency`):
    the sensor-model estimator's power of the executions at and after the SSP index (the tail and the trailing
    executions: `steady_kernel_power`, W: a kernel power, not a
    reading), that against the SSP (%, CI: both CIs in quadrature) and whether 0 lies in that CI (`consistent`;
    None: not tested, the estimator did not resolve the tail)."""

    power: Estimate = NONE
    valid: bool = False
    invalid_by: list[str] = []
    cycle_time: Estimate = NONE
    energy_per_exec: Estimate = NONE
    channels: dict[str, Estimate] = {}
    steady_kernel_power: Estimate = NONE
    steady_kernel_power_vs_ssp: Estimate = NONE
    consistent: bool | None = None


class Execution(_Model):
    """One execution against the SSP (the SSE, or the interleaved first execution after a predecessor): what the
    sensor reads (`reading`, W), what the execution draws through the sensor model (`kernel_power`, W; None: not
    measurable, `fingrav.analysis.kernel_power`), each vs the method's SSP (%)."""

    reading: Estimate = NONE
    reading_vs_ssp: Estimate = NONE
    kernel_power: Estimate = NONE
    kernel_power_vs_ssp: Estimate = NONE


class LimitCycle(_Model):
    """The power limiter's cycle in the reference run (`fingrav.analysis.sustained.limit_cycle`): whole cycles,
    period (ms), duty (the released fraction, %), high and low levels (W), the whole-cycle mean (W)."""

    cycles: int = 0
    start_ns: int | None = None
    end_ns: int | None = None
    period: Estimate = NONE
    duty: Estimate = NONE
    high: Estimate = NONE
    low: Estimate = NONE
    mean: Estimate = NONE


class Sustained(_Model):
    """The reference run (sustained use, `fingrav.analysis.sustained` / `reference`): its settled power (W), the
    energy counter's power and how it compares with the samples, the method SSP against it and against the
    headline, its uninstrumented cycle (µs), length (s), why it stopped, its drift (%), what the stamps add to the
    cycle and do to the power (the SSP vs the unstamped run's power at the same time after idle), the limit cycle."""

    reference_power: Estimate = NONE
    reference_counter_power: Estimate = NONE
    reference_counter_vs_samples: Estimate = NONE
    ssp_vs_reference: Estimate = NONE
    ssp_vs_power: Estimate = NONE
    cycle_time: Estimate = NONE
    run_s: float | None = None
    # Not an estimate of a measured quantity but a plan for the next run: the reference-run length (s) whose
    # headline CI would reach +-`analysis.max_ci_pct`, scaling the run's GPU time by (half-width / target)^2 (a
    # batch-means CI narrows as 1/sqrt(time)). A recommendation carries no CI (its column kind "recommendation";
    # metrics.csv gives its source as one); the uncertainty it rests on is the headline power's CI.
    recommended_run_s: float | None = None
    stop: str | None = None
    drift: Estimate = NONE
    ssp_cycle_vs_sustained_cycle: Estimate = NONE
    unstamped_burst_power: Estimate = NONE
    ssp_vs_unstamped_burst: Estimate = NONE
    limit_cycle: LimitCycle | None = None

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """A result written before `recommended_run_s` had its name (format 3: `run_s_for_max_ci`)."""
        if isinstance(data, dict) and "run_s_for_max_ci" in data:
            data = dict(data)
            data.setdefault("recommended_run_s", data.pop("run_s_for_max_ci"))
        return data


class Throughput(_Model):
    """Work per execution (flop, bytes; exact) and, over the headline's cycle and energy, rates and efficiencies
    (`fingrav.analysis.throughput`): TFLOP/s, GB/s, TFLOP/s per W, pJ per flop, pJ per byte."""

    work_flop: float | None = None
    work_bytes: float | None = None
    tflop_s: Estimate = NONE
    gb_s: Estimate = NONE
    tflop_s_per_w: Estimate = NONE
    energy_per_flop: Estimate = NONE
    energy_per_byte: Estimate = NONE
    time_basis: str = ""


class Truth(_Model):
    """The simulator's truths (exact) of the measured numbers, under the same names, and each measured number vs
    its truth (%; the measured CI mapped through)."""

    power: Estimate = NONE
    ssp_power: Estimate = NONE
    energy_per_exec: Estimate = NONE
    sse_reading: Estimate = NONE
    sse_kernel_power: Estimate = NONE
    interleaved_reading: Estimate = NONE
    interleaved_kernel_power: Estimate = NONE
    power_vs_truth: Estimate = NONE
    ssp_vs_truth: Estimate = NONE
    energy_per_exec_vs_truth: Estimate = NONE
    reference_vs_truth: Estimate = NONE
    sse_reading_vs_truth: Estimate = NONE
    sse_kernel_power_vs_truth: Estimate = NONE
    interleaved_reading_vs_truth: Estimate = NONE
    interleaved_kernel_power_vs_truth: Estimate = NONE
    energy_truth: str = ""  # "cycle" | "execution" (`fingrav.analysis.validation`)


class Counts(_Model):
    """Measure runs per kind (total, golden), LOIs of the SSP and the SSE, collection GPU time (s)."""

    ssp_runs_total: int = 0
    ssp_runs_golden: int = 0
    sse_runs_total: int = 0
    sse_runs_golden: int = 0
    ssp_lois: int = 0
    sse_lois: int = 0
    collect_gpu_s: float | None = None
    ssp_stop: str = Field(
        "fixed_count",
        description="why the SSP runs stopped: plan.json's ssp_stop reason (a key of "
        "fingrav.analysis.ssp_stop.SSP_STOP_REASONS), 'fixed_count' for a fixed run count",
    )
    ssp_stop_check: str | None = Field(
        None,
        description="the same stop rule asked again on the golden SSP runs the analysis kept (plans without an "
        "adaptive stop: with run_policy's default targets): 'ci_reached' where the runs meet the target",
    )
    ssp_stat_ci_pct: float | None = Field(
        None, description="the method SSP's statistical CI half-width (%) the stop rule sees on the golden runs"
    )


class Flags(_Model):
    """Flags that fired, split by the registry (`fingrav.contracts.flags`): `invalidating` make the row invalid,
    `notes` are informational."""

    invalidating: list[str] = []
    notes: list[str] = []

    @property
    def all(self) -> list[str]:
        """Every flag that fired, in the registry's order."""
        order = {f.name: i for i, f in enumerate(REGISTRY)}
        return sorted([*self.invalidating, *self.notes], key=lambda f: order.get(f, len(order)))


class ScenarioResult(_Model):
    """Every number of one scenario on one GPU (module docstring)."""

    format_version: int = RESULT_FORMAT_VERSION
    labels: Labels
    valid: bool
    headline: Headline = Headline()
    ssp: MethodSSP = MethodSSP()
    sse: Execution = Execution()
    interleaved: Execution = Execution()
    sustained: Sustained = Sustained()
    throughput: Throughput = Throughput()
    truth: Truth | None = None
    counts: Counts = Counts()
    flags: Flags = Flags()

    def metric(self, column: str) -> Estimate:
        """The Estimate of a value column of `METRICS` (KeyError for an unknown or non-Estimate column)."""
        spec = BY_COLUMN[column]
        v = spec.get(self)
        if not isinstance(v, Estimate):
            raise KeyError(f"{column} is not an Estimate column")
        return v

    def flat(self) -> dict[str, Any]:
        """Every column of `METRICS` (value, CI low, CI high for an Estimate) plus the per-channel SSP columns."""
        return flatten(self)


# ---------------------------------------------------------------------------------------------------- columns
#: "recommendation": a number for planning the next run (no measurement, no CI; metrics.csv source "recommendation")
ColumnKind = Literal["estimate", "float", "int", "str", "bool", "flags", "recommendation"]
UNIT_SUFFIX: Final[dict[str, str]] = {
    "W": "w",
    "mJ": "mj",
    "µs": "us",
    "ms": "ms",
    "s": "s",
    "%": "pct",
    "TFLOP/s": "tflop_s",
    "GB/s": "gb_s",
    "TFLOP/s/W": "tflop_s_per_w",
    "pJ/flop": "pj",
    "pJ/B": "pj",
    "flop": "flop",
    "B": "bytes",
}


def ci_columns(column: str) -> tuple[str, str]:
    """The CI columns of a value column `<base>_<unit>`: `<base>_ci_low_<unit>`, `<base>_ci_high_<unit>` (the one
    place that spells them). Units of more than one word (`tflop_s_per_w`, `gb_s`) are matched first."""
    for suffix in sorted(set(UNIT_SUFFIX.values()), key=len, reverse=True):
        if column.endswith("_" + suffix):
            base = column[: -len(suffix) - 1]
            return f"{base}_ci_low_{suffix}", f"{base}_ci_high_{suffix}"
    raise ValueError(f"{column}: no unit suffix")


def value_column_of_ci(column: str) -> str | None:
    """The value column of a CI column (`power_ci_low_w` -> `power_w`), None for a column that is not one."""
    for part in ("_ci_low_", "_ci_high_"):
        if part in column:
            base, unit = column.rsplit(part, 1)
            return f"{base}_{unit}"
    return None


@dataclass(frozen=True)
class Metric:
    """One column of the result: its name, where it lives (`path`: group attributes), its kind and unit, and
    what it is (docs/ARCHITECTURE.md's column table is generated from these)."""

    column: str
    path: tuple[str, ...]
    kind: ColumnKind
    unit: str = ""
    doc: str = ""

    def get(self, result: ScenarioResult) -> Any:
        obj: Any = result
        for p in self.path:
            if obj is None:
                return None
            obj = getattr(obj, p)
        return obj

    def columns(self) -> tuple[str, ...]:
        return (self.column, *ci_columns(self.column)) if self.kind == "estimate" else (self.column,)


def _e(column: str, path: str, unit: str, doc: str) -> Metric:
    return Metric(column, tuple(path.split(".")), "estimate", unit, doc)


def _s(column: str, path: str, kind: ColumnKind, unit: str, doc: str) -> Metric:
    return Metric(column, tuple(path.split(".")), kind, unit, doc)


METRICS: Final[tuple[Metric, ...]] = (
    _s("scenario", "labels.scenario", "str", "", "the scenario's name"),
    _s("kernel", "labels.kernel", "str", "", "the measured kernel"),
    _s("backend", "labels.backend", "str", "", "the device backend"),
    _s("predecessor", "labels.predecessor", "str", "", "the kernel run right before it, x count"),
    _s("valid", "valid", "bool", "", "no invalidating flag fired"),
    _e("power_w", "headline.power", "W", "the headline: what the kernel draws as users run it (power_source)"),
    _s("power_source", "headline.power_source", "str", "", "sustained: the reference run; burst: the method SSP"),
    _e("energy_per_exec_mj", "headline.energy_per_exec", "mJ", "headline power x the headline's cycle time"),
    _e("exec_time_us", "headline.exec_time", "µs", "execution time (median over golden SSP runs)"),
    _e(
        "counter_vs_samples_pct",
        "headline.counter_vs_samples",
        "%",
        "energy counter vs samples over the collection: the sensor-source term in every absolute CI",
    ),
    _e("ssp_power_w", "ssp.power", "W", "the method's SSP: short stamped runs after idle"),
    _s("ssp_valid", "ssp.valid", "bool", "", "no invalidating flag fired for the method SSP"),
    _e("ssp_cycle_time_us", "ssp.cycle_time", "µs", "start-to-start time of the SSP executions (stamped runs)"),
    _e("ssp_energy_per_exec_mj", "ssp.energy_per_exec", "mJ", "method SSP x its cycle time"),
    _e(
        "ssp_steady_kernel_power_w",
        "ssp.steady_kernel_power",
        "W",
        "the executions from the SSP index on through the sensor model (self-consistency check)",
    ),
    _e(
        "ssp_steady_kernel_power_vs_ssp_pct",
        "ssp.steady_kernel_power_vs_ssp",
        "%",
        "their kernel power vs the method SSP; CI: both CIs in quadrature",
    ),
    _s("ssp_consistent", "ssp.consistent", "bool", "", "0 lies in ssp_steady_kernel_power_vs_ssp_pct's CI"),
    _e("sse_reading_w", "sse.reading", "W", "the sensor's mean reading during the SSE"),
    _e("sse_reading_vs_ssp_pct", "sse.reading_vs_ssp", "%", "SSE reading vs the method SSP"),
    _e("sse_kernel_power_w", "sse.kernel_power", "W", "the SSE's own power through the sensor model"),
    _e("sse_kernel_power_vs_ssp_pct", "sse.kernel_power_vs_ssp", "%", "SSE kernel power vs the method SSP"),
    _e("interleaved_reading_w", "interleaved.reading", "W", "the sensor's reading of the first execution"),
    _e("interleaved_reading_vs_ssp_pct", "interleaved.reading_vs_ssp", "%", "interleaved reading vs the SSP"),
    _e("interleaved_kernel_power_w", "interleaved.kernel_power", "W", "the interleaved execution's own power"),
    _e("interleaved_kernel_power_vs_ssp_pct", "interleaved.kernel_power_vs_ssp", "%", "vs the method SSP"),
    _e("reference_power_w", "sustained.reference_power", "W", "the reference run's settled mean"),
    _e("reference_counter_power_w", "sustained.reference_counter_power", "W", "energy counter / reference run"),
    _e(
        "reference_counter_vs_samples_pct",
        "sustained.reference_counter_vs_samples",
        "%",
        "counter power vs samples",
    ),
    _e("ssp_vs_reference_pct", "sustained.ssp_vs_reference", "%", "method SSP vs the reference run's settled mean"),
    _e("ssp_vs_power_pct", "sustained.ssp_vs_power", "%", "method SSP vs the (sustained) headline"),
    _e("sustained_cycle_time_us", "sustained.cycle_time", "µs", "the reference run's uninstrumented cycle"),
    _s("sustained_run_s", "sustained.run_s", "float", "s", "the reference run's GPU time"),
    _s(
        "recommended_sustained_run_s",
        "sustained.recommended_run_s",
        "recommendation",
        "s",
        "recommended reference-run length for a headline CI of ±max_ci_pct",
    ),
    _s("sustained_stop", "sustained.stop", "str", "", "why the adaptive reference run stopped"),
    _e("sustained_drift_pct", "sustained.drift", "%", "change over the reference run's last half"),
    _e(
        "ssp_cycle_vs_sustained_cycle_pct",
        "sustained.ssp_cycle_vs_sustained_cycle",
        "%",
        "what the stamps add to the cycle",
    ),
    _e("unstamped_burst_power_w", "sustained.unstamped_burst_power", "W", "reference run, same time after idle"),
    _e("ssp_vs_unstamped_burst_pct", "sustained.ssp_vs_unstamped_burst", "%", "what the stamps do to the power"),
    _s("limit_cycles", "sustained.limit_cycle.cycles", "int", "", "whole limit cycles in the reference run"),
    _e("limit_cycle_period_ms", "sustained.limit_cycle.period", "ms", "limit cycle period"),
    _e("limit_cycle_duty_pct", "sustained.limit_cycle.duty", "%", "released fraction of a limit cycle"),
    _e("limit_cycle_high_w", "sustained.limit_cycle.high", "W", "released level"),
    _e("limit_cycle_low_w", "sustained.limit_cycle.low", "W", "clamped level"),
    _s("work_flop", "throughput.work_flop", "float", "flop", "flop per execution"),
    _s("work_bytes", "throughput.work_bytes", "float", "B", "bytes per execution"),
    _e("throughput_tflop_s", "throughput.tflop_s", "TFLOP/s", "flop / headline cycle"),
    _e("bandwidth_gb_s", "throughput.gb_s", "GB/s", "bytes / headline cycle"),
    _e("energy_efficiency_tflop_s_per_w", "throughput.tflop_s_per_w", "TFLOP/s/W", "flop / headline energy"),
    _e("energy_per_flop_pj", "throughput.energy_per_flop", "pJ/flop", "headline energy / flop"),
    _e("energy_per_byte_pj", "throughput.energy_per_byte", "pJ/B", "headline energy / bytes"),
    _e("truth_power_w", "truth.power", "W", "simulator: true headline power"),
    _e("truth_ssp_power_w", "truth.ssp_power", "W", "simulator: true SSP"),
    _e("truth_energy_per_exec_mj", "truth.energy_per_exec", "mJ", "simulator: true energy per execution"),
    _e("truth_sse_reading_w", "truth.sse_reading", "W", "simulator: expected SSE reading"),
    _e("truth_sse_kernel_power_w", "truth.sse_kernel_power", "W", "simulator: true SSE power"),
    _e("truth_interleaved_reading_w", "truth.interleaved_reading", "W", "simulator: expected reading"),
    _e("truth_interleaved_kernel_power_w", "truth.interleaved_kernel_power", "W", "simulator: true power"),
    _e("power_vs_truth_pct", "truth.power_vs_truth", "%", "headline vs its truth"),
    _e("ssp_vs_truth_pct", "truth.ssp_vs_truth", "%", "method SSP vs its truth"),
    _e("energy_per_exec_vs_truth_pct", "truth.energy_per_exec_vs_truth", "%", "energy vs its truth"),
    _e("reference_vs_truth_pct", "truth.reference_vs_truth", "%", "reference settled power vs the power truth"),
    _e("sse_reading_vs_truth_pct", "truth.sse_reading_vs_truth", "%", "SSE reading vs its truth"),
    _e("sse_kernel_power_vs_truth_pct", "truth.sse_kernel_power_vs_truth", "%", "SSE kernel power vs truth"),
    _e("interleaved_reading_vs_truth_pct", "truth.interleaved_reading_vs_truth", "%", "vs its truth"),
    _e("interleaved_kernel_power_vs_truth_pct", "truth.interleaved_kernel_power_vs_truth", "%", "vs its truth"),
    _s("ssp_runs_total", "counts.ssp_runs_total", "int", "", "SSP measure runs"),
    _s("ssp_runs_golden", "counts.ssp_runs_golden", "int", "", "golden SSP runs"),
    _s("sse_runs_total", "counts.sse_runs_total", "int", "", "SSE measure runs"),
    _s("sse_runs_golden", "counts.sse_runs_golden", "int", "", "golden SSE runs"),
    _s("ssp_lois", "counts.ssp_lois", "int", "", "SSP LOIs"),
    _s("sse_lois", "counts.sse_lois", "int", "", "SSE LOIs"),
    _s("collect_gpu_s", "counts.collect_gpu_s", "float", "s", "GPU time of the scenario's collection"),
    _s("ssp_stop", "counts.ssp_stop", "str", "", "why the SSP runs stopped (fixed_count: a fixed count)"),
    _s("ssp_stop_check", "counts.ssp_stop_check", "str", "", "the SSP stop rule on the golden runs"),
    _s("ssp_stat_ci_pct", "counts.ssp_stat_ci_pct", "float", "%", "the method SSP's statistical CI half-width"),
    _s("flags", "flags.invalidating", "flags", "", "invalidating flags that fired"),
    _s("notes", "flags.notes", "flags", "", "informational flags that fired"),
)
BY_COLUMN: Final[dict[str, Metric]] = {m.column: m for m in METRICS}
FLAG_SEPARATOR: Final = ";"

#: summary.csv: what a reader needs (<= 25 columns), then the simulator's truths (values only: <= 30 in all)
SUMMARY: Final[tuple[str, ...]] = (
    "scenario",
    "kernel",
    "valid",
    "power_w",
    "power_source",
    "energy_per_exec_mj",
    "exec_time_us",
    "ssp_power_w",
    "ssp_valid",
    "sse_reading_w",
    "sse_kernel_power_w",
    "flags",
    "notes",
)
SUMMARY_TRUTH: Final[tuple[str, ...]] = (
    "truth_power_w",
    "truth_ssp_power_w",
    "truth_energy_per_exec_mj",
    "truth_sse_reading_w",
    "truth_sse_kernel_power_w",
)
MAX_SUMMARY_COLUMNS: Final = 25
MAX_SUMMARY_COLUMNS_TRUTH: Final = 30
#: metrics.parquet / metrics.csv: every number in long form
METRICS_COLUMNS: Final = ("scenario", "metric", "value", "ci_low", "ci_high", "unit", "source")


def channel_column(channel: str) -> str:
    """The value column of a non-total channel's method SSP (W)."""
    return f"ssp_{channel}_power_w"


def channel_of_column(column: str) -> str | None:
    """The channel whose method SSP `column` is (`channel_column`'s inverse); None for any other column, the named
    metrics' among them (e.g. ssp_steady_kernel_power_w)."""
    if column in BY_COLUMN or not (column.startswith("ssp_") and column.endswith("_power_w")):
        return None
    channel = column[len("ssp_") : -len("_power_w")]
    return channel or None


def summary_columns(truth: bool) -> tuple[str, ...]:
    """summary.csv's columns in order (module docstring); `truth`: with the simulator's."""
    cols = tuple(c for n in SUMMARY for c in BY_COLUMN[n].columns())
    return (*cols, *SUMMARY_TRUTH) if truth else cols  # a truth is exact: its value alone


def flatten(result: ScenarioResult) -> dict[str, Any]:
    """Every column of `METRICS` (an Estimate as value, CI low, CI high; flags joined), then per channel
    `ssp_<channel>_power_w` with its CI."""
    out: dict[str, Any] = {}
    for m in METRICS:
        v = m.get(result)
        if m.kind == "estimate":
            e = v if isinstance(v, Estimate) else NONE
            lo, hi = ci_columns(m.column)
            out[m.column], out[lo], out[hi] = e.value, e.ci_low, e.ci_high
        elif m.kind == "flags":
            out[m.column] = FLAG_SEPARATOR.join(v or [])
        else:
            out[m.column] = v
    for ch, e in sorted(result.ssp.channels.items()):
        col = channel_column(ch)
        lo, hi = ci_columns(col)
        out[col], out[lo], out[hi] = e.value, e.ci_low, e.ci_high
    return out


def long_rows(result: ScenarioResult) -> Iterator[dict[str, Any]]:
    """The result's numbers in long form (`METRICS_COLUMNS`): every Estimate and every numeric column with a
    value; `source` says how the number was obtained."""
    name = result.labels.scenario
    for m in METRICS:
        v = m.get(result)
        if m.kind == "estimate" and isinstance(v, Estimate) and v.value is not None:
            yield {"scenario": name, "metric": m.column, "value": v.value, "ci_low": v.ci_low,
                   "ci_high": v.ci_high, "unit": m.unit, "source": v.method}  # fmt: skip
        elif m.kind in ("float", "int", "recommendation") and is_finite(v):
            source = "recommendation" if m.kind == "recommendation" else "exact"
            yield {"scenario": name, "metric": m.column, "value": float(v), "ci_low": None, "ci_high": None,
                   "unit": m.unit, "source": source}  # fmt: skip
    for ch, e in sorted(result.ssp.channels.items()):
        if e.value is not None:
            yield {"scenario": name, "metric": channel_column(ch), "value": e.value, "ci_low": e.ci_low,
                   "ci_high": e.ci_high, "unit": "W", "source": e.method}  # fmt: skip


def extra_long_rows(scenario: str, columns: Mapping[str, Any], source: str) -> Iterator[dict[str, Any]]:
    """Long-form rows of columns outside the result (multi-GPU `combined_*` / `rank<k>_*`, fleet `fleet_*`): each
    numeric value column with its CI columns where present (units from the column's suffix)."""
    for col, v in columns.items():
        if value_column_of_ci(col) is not None or not is_finite(v):
            continue
        try:
            lo, hi = ci_columns(col)
        except ValueError:
            lo = hi = ""
        unit = next((u for u, s in UNIT_SUFFIX.items() if col.endswith("_" + s)), "")
        yield {"scenario": scenario, "metric": col, "value": float(v), "ci_low": finite(columns.get(lo)),
               "ci_high": finite(columns.get(hi)), "unit": unit, "source": source}  # fmt: skip


def split_flags(flags: str | Iterable[str] | None) -> list[str]:
    """Flags as a list, from the CSV text or a list."""
    if flags is None:
        return []
    if isinstance(flags, str):
        return [f for f in flags.split(FLAG_SEPARATOR) if f]
    return [str(f) for f in flags]


def unflatten(columns: Mapping[str, Any], units_method: str = "") -> ScenarioResult:
    """A `ScenarioResult` from flat columns under the new names (`flatten`'s inverse; absent columns take their
    defaults; `units_method` is the `method` every Estimate gets). Reads the rows of results written before
    format 3 (`fingrav.contracts.legacy.new_columns` renames them first)."""
    tree: dict[str, Any] = {}

    def put(path: tuple[str, ...], v: Any) -> None:
        node = tree
        for p in path[:-1]:
            node = node.setdefault(p, {})
        node[path[-1]] = v

    for m in METRICS:
        if m.kind == "estimate":
            lo, hi = ci_columns(m.column)
            e = Estimate.of(columns.get(m.column), columns.get(lo), columns.get(hi), m.unit, units_method)
            if e.value is not None:
                put(m.path, e.model_dump())
        elif m.kind == "flags":
            put(m.path, split_flags(columns.get(m.column)))
        elif columns.get(m.column) is not None:
            v = columns[m.column]
            put(m.path, int(v) if m.kind == "int" else bool(v) if m.kind == "bool" else v)
    channels: dict[str, Any] = {}
    for col, v in columns.items():
        if col.startswith("ssp_") and col.endswith("_power_w") and col not in BY_COLUMN:
            ch = col[len("ssp_") : -len("_power_w")]
            lo, hi = ci_columns(col)
            channels[ch] = Estimate.of(v, columns.get(lo), columns.get(hi), "W", units_method).model_dump()
    if channels:
        tree.setdefault("ssp", {})["channels"] = channels
    lc = tree.get("sustained", {}).get("limit_cycle")
    if lc is not None and "cycles" not in lc:
        lc["cycles"] = 0
    tree.setdefault("labels", {}).setdefault("scenario", str(columns.get("scenario") or ""))
    tree.setdefault("valid", bool(columns.get("valid")))
    return ScenarioResult.model_validate(tree)


def value_ci(columns: Mapping[str, Any], column: str) -> tuple[Any, Any, Any]:
    """(value, CI low, CI high) of a value column in flat columns (`flatten`, summary.csv, a combined row)."""
    lo, hi = ci_columns(column)
    return columns.get(column), columns.get(lo), columns.get(hi)


def column_kind(column: str) -> ColumnKind:
    """The kind of a flat column: the metric's (a CI column: float); per-channel, multi-GPU (`combined_*`,
    `rank<k>_*`) and fleet columns by their suffix."""
    if column in BY_COLUMN:
        k = BY_COLUMN[column].kind
        return "float" if k in ("estimate", "recommendation") else k
    if column.endswith(("_valid", "_distinct")):
        return "bool"
    if column.endswith("_flags") or column in ("flags", "notes"):
        return "flags"
    if column in ("gpu", "fleet_gpus", "world_size"):
        return "int"
    return "float"


def markdown_table() -> str:
    """Every column of the result (`METRICS`) as docs/ARCHITECTURE.md shows it (a test keeps them equal): name,
    where it lives in the model, unit, whether summary.csv has it, what it is."""
    narrow = set(SUMMARY) | set(SUMMARY_TRUTH)
    lines = ["| column | model | unit | summary.csv | what |", "|---|---|---|---|---|"]
    for m in METRICS:
        ci = " ± CI" if m.kind == "estimate" else ""
        lines.append(
            f"| `{m.column}`{ci} | `{'.'.join(m.path)}` | {m.unit or '–'} | {'yes' if m.column in narrow else ''} "
            f"| {m.doc} |"
        )
    return "\n".join(lines)
