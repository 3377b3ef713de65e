"""The Python API: `fingrav.profile(kernel_or_callable, device=..., policy=...)` measures one kernel without Snakemake.

It validates a one-scenario sweep config exactly as the pipeline does (`fingrav.config.parse_config`, the callable
check of `fingrav.preflight`), then calls the pipeline's own stage functions in order, in a results folder laid
out like a sweep's (`fingrav.layout.SweepLayout`: a temporary folder, removed afterwards, unless `results` is
given): `stages.calibrate.run` (skipped when the folder already holds a calibration), `stages.collect.run`,
`stages.bin.run`, `stages.differentiate.run`. The numbers are therefore the pipeline's, for the same raw data.

Analysis side (polars): `fingrav/__init__.py` imports this module only when `fingrav.profile` is first used.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel

from fingrav.backends import get_backend
from fingrav.config import (
    AnalysisConfig,
    CalibrationConfig,
    DeviceConfig,
    Predecessor,
    RunPolicy,
    SweepConfig,
    parse_config,
)
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.result import Estimate, Flags, LimitCycle, ScenarioResult, Throughput
from fingrav.contracts.roles import PROFILED_ROLES
from fingrav.contracts.units import MW_PER_W
from fingrav.contracts.work import Work
from fingrav.errors import ConfigError
from fingrav.layout import SweepLayout

logger = logging.getLogger(__name__)

API_SWEEP = "api"  # the sweep name of the one-scenario config the API builds
LIMIT_CYCLING_FLAG = "power_limit_cycling"


@dataclass(frozen=True)
class ProfileResult:
    """What `profile` measured for one kernel on GPU 0: the scenario's typed result (`result`,
    `fingrav.contracts.result.ScenarioResult`) and the fields a user reads first (units in the names: W, mJ, µs).

    Every number is the pipeline's: `summary` is the scenario's summary.json (`ScenarioSummary`). `power_w` is the
    headline (`power_source`: sustained = the reference run, as users launch kernels; burst = the method SSP),
    `ssp_power_w` the method's SSP of the short stamped runs after idle (valid on its own: `result.ssp.valid`).
    `profile`: the TOI profile as lois.parquet holds it (what the report plots): the golden LOIs of the profiled
    roles, one row per power sample inside an execution: channel, role (ssp, sse, first, warmup, pred), run,
    exec_index, toi_frac (where inside the execution, 0..1), power_w. `limit_cycle`: set where the power limiter
    cycles (else None). `results_dir`: where the files are (None when they were in a temporary folder, now
    removed)."""

    scenario: str
    kernel: str
    power_w: Estimate
    power_source: str
    ssp_power_w: Estimate
    energy_per_exec_mj: Estimate
    exec_time_us: Estimate
    work: Work | None
    throughput: Throughput
    flags: Flags
    valid: bool
    profile: pl.DataFrame
    limit_cycle: LimitCycle | None
    summary: ScenarioSummary
    results_dir: Path | None

    @property
    def row(self) -> dict[str, Any]:
        """The result's flat columns (`ScenarioResult.flat`: summary.csv's and every other column)."""
        return self.result.flat()

    @property
    def result(self) -> ScenarioResult:
        """The scenario's typed result (every number, `fingrav.contracts.result`)."""
        return self.summary.result

    def __str__(self) -> str:
        """One paragraph: what was measured, the headline and its source, the energy, the method SSP, time,
        throughput where known, validity and flags."""
        r = self.result
        parts = [
            f"{self.scenario} ({self.kernel}): {self.power_w} ({self.power_source}), "
            f"{self.energy_per_exec_mj} per execution, {self.exec_time_us} per execution",
            f"method SSP {self.ssp_power_w} ({'valid' if r.ssp.valid else 'not valid: ' + ', '.join(r.ssp.invalid_by)})"
            if r.ssp.power.has_value
            else "method SSP n/a",
        ]
        if r.throughput.tflop_s.has_value:
            parts.append(f"{r.throughput.tflop_s}, {r.throughput.tflop_s_per_w}")
        elif r.throughput.gb_s.has_value:
            parts.append(f"{r.throughput.gb_s}")
        if self.limit_cycle is not None:
            parts.append(f"power limiter cycles every {self.limit_cycle.period}")
        state = "valid" if self.valid else "NOT valid: " + ", ".join(self.flags.invalidating)
        notes = f"; notes: {', '.join(self.flags.notes)}" if self.flags.notes else ""
        return "; ".join(parts) + f". {state}{notes}."


def _section(value: Any) -> Any:
    """A config section given as a model, a mapping or None -> a JSON-able mapping (or None)."""
    if value is None:
        return None
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=False)
    if isinstance(value, Mapping):
        return dict(value)
    raise ConfigError(f"expected a fingrav.config model or a mapping, got {type(value).__name__}")


def _device(device: DeviceConfig | Mapping[str, Any] | str | None) -> dict[str, Any]:
    """device= as a config mapping: "sim" | "sim:h200" | "nvml" | "amdsmi", a DeviceConfig, a mapping, None (sim)."""
    if device is None:
        return {}
    if isinstance(device, str):
        backend, _, preset = device.partition(":")
        out: dict[str, Any] = {"backend": backend}
        if preset:
            out["sim"] = {"preset": preset}
        return out
    return _section(device)


def _target_of(fn: Callable[..., Any]) -> str:
    """'module:name' of a module-level function (a notebook's functions live in module __main__)."""
    module, qual = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not module or not qual or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", qual):
        raise ConfigError(
            f"{fn!r}: a factory passed to fingrav.profile must be a module-level function (not a lambda, method or "
            "closure): fingrav imports it by name; or pass its target as 'package.module:factory'"
        )
    return f"{module}:{qual}"


def _kernel(kernel: Any, args: Mapping[str, Any] | None, flops: float | None, nbytes: float | None) -> dict[str, Any]:
    """kernel_or_callable as a kernel config mapping: a kernel model, a mapping, a target string or a factory."""
    if isinstance(kernel, BaseModel | Mapping):
        if args or flops is not None or nbytes is not None:
            raise ConfigError("args, flops and bytes go with a factory or a target; a kernel model carries its own")
        return _section(kernel)
    if isinstance(kernel, str) or callable(kernel):
        target = kernel if isinstance(kernel, str) else _target_of(kernel)
        out: dict[str, Any] = {"kind": "callable", "target": target, "args": dict(args or {})}
        if flops is not None:
            out["flops"] = float(flops)
        if nbytes is not None:
            out["bytes"] = float(nbytes)
        return out
    raise ConfigError(
        f"fingrav.profile: {type(kernel).__name__} is not a kernel (a fingrav.config kernel model or mapping, a "
        "'package.module:factory' target, or a module-level factory function)"
    )


def build_config(
    kernel: Any,
    device: Any = None,
    policy: Any = None,
    *,
    analysis: Any = None,
    calibration: Any = None,
    predecessor: Predecessor | Mapping[str, Any] | None = None,
    name: str | None = None,
    seed: int = 0,
    args: Mapping[str, Any] | None = None,
    flops: float | None = None,
    bytes: float | None = None,  # noqa: A002 - the config field's name
) -> SweepConfig:
    """The one-scenario sweep config `profile` runs, validated like a sweep file (ConfigError naming the field)."""
    kern = _kernel(kernel, args, flops, bytes)
    scenario: dict[str, Any] = {"name": name or "kernel", "kernel": kern}
    if predecessor is not None:
        scenario["predecessor"] = _section(predecessor)
    data: dict[str, Any] = {"sweep": API_SWEEP, "seed": int(seed), "device": _device(device), "scenarios": [scenario]}
    for key, value in (("run_policy", policy), ("analysis", analysis), ("calibration", calibration)):
        if value is not None:
            data[key] = _section(value)
    cfg = parse_config(data)
    if cfg.device.world_size > 1:
        raise ConfigError("fingrav.profile measures one GPU (device.world_size 1); several GPUs: run the pipeline")
    return cfg


def _profile_frame(lois_path: Path) -> pl.DataFrame:
    """The golden LOIs of the profiled roles (ProfileResult.profile), power in W."""
    return (
        pl.scan_parquet(lois_path)
        .filter(pl.col("golden") & pl.col("role").cast(pl.String).is_in(list(PROFILED_ROLES)))
        .select(
            pl.col("channel").cast(pl.String),
            pl.col("role").cast(pl.String),
            "run",
            "exec_index",
            "toi_frac",
            (pl.col("power_mw") / MW_PER_W).alias("power_w"),
        )
        .sort("channel", "role", "toi_frac")
        .collect()
    )


def limit_cycle_of(result: ScenarioResult) -> LimitCycle | None:
    """The limit cycle where the power limiter cycles (flag `power_limit_cycling` and a segmented cycle)."""
    return result.sustained.limit_cycle if LIMIT_CYCLING_FLAG in result.flags.all else None


def run_stages(cfg: SweepConfig, layout: SweepLayout) -> Path:
    """Calibrate (unless `layout` has a calibration), collect, bin and differentiate the config's one scenario on
    GPU 0 through the pipeline's stage functions; returns summary.json's path."""
    from fingrav.preflight import check_callables
    from fingrav.stages import bin as bin_stage
    from fingrav.stages import calibrate, collect, differentiate

    if cfg.device.backend != "replay":  # as preflight: a replay never runs the factory
        check_callables(cfg)
    scenario = cfg.scenarios[0]
    if layout.calibration_json(0).exists() and cfg.device.backend != "replay":
        logger.info("calibration found in %s: kept", layout.root)
    else:
        calibrate.run(layout, cfg.device, cfg.calibration, cfg.seed)
    collect.run(layout, cfg.device, scenario, cfg.policy_for(scenario.name), cfg.seed, cfg.calibration)
    bin_stage.run(layout, scenario.name, 0, cfg.analysis)
    differentiate.run(
        layout,
        scenario.name,
        0,
        cfg.analysis,
        cfg.calibration.max_clock_residual_us,
        with_truth=get_backend(cfg.device.backend).truth,
    )
    return layout.summary_json(scenario.name, 0)


def read_result(layout: SweepLayout, scenario: str, keep: bool = True) -> ProfileResult:
    """The ProfileResult of a differentiated scenario on GPU 0 of `layout` (keep: say where the files are)."""
    from fingrav import rawio

    summary = rawio.read_model(layout.summary_json(scenario, 0), ScenarioSummary)
    r = summary.result
    return ProfileResult(
        scenario=scenario,
        kernel=str(r.labels.kernel),
        power_w=r.headline.power,
        power_source=r.headline.power_source,
        ssp_power_w=r.ssp.power,
        energy_per_exec_mj=r.headline.energy_per_exec,
        exec_time_us=r.headline.exec_time,
        work=summary.work,
        throughput=r.throughput,
        flags=r.flags,
        valid=r.valid,
        profile=_profile_frame(layout.lois(scenario, 0)),
        limit_cycle=limit_cycle_of(r),
        summary=summary,
        results_dir=layout.root if keep else None,
    )


def profile(
    kernel_or_callable: Any,
    device: DeviceConfig | Mapping[str, Any] | str | None = None,
    policy: RunPolicy | Mapping[str, Any] | None = None,
    *,
    analysis: AnalysisConfig | Mapping[str, Any] | None = None,
    calibration: CalibrationConfig | Mapping[str, Any] | None = None,
    predecessor: Predecessor | Mapping[str, Any] | None = None,
    name: str | None = None,
    seed: int = 0,
    results: str | Path | None = None,
    args: Mapping[str, Any] | None = None,
    flops: float | None = None,
    bytes: float | None = None,  # noqa: A002 - the config field's name
) -> ProfileResult:
    """Measure one kernel with the FinGraV method and return its typed result (module docstring).

    kernel_or_callable: a `fingrav.config` kernel model (GemmKernel, AttentionKernel, ...) or its mapping
    ({"kind": "gemm", ...}); a callable kernel's target "package.module:factory"; or the factory itself (a
    module-level function; `args`, `flops` and `bytes` as in `fingrav.config.CallableKernel`).
    device: "sim" (default, simulated MI300X), "sim:h200", "nvml", "amdsmi", a DeviceConfig or its mapping
    (a replay: {"backend": "replay", "replay_dir": ...}, with `name` the recorded scenario's).
    policy / analysis / calibration: the sweep config's sections (models or mappings; defaults as in a sweep).
    results: a folder to keep the files in (laid out like results/<sweep>/; a calibration already there is
    reused); None: a temporary folder, removed before returning.
    Raises ConfigError (a bad argument, naming the field) or the stage's error (DeviceError, DataError)."""
    cfg = build_config(
        kernel_or_callable, device, policy, analysis=analysis, calibration=calibration, predecessor=predecessor,
        name=name, seed=seed, args=args, flops=flops, bytes=bytes,
    )  # fmt: skip
    scenario = cfg.scenarios[0].name
    if results is not None:
        from fingrav.guard import check_write

        layout = SweepLayout(Path(results))
        check_write(layout.root, "results")  # never into a committed dataset (fingrav.guard)
        run_stages(cfg, layout)
        out = read_result(layout, scenario, keep=True)
    else:
        with tempfile.TemporaryDirectory(prefix="fingrav-") as tmp:
            layout = SweepLayout(Path(tmp))
            run_stages(cfg, layout)
            out = read_result(layout, scenario, keep=False)
    logger.info("profile: %s", out)
    return out


__all__ = ["LimitCycle", "ProfileResult", "build_config", "limit_cycle_of", "profile", "read_result", "run_stages"]
