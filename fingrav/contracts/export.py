"""The export formats (`fingrav export`, `fingrav.export`), defined once.

* The JSON result file (`ResultFile`): every scenario's summary.json (`ScenarioSummary`) of one sweep and GPU in
  one file. Its JSON schema, generated from these models, is committed as docs/result.schema.json (`fingrav
  result-schema`; a test keeps it equal to the models); the schema's `$id` carries `FORMAT_VERSION`, the version
  every result file carries (a summary.json validates against the schema's `$defs/ScenarioSummary`).
* The aiconfigurator-style CSV (`AICONFIGURATOR_COLUMNS`): one row per scenario in the style of NVIDIA
  aiconfigurator's collector perf files (framework, version, device, op_name, kernel_source, then the op's own
  columns): the op, its shape and dtype, latency, power, energy, the power limit, each number with its CI.
  Units: latency ms (the kernel's execution time, median over golden SSP runs), power W (the headline power:
  sustained where there is a reference run, else the method SSP), energy mJ per execution (headline power x its
  cycle), power_limit W (the device's enforced limit; empty where unknown).
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ConfigDict

from fingrav.contracts import RESULT_FORMAT_VERSION as FORMAT_VERSION
from fingrav.contracts.profile import ScenarioSummary

RESULT_SCHEMA_ID: Final = f"urn:fingrav:result:v{FORMAT_VERSION}"
RESULT_SCHEMA_TITLE: Final = "fingrav result file"


class ResultFile(BaseModel):
    """results.json (`fingrav export --format json`): the sweep's scenarios on one GPU, each its summary.json."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format_version: int = FORMAT_VERSION
    sweep: str | None = None
    rank: int = 0
    created_utc: str
    scenarios: list[ScenarioSummary]


def result_schema() -> dict[str, Any]:
    """The JSON schema of `ResultFile` (draft 2020-12), versioned by `$id`."""
    schema = ResultFile.model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": RESULT_SCHEMA_ID,
        **schema,
        "title": RESULT_SCHEMA_TITLE,
        "description": "fingrav's JSON result file (fingrav export --format json): one summary.json per scenario "
        f"(format_version {FORMAT_VERSION}; a summary.json validates against $defs/ScenarioSummary). Units are in "
        "the field names: _mw mW, _ns ns, _mj mJ; a scenario's 'result' is its typed result (W, us, mJ, %; every "
        "number an Estimate with its CI, unit and method), which its summary.csv row and metrics are derived from.",
    }


AICONFIGURATOR_COLUMNS: Final[tuple[str, ...]] = (
    "framework",
    "version",
    "device",
    "op_name",
    "kernel_source",
    "scenario",
    "shape",
    "dtype",
    "predecessor",
    "latency",
    "latency_ci_low",
    "latency_ci_high",
    "power",
    "power_ci_low",
    "power_ci_high",
    "energy",
    "energy_ci_low",
    "energy_ci_high",
    "power_limit",
    "valid",
    "flags",
)
