"""The contracts between fingrav's stages, each defined once and imported everywhere else.

GPU-side package: stdlib, numpy, pyarrow and pydantic only (polars is imported lazily by the few helpers
that build polars expressions, and only when they are called).

* `units`: unit conversions (ns, µs, ms, mW, W, mJ, %).
* `roles`: run phases, execution segments and roles, the total channel.
* `plan`: the collection plan (plan.json), the stability probe's result, METHOD.md's guidance table.
* `sensor`: the calibrated `SensorModel` (ns throughout) of every channel, its step response, summary.json's sensor.
* `calibration`: calibration/gpu<k>.json (clock fit, sensors, load steps) and the calibration flags.
* `provenance`: the one `Provenance` record of every artifact (JSON files and parquet metadata alike).
* `binning`: the bin stage's record of the golden-run bins (binned.parquet metadata, summary.json's binning).
* `clock`: the GPU-to-host clock mapping (`ClockMap`).
* `tables`: column schemas of the raw and derived tables.
* `result`: the typed result of a scenario (`Estimate`, its groups), summary.csv's and metrics' columns.
* `legacy`: results before format 3 and their column names (old -> new).
* `summary`: the column types of the tables the report writes; multi-GPU and fleet columns.
* `multigpu`: the typed results of the combine (`CombinedResult`) and fleet (`FleetResult`) stages.
* `flags`: the flag registry (name, whether it invalidates a row, meaning, threshold).

Every artifact a stage writes carries `FORMAT_VERSION` (parquet metadata record, JSON top level).
"""

from __future__ import annotations

FORMAT_VERSION = 2  # 1: the layout before the contracts package (results/h200/gpu as committed 2026-11-29)
#: the result files (summary.json, export/results.json, metrics): 3 = the typed result model (`result`); readers
#: accept 2 (`legacy`: the old summary row and its column names)
RESULT_FORMAT_VERSION = 3
