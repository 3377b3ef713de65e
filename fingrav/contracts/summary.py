"""summary.csv beyond one scenario's result: the column types of the tables the report writes, the per-channel
SSP columns, the multi-GPU columns (combine stage) and the fleet columns (device.fleet).

One scenario's columns (their names, order, units and CIs) are derived from the result model
(`fingrav.contracts.result`: `METRICS`, `SUMMARY`, `ci_columns`); the columns before format 3 and their new names are
in `fingrav.contracts.legacy`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

from fingrav.contracts.result import BY_COLUMN, FLAG_SEPARATOR, ci_columns, column_kind
from fingrav.contracts.result import channel_column as channel_column
from fingrav.contracts.result import split_flags as split_flags

# multi-GPU sweeps (combine stage): per-GPU columns of one metric, `<metric>_gpu<k>`, and the combined sum
RANK_SUFFIX: Final = "_gpu"

# sweeps over listed GPUs (device.gpus): `GPU` = the device index that measured the row; with device.fleet, per
# metric of `FLEET_METRICS` (name -> (unit, the result column it spreads)) the card-to-card spread over every listed
# GPU (fingrav.analysis.fleet): `fleet_gpus`; `fleet_<name>_<unit>` (the mean over the cards) with its CI;
# `fleet_<name>_spread_pct` ((max - min) / mean) with its CI; `fleet_<name>_noise_spread_pct` (what measurement
# noise alone spreads identical cards by) and `fleet_<name>_distinct` (whether the cards differ beyond it)
GPU: Final = "gpu"
FLEET_METRICS: Final[dict[str, tuple[str, str]]] = {
    "power": ("w", "power_w"),
    "energy_per_exec": ("mj", "energy_per_exec_mj"),
    "exec_time": ("us", "exec_time_us"),
}


def fleet_metric_columns(name: str) -> dict[str, str]:
    """The fleet columns of one metric of `FLEET_METRICS`, by role: mean, ci_low, ci_high, spread, spread_ci_low,
    spread_ci_high, noise_spread, distinct."""
    unit = FLEET_METRICS[name][0]
    mean, spread = f"fleet_{name}_{unit}", f"fleet_{name}_spread_pct"
    lo, hi = ci_columns(mean)
    s_lo, s_hi = ci_columns(spread)
    return {
        "mean": mean,
        "ci_low": lo,
        "ci_high": hi,
        "spread": spread,
        "spread_ci_low": s_lo,
        "spread_ci_high": s_hi,
        "noise_spread": f"fleet_{name}_noise_spread_pct",
        "distinct": f"fleet_{name}_distinct",
    }


def fleet_columns() -> tuple[str, ...]:
    """The fleet columns in their order (after every other column)."""
    return ("fleet_gpus", *(c for name in FLEET_METRICS for c in fleet_metric_columns(name).values()))


_CHANNEL_COL = re.compile(r"^ssp_(?P<channel>.+)_power_w$")

ColumnType = Literal["str", "int", "bool", "float"]


def channel_of_column(column: str) -> str | None:
    """The channel named by an `ssp_<channel>_power_w` column, else None."""
    if column in BY_COLUMN:
        return None
    m = _CHANNEL_COL.match(column)
    return m.group("channel") if m else None


def column_type(column: str) -> ColumnType:
    """The type of a table column (`fingrav.contracts.result.column_kind`; flags are text)."""
    k = column_kind(column)
    return "str" if k == "flags" else k  # type: ignore[return-value]


def join_flags(flags: Iterable[str]) -> str:
    """Flags as summary.csv writes them."""
    return FLAG_SEPARATOR.join(flags)
