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

from fingrav.config import (
    AnalysisConfig,
    CalibrationConfig,
    DeviceConfig,
    Predecessor,
    RunPolicy,
    SweepConfig,
    parse_config,
)
from fingrav.contracts.profile import Estimate, ScenarioSummary, Throughput
from fingrav.contracts.roles import PROFILED_ROLES
from fingrav.contracts.units import MW_PER_W
from fingrav.contracts.work import Work
from fingrav.errors import ConfigError
from fingrav.layout import SweepLayout

logger = logging.getLogger(__name__)

API_SWEEP = "api"  # the sweep name of the one-scenario config the API builds
LIMIT_CYCLING_FLAG = "power_limit_cycling"


@dataclass(frozen=True)
class LimitCycle:
    """A power limiter that clamps the card in cycles (flag `power_limit_cycling`, from the reference run):
    block_spread_pct = (max - min) / mean of the reference run's `block_ms` block means of settled power; the cycle
    (`fingrav.analysis.sustained.LimitCycle`): whole cycles seen, period (ms), released fraction (duty, %), high and
    low levels and the whole-cycle mean (W), each (value, ci_low, ci_high); None where fewer than two clamps were
    seen."""

    block_ms: float
    block_spread_pct: float
    cycles: int | None = None
    period_ms: tuple[float | None, float | None, float | None] | None = None
    duty_pct: tuple[float | None, float | None, float | None] | None = None
    high_w: tuple[float | None, float | None, float | None] | None = None
    low_w: tuple[float | None, float | None, float | None] | None = None
    mean_w: tuple[float | None, float | None, float | None] | None = None


@dataclass(frozen=True)
class ProfileResult:
    """What `profile` measured for one kernel on GPU 0 (units in the names: W, mJ, µs).

    Every number is the pipeline's: `summary` is the scenario's summary.json (`ScenarioSummary`), `row` its
    summary.csv row. `profile`: the TOI profile as lois.parquet holds it (what the report plots): the golden LOIs
    of the profiled roles, one row per power sample inside an execution: channel, role (ssp, sse, first, warmup,
    pred), run, exec_index, toi_frac (where inside the execution, 0..1), power_w (the SSP mean itself is computed
    from centroid-aligned LOIs, `summary.channels`). `limit_cycle`: set where the power limiter cycles (else None).
    `results_dir`: where the files are (None when they were in a temporary folder, now removed)."""

    scenario: str
    kernel: str
    ssp_power_w: Estimate
    energy_per_exec_mj: Estimate
    exec_time_us: Estimate
    cycle_time_us: Estimate
    work: Work | None
    throughput: Throughput | None
    flags: tuple[str, ...]
    valid: bool
    profile: pl.DataFrame
    limit_cycle: LimitCycle | None
    summary: ScenarioSummary
    results_dir: Path | None

    @property
    def row(self) -> dict[str, Any]:
        """The scenario's summary.csv row (`fingrav.contracts.summary`)."""
        return dict(self.summary.row)


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


def _estimate(row: Mapping[str, Any], name: str, unit: str) -> Estimate:
    return Estimate(
        value=row.get(f"{name}_{unit}"),
        ci_low=row.get(f"{name}_ci_low_{unit}"),
        ci_high=row.get(f"{name}_ci_high_{unit}"),
    )


def _limit_cycle(summary: ScenarioSummary) -> LimitCycle | None:
    ref = summary.reference or {}
    if LIMIT_CYCLING_FLAG not in summary.flags or ref.get("block_spread_pct") is None:
        return None
    lc = ref.get("limit_cycle")

    def part(key: str, scale: float) -> tuple[float | None, float | None, float | None] | None:
        if not lc:
            return None
        d = lc[key]
        return tuple(None if d.get(k) is None else float(d[k]) * scale for k in ("value", "ci_low", "ci_high"))  # type: ignore[return-value]

    return LimitCycle(
        block_ms=float(ref.get("block_ms") or 0.0),
        block_spread_pct=float(ref["block_spread_pct"]),
        cycles=int(lc["cycles"]) if lc else None,
        period_ms=part("period_ns", 1e-6),
        duty_pct=part("duty", 100.0),
        high_w=part("high_mw", 1e-3),
        low_w=part("low_mw", 1e-3),
        mean_w=part("mean_mw", 1e-3),
    )


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
        with_truth=cfg.device.backend == "sim",
    )
    return layout.summary_json(scenario.name, 0)


def read_result(layout: SweepLayout, scenario: str, keep: bool = True) -> ProfileResult:
    """The ProfileResult of a differentiated scenario on GPU 0 of `layout` (keep: say where the files are)."""
    from fingrav import rawio

    summary = rawio.read_model(layout.summary_json(scenario, 0), ScenarioSummary)
    row = summary.row
    return ProfileResult(
        scenario=scenario,
        kernel=str(row.get("kernel")),
        ssp_power_w=_estimate(row, "ssp_power", "w"),
        energy_per_exec_mj=_estimate(row, "energy_per_exec", "mj"),
        exec_time_us=_estimate(row, "exec_time", "us"),
        cycle_time_us=_estimate(row, "cycle_time", "us"),
        work=summary.work,
        throughput=summary.throughput,
        flags=tuple(summary.flags),
        valid=bool(summary.valid),
        profile=_profile_frame(layout.lois(scenario, 0)),
        limit_cycle=_limit_cycle(summary),
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
    e, p = out.energy_per_exec_mj, out.ssp_power_w
    logger.info(
        "profile %s: SSP %s W [%s, %s], energy %s mJ per execution, %.4g us, valid=%s%s",
        out.kernel,
        *(f"{v:.4g}" if v is not None else "n/a" for v in (p.value, p.ci_low, p.ci_high, e.value)),
        (out.exec_time_us.value or float("nan")),
        out.valid,
        f", flags {';'.join(out.flags)}" if out.flags else "",
    )
    return out


__all__ = ["LimitCycle", "ProfileResult", "build_config", "profile", "read_result", "run_stages"]
