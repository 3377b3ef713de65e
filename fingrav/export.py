"""Exports of a sweep's results (`fingrav export`): the JSON result file and the aiconfigurator-style CSV.

Reads every scenario's `profiles/gpu<k>/<scenario>/summary.json` (`fingrav.contracts.profile.ScenarioSummary`) and
writes `export/results.json` (`fingrav.contracts.export.ResultFile`, schema docs/result.schema.json) or
`export/aiconfigurator.csv` (`fingrav.contracts.export.AICONFIGURATOR_COLUMNS`); paths from `fingrav.layout`.
Recomputes nothing. Standard library + pydantic (no polars), so it runs wherever the results are.
"""

from __future__ import annotations

import csv
import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import fingrav
from fingrav import rawio
from fingrav.backends import BACKENDS, Backend
from fingrav.config import Scenario
from fingrav.contracts.export import AICONFIGURATOR_COLUMNS, ResultFile
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.provenance import DeviceInfo, Provenance
from fingrav.contracts.units import NS_PER_MS, NS_PER_US
from fingrav.errors import DataError
from fingrav.kinds import kind_of
from fingrav.layout import SweepLayout, gpu_dir

logger = logging.getLogger(__name__)

Format = Literal["json", "aiconfigurator"]
FORMATS: tuple[Format, ...] = ("json", "aiconfigurator")


def scenario_names(layout: SweepLayout, rank: int = 0) -> list[str]:
    """The scenarios of GPU `rank` that have a summary.json, sorted."""
    base = layout.root / "profiles" / gpu_dir(rank)
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / "summary.json").is_file())


def load_summaries(layout: SweepLayout, scenarios: Sequence[str] | None = None, rank: int = 0) -> list[ScenarioSummary]:
    """Every (or the named) scenario's summary.json on GPU `rank`; DataError when there is none or one is missing."""
    names = list(scenarios) if scenarios else scenario_names(layout, rank)
    if not names:
        raise DataError(f"{layout.root}: no profiles/{gpu_dir(rank)}/<scenario>/summary.json (run the pipeline first)")
    out = []
    for name in names:
        path = layout.summary_json(name, rank)
        if not path.is_file():
            raise DataError(f"{path}: missing (no differentiated scenario {name!r} on GPU {rank})")
        out.append(rawio.read_model(path, ScenarioSummary))
    return out


def result_file(summaries: Sequence[ScenarioSummary], sweep: str | None = None, rank: int = 0) -> ResultFile:
    """The JSON result file of these summaries."""
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    return ResultFile(sweep=sweep, rank=rank, created_utc=now, scenarios=list(summaries))


def power_limit_w(device: DeviceInfo | Mapping[str, Any] | None) -> float | None:
    """The device's power limit (W) from its recorded identity (`DeviceInfo.power_limit_w`): NVML's enforced limit
    (else its management limit), the simulator's cap; None where the backend records none (amdsmi)."""
    if device is None:
        return None
    dev = device if isinstance(device, DeviceInfo) else DeviceInfo.model_validate(dict(device))
    return dev.power_limit_w


def _recorded_backend(device: DeviceInfo) -> Backend | None:
    """The registry entry of the backend that measured (its describe() record); None when the record names
    none or one fingrav does not have (synthetic test data)."""
    return BACKENDS.get(str(device.backend))


def _kernel_source(kernel: Mapping[str, Any], info: Mapping[str, Any], backend: Backend | None) -> str:
    if backend is not None and backend.truth:  # the simulator runs no kernel: it models it
        return "sim-roofline"
    return kind_of(kernel).export_source(kernel, info) if kernel.get("kind") else ""


def _shape(kernel: Mapping[str, Any]) -> str:
    items = kind_of(kernel).export_shape(kernel) if kernel.get("kind") else []
    return " ".join(f"{k}={int(v) if isinstance(v, bool) else v}" for k, v in items)


def aiconfigurator_row(s: ScenarioSummary) -> dict[str, Any]:
    """One scenario as an aiconfigurator-style row (`AICONFIGURATOR_COLUMNS`; units in the contract's docstring)."""
    raw = s.provenance.raw or Provenance()
    device = raw.device or DeviceInfo()
    scen = raw.scenario if raw.scenario is not None else s.plan.provenance.scenario
    kernel: dict[str, Any] = dict(scen.get("kernel") or {}) if scen is not None else {}
    kind = str(kernel.get("kind", ""))
    info = (raw.kernels or {}).get("main") or {}
    backend = _recorded_backend(device)
    if backend is not None and backend.truth:  # the simulator: fingrav itself runs the kernels
        framework, version = str(backend.framework), str(raw.fingrav_version or fingrav.__version__)
    else:
        framework, version = "torch", str(device.torch_version or raw.packages.get("torch") or "")
    pred = None
    if scen is not None and scen.get("predecessor"):
        pred = Scenario.model_validate(scen).predecessor
    r = s.result
    latency = r.headline.exec_time.scaled(NS_PER_US / NS_PER_MS, "ms")
    power, energy = r.headline.power, r.headline.energy_per_exec
    return {
        "framework": framework,
        "version": version,
        "device": str(device.name or device.torch_name or ""),
        "op_name": kind,
        "kernel_source": _kernel_source(kernel, info, backend),
        "scenario": s.scenario,
        "shape": _shape(kernel),
        "dtype": str(kernel.get("dtype") or ""),
        "predecessor": f"{pred.kernel.label()} x{pred.count}" if pred is not None else "",
        "latency": latency.value,
        "latency_ci_low": latency.ci_low,
        "latency_ci_high": latency.ci_high,
        "power": power.value,
        "power_ci_low": power.ci_low,
        "power_ci_high": power.ci_high,
        "energy": energy.value,
        "energy_ci_low": energy.ci_low,
        "energy_ci_high": energy.ci_high,
        "power_limit": power_limit_w(device),
        "valid": bool(s.valid),
        "flags": ";".join(s.flags),
    }


def write_aiconfigurator_csv(summaries: Sequence[ScenarioSummary], path: Path) -> Path:
    """The aiconfigurator-style CSV of these summaries (empty cell = unknown), written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(AICONFIGURATOR_COLUMNS), lineterminator="\n")
        w.writeheader()
        for s in summaries:
            r = aiconfigurator_row(s)
            w.writerow({k: ("" if v is None else str(v).lower() if isinstance(v, bool) else v) for k, v in r.items()})
    tmp.replace(path)
    return path


def export(
    layout: SweepLayout,
    fmt: Format,
    out: Path | None = None,
    scenarios: Sequence[str] | None = None,
    rank: int = 0,
) -> Path:
    """Write one export of the sweep under `layout` (default path: `layout.results_json` / `aiconfigurator_csv`)."""
    if fmt not in FORMATS:
        raise DataError(f"export format {fmt!r}: one of {FORMATS}")
    summaries = load_summaries(layout, scenarios, rank)
    if fmt == "json":
        path = rawio.write_json(out or layout.results_json, result_file(summaries, layout.root.name, rank))
    else:
        path = write_aiconfigurator_csv(summaries, out or layout.aiconfigurator_csv)
    logger.info("wrote %s (%d scenarios, GPU %d)", path, len(summaries), rank)
    return path
