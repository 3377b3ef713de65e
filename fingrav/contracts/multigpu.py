"""The typed results of the multi-GPU stages: combine (several GPUs in lockstep, `CombinedResult`, in
profiles/combined/<scenario>.json) and fleet (listed GPUs, `FleetResult`, in profiles/fleet/<scenario>.json).

The analysis (`fingrav.analysis.combine`, `fingrav.analysis.fleet`) returns the model, the stage writes its JSON dump,
every reader (report, tests) validates it back (`fingrav.rawio.read_model`) and reads attributes. Every value with a
CI is the one `fingrav.contracts.result.Estimate`. `row` is the scenario's columns for summary.csv / metrics
(`fingrav.contracts.summary`), in order `row_columns` (JSON objects are written with sorted keys).

Units: W, mJ, µs as the field names and `Estimate.unit` say; fit coefficients mW.
"""

from __future__ import annotations

from fingrav.contracts import FORMAT_VERSION
from fingrav.contracts.provenance import Provenance
from fingrav.contracts.result import Estimate, _Model

# one column of a metrics row: a number, a flag, a joined flag string or nothing
RowValue = bool | int | float | str | None
# the flattened columns of a result for summary.csv / metrics (column name -> value): derived from the typed fields
# by one function (`fingrav.analysis.combine.combined_row`, `fingrav.analysis.fleet.fleet_spread`) and read only by
# the table writer (`fingrav.report.table`); every consumer reads the typed fields for a number
MetricsRow = dict[str, RowValue]


class TruthComparison(_Model):
    """The simulator's true power (W) and the measured power against it ((measured - truth) / truth x 100)."""

    power_w: float | None = None
    power_vs_truth_pct: float | None = None


class RankResult(_Model):
    """One GPU (rank) of a multi-GPU scenario, as its own analysis gave it (nothing recomputed)."""

    rank: int
    power: Estimate  # W: the headline power
    energy_per_exec: Estimate  # mJ
    sse_reading_w: float | None = None
    interleaved_reading_w: float | None = None
    exec_time_us: float | None = None
    ssp_lois: int | None = None
    ssp_runs_golden: int | None = None
    valid: bool
    flags: str = ""
    channels_w: dict[str, float | None]  # SSP mean per channel (W)
    truth: TruthComparison | None = None  # simulator only


class CombinedChannel(_Model):
    """The summed SSP power of one channel over all GPUs (W, joint cluster bootstrap CI), the summed polynomial fit
    (mW, numpy.polyfit order) and the LOIs it rests on."""

    mean: Estimate
    fit_coeffs_mw: list[float] | None = None
    lois: int = 0


class Combined(_Model):
    """The sum over all GPUs: power (W, `power.method` says how its CI was obtained), per channel, energy per
    execution (mJ), valid when every GPU is."""

    power: Estimate
    runs_resampled: int = 0
    channels: dict[str, CombinedChannel]
    energy_per_exec: Estimate
    valid: bool
    truth: TruthComparison | None = None  # simulator only


class CombinedResult(_Model):
    """profiles/combined/<scenario>.json: the combine stage's output (`fingrav.analysis.combine`)."""

    format_version: int = FORMAT_VERSION
    scenario: str
    world_size: int
    ranks: list[RankResult]
    combined: Combined
    row: MetricsRow
    row_columns: list[str]
    provenance: Provenance | None = None


class FleetCard(_Model):
    """One card's value of a fleet metric as its own analysis gave it, its deviation from the fleet mean (%, with a
    CI; None when the card is left out of the statistics) and its validity."""

    gpu: int
    value: Estimate
    deviation_pct: Estimate | None = None
    valid: bool | None = None


class FleetMetric(_Model):
    """The card-to-card spread of one metric (`fingrav.analysis.fleet`): the mean over the cards and the spread
    ((max - min) / mean, %) with CIs (`ci_method`), what noise alone spreads identical cards by, Cochran's Q test
    (`distinct`) and the card-to-card standard deviation with the noise taken out (% of the mean). `n`: cards used."""

    cards: list[FleetCard]
    n: int
    ci_method: str
    mean: Estimate
    spread_pct: Estimate
    noise_spread_pct: float | None = None
    q: float | None = None
    q_noise_quantile: float | None = None
    distinct: bool | None = None
    between_card_sd_pct: float | None = None


class FleetResult(_Model):
    """profiles/fleet/<scenario>.json: the fleet stage's output (`fingrav.analysis.fleet`)."""

    format_version: int = FORMAT_VERSION
    scenario: str
    gpus: list[int]
    ci_level: float
    metrics: dict[str, FleetMetric]
    row: MetricsRow
    provenance: Provenance | None = None
