"""The sweep configuration: pydantic v2 models, loading and error formatting.

This module is imported on the GPU machine too, so it depends only on pydantic and PyYAML.
Every model forbids unknown keys. `config/schema.json` is generated from `SweepConfig`
(`python -m fingrav.cli schema`) and a test keeps it in sync.

Units are in the field names (`_ms`, `_us`, `_mw`, `_pct`, `_ppm`); sizes are element counts.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from fingrav.errors import ConfigError

logger = logging.getLogger(__name__)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
RESERVED_SCENARIO_NAMES = frozenset({"calibration"})  # fingrav.layout: raw/gpu<k>/calibration/
Dtype = Literal["bf16", "fp16", "fp32"]


# bounds that keep a sweep finite (sizes, counts, durations): a value past them is a typo, not a measurement
Dim = Annotated[int, Field(ge=1, le=1 << 20)]  # a matrix dimension (elements)
Count = Annotated[int, Field(ge=1, le=1_000_000)]  # runs, executions, reads
DurationMs = Annotated[float, Field(gt=0, le=600_000.0)]  # at most 10 minutes
MAX_SCENARIOS = 2000
MAX_OPERAND_BYTES = 64 << 30  # a kernel's operands: larger than any GPU's memory here (H200: 141 GB) is a typo


class _Model(BaseModel):
    # strict: no bool -> int, no "2048" -> 2048; finite numbers only (a config value is never inf or NaN)
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


# --------------------------------------------------------------------------- kernels
class GemmKernel(_Model):
    """C[m,n] = A[m,k] @ B[k,n]; compute-bound for large square sizes."""

    kind: Literal["gemm"] = "gemm"
    m: Dim
    n: Dim
    k: Dim
    dtype: Dtype = "bf16"

    def label(self) -> str:
        return f"gemm {self.m}x{self.n}x{self.k} {self.dtype}"

    @model_validator(mode="after")
    def _fits(self) -> GemmKernel:
        size = (self.m * self.k + self.k * self.n + self.m * self.n) * DTYPE_BYTES[self.dtype]
        if size > MAX_OPERAND_BYTES:
            raise ValueError(f"gemm {self.m}x{self.n}x{self.k} {self.dtype} needs {size / 2**30:.0f} GiB of operands")
        return self


class GemvKernel(_Model):
    """y[m] = A[m,k] @ x[k] (a GEMM with n = 1); memory-bound."""

    kind: Literal["gemv"] = "gemv"
    m: Dim
    k: Dim
    dtype: Dtype = "bf16"

    def label(self) -> str:
        return f"gemv {self.m}x{self.k} {self.dtype}"

    @model_validator(mode="after")
    def _fits(self) -> GemvKernel:
        size = (self.m * self.k + self.m + self.k) * DTYPE_BYTES[self.dtype]
        if size > MAX_OPERAND_BYTES:
            raise ValueError(f"gemv {self.m}x{self.k} {self.dtype} needs {size / 2**30:.0f} GiB of operands")
        return self


DTYPE_BYTES: dict[str, int] = {"bf16": 2, "fp16": 2, "fp32": 4}


def size_label(size_bytes: int) -> str:
    """A buffer size as text in binary units: 65536 -> "64KiB", 2**30 -> "1GiB", 1000 -> "1000B"."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale}{unit}"
    return f"{size_bytes}B"


class AllReduceKernel(_Model):
    """All-reduce (sum) of a `size_bytes` buffer across the `device.world_size` GPUs of the sweep, one
    process per GPU (torch.distributed: NCCL on NVIDIA, RCCL on AMD, gloo on the simulator).
    Latency-bound for small buffers (64 KiB, 128 KiB), bandwidth-bound for large ones (512 MiB, 1 GiB)."""

    kind: Literal["allreduce"] = "allreduce"
    size_bytes: PositiveInt = Field(description="bytes of the buffer reduced on every GPU")
    dtype: Dtype = "bf16"

    @model_validator(mode="after")
    def _whole_elements(self) -> AllReduceKernel:
        if self.size_bytes % DTYPE_BYTES[self.dtype]:
            raise ValueError(f"size_bytes={self.size_bytes} is not a whole number of {self.dtype} elements")
        return self

    def label(self) -> str:
        return f"allreduce {size_label(self.size_bytes)} {self.dtype}"


class AllGatherKernel(_Model):
    """All-gather into a `size_bytes` output buffer on every GPU: each of the `device.world_size` GPUs
    contributes size_bytes / world_size bytes (the convention of nccl-tests)."""

    kind: Literal["allgather"] = "allgather"
    size_bytes: PositiveInt = Field(description="bytes of the gathered output on every GPU (all ranks' inputs)")
    dtype: Dtype = "bf16"

    @model_validator(mode="after")
    def _whole_elements(self) -> AllGatherKernel:
        if self.size_bytes % DTYPE_BYTES[self.dtype]:
            raise ValueError(f"size_bytes={self.size_bytes} is not a whole number of {self.dtype} elements")
        return self

    def label(self) -> str:
        return f"allgather {size_label(self.size_bytes)} {self.dtype}"


# Room for attention / user callables: add a model with its own `kind`.
Kernel = Annotated[GemmKernel | GemvKernel | AllReduceKernel | AllGatherKernel, Field(discriminator="kind")]
KERNEL_KINDS = ("gemm", "gemv", "allreduce", "allgather")
COLLECTIVE_KINDS = ("allreduce", "allgather")


def is_collective(kernel: Any) -> bool:
    """Whether a kernel model (or its dict) is a collective across GPUs."""
    kind = kernel.get("kind") if isinstance(kernel, dict) else getattr(kernel, "kind", None)
    return kind in COLLECTIVE_KINDS


class Predecessor(_Model):
    """Interleaving: run `kernel` `count` times right before the measured kernel in every run."""

    kernel: Kernel
    count: Count


class Scenario(_Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=80)]
    kernel: Kernel
    predecessor: Predecessor | None = None
    run_policy: RunPolicy | None = Field(
        None, description="per-scenario run policy: the fields given here override the sweep's run_policy"
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name.lower() in RESERVED_SCENARIO_NAMES:
            raise ValueError(f"{name!r} is reserved (raw/gpu<k>/{name}/ holds other files): choose another name")
        return name

    @property
    def has_collective(self) -> bool:
        """Whether the kernel or its predecessor is a collective (needs device.world_size >= 2)."""
        return is_collective(self.kernel) or (self.predecessor is not None and is_collective(self.predecessor.kernel))


# --------------------------------------------------------------------------- device
class SimOverrides(_Model):
    """Overrides of the simulated GPU preset; None keeps the preset's value."""

    sensor_period_ms: Annotated[float, Field(ge=0.05, le=10_000.0)] | None = None
    sensor_period_jitter_ms: Annotated[float, Field(ge=0)] | None = None
    sensor_window_ms: Annotated[float, Field(gt=0, le=10_000.0)] | None = None
    sensor_lag_ms: Annotated[float, Field(ge=0)] | None = None
    sensor_delay_ms: Annotated[float, Field(ge=0)] | None = None
    sensor_noise_mw: Annotated[float, Field(ge=0)] | None = None
    sensor_quantization_mw: Annotated[float, Field(ge=0)] | None = None
    clock_offset_us: float | None = None
    clock_drift_ppm: float | None = None
    exec_jitter_pct: Annotated[float, Field(ge=0, le=20)] | None = None
    outlier_run_fraction: Annotated[float, Field(ge=0, le=0.5)] | None = None
    launch_gap_us: Annotated[float, Field(ge=0)] | None = None


class SimConfig(_Model):
    preset: Literal["mi300x", "h200"] = "mi300x"
    overrides: SimOverrides = SimOverrides()


class DeviceConfig(_Model):
    backend: Literal["sim", "nvml", "amdsmi", "replay"] = "sim"
    index: Annotated[int, Field(ge=0)] = Field(0, description="device index of rank 0; rank k uses index + k")
    world_size: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="GPUs (one process each) every scenario runs on in lockstep; collectives need >= 2"
    )
    dist_backend: Literal["nccl", "gloo"] | None = Field(
        None,
        description="torch.distributed backend when world_size > 1 (None: nccl on GPUs - RCCL on ROCm -, gloo on sim)",
    )
    sim: SimConfig = SimConfig()
    replay_dir: str | None = Field(
        default=None, description="replay backend: folder holding raw/ and calibration raw data to replay"
    )

    @model_validator(mode="after")
    def _replay_needs_dir(self) -> DeviceConfig:
        if self.backend == "replay" and not self.replay_dir:
            raise ValueError("backend 'replay' needs device.replay_dir")
        return self


# --------------------------------------------------------------------------- calibration
class CalibrationConfig(_Model):
    """Clock synchronization and sensor characterization settings."""

    clock_bursts: Count = Field(10, description="bursts of GPU-timestamp reads spread over the calibration")
    clock_reads_per_burst: Count = 50
    steps: Annotated[int, Field(ge=4, le=1000)] = Field(40, description="on/off load cycles")
    step_on_ms: DurationMs = 150.0
    step_off_ms: DurationMs = 150.0
    max_clock_residual_us: PositiveFloat = Field(20.0, description="validity limit for the clock fit")


# --------------------------------------------------------------------------- run policy
class RunPolicy(_Model):
    """How many runs and executions per run; `auto` follows METHOD.md's guidance table and the
    measured sensor. Explicit values override the automatic choice field by field."""

    mode: Literal["auto", "explicit"] = "auto"
    runs: Count | None = Field(None, description="SSP runs (default: the guidance table)")
    sse_runs: Count | None = Field(
        None, description="SSE runs (default: enough for min_lois SSE LOIs, at least the guidance table, <= max_runs)"
    )
    executions_per_run: Count | None = Field(None, description="executions of the measured kernel per run")
    warmups: Annotated[int, Field(ge=0, le=50)] = 3
    timing_reps: Annotated[int, Field(ge=3, le=100)] = 5
    min_lois: PositiveInt = Field(30, description="LOIs wanted per profile (SSE and SSP)")
    max_runs: Count = Field(4000, description="upper bound on runs when more are needed for LOIs")
    probe_ms: DurationMs = Field(400.0, description="length of the stability probe (back-to-back executions)")
    reference_ms: Annotated[float, Field(ge=0, le=600_000.0)] = Field(
        0.0, description="length of a back-to-back reference run (settled power, energy-counter cross-check); 0: none"
    )
    stability_tol_pct: PositiveFloat = Field(
        1.0,
        description="power is stable once within this (%) of its final level, plus 3 standard errors of the "
        "compared mean; the SSP starts there. 0.25 removes most of the start-up transient the reading still lags "
        "(default sweep: SSP bias -0.3 % -> -0.1 %) at ~35 % more executions",
    )

    @model_validator(mode="after")
    def _explicit_needs_values(self) -> RunPolicy:
        if self.mode == "explicit" and (self.runs is None or self.executions_per_run is None):
            raise ValueError("mode 'explicit' needs run_policy.runs and run_policy.executions_per_run")
        if self.executions_per_run is not None and self.executions_per_run < self.warmups + 1:
            raise ValueError(
                f"run_policy.executions_per_run={self.executions_per_run} must be >= warmups + 1 = {self.warmups + 1}"
            )
        return self


Scenario.model_rebuild()


class AnalysisConfig(_Model):
    margin: Annotated[float, Field(gt=0, le=0.5)] | None = Field(
        None,
        description="binning margin as a fraction (0.02 = 2 %); unset: METHOD.md's guidance table for the "
        "measured kernel time, decided when binning",
    )
    bootstrap_reps: Annotated[int, Field(ge=100, le=100_000)] = 1000
    ci_level: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.95
    fit_degree: Annotated[int, Field(ge=0, le=8)] = 4
    min_lois: PositiveInt = Field(10, description="fewer LOIs than this flags a profile as too_few_lois")
    delay_correction: bool = Field(True, description="shift samples back by the calibrated sensor delay")
    max_drift_ppm: PositiveFloat = Field(200.0, description="flag clock_drift beyond this")
    max_ci_pct: PositiveFloat = Field(
        1.0,
        description="a row is valid only when the 95 % CIs of its SSP power and energy per execution are within "
        "+- this many % of the value (flag imprecise); collect more runs to get there",
    )


class SweepConfig(_Model):
    sweep: Annotated[str, Field(pattern=NAME_PATTERN, max_length=80)] = Field(
        description="name of the sweep; results go to results/<sweep>/"
    )
    seed: Annotated[int, Field(ge=0, le=2**63 - 1)] = 0
    device: DeviceConfig = DeviceConfig()
    calibration: CalibrationConfig = CalibrationConfig()
    run_policy: RunPolicy = RunPolicy()
    analysis: AnalysisConfig = AnalysisConfig()
    scenarios: Annotated[list[Scenario], Field(min_length=1, max_length=MAX_SCENARIOS)]

    @field_validator("scenarios")
    @classmethod
    def _unique_names(cls, scenarios: list[Scenario]) -> list[Scenario]:
        seen: set[str] = set()
        for s in scenarios:
            if s.name in seen:
                raise ValueError(f"duplicate scenario name {s.name!r}")
            seen.add(s.name)
        return scenarios

    @model_validator(mode="after")
    def _collectives_need_gpus(self) -> SweepConfig:
        n = self.device.world_size
        for i, s in enumerate(self.scenarios):
            if s.has_collective and n < 2:
                raise ValueError(
                    f"scenario {s.name!r} (scenarios.{i}) runs a collective: device.world_size must be >= 2 (it is {n})"
                )
            for part, k in (("kernel", s.kernel), ("predecessor", s.predecessor.kernel if s.predecessor else None)):
                if k is not None and k.kind == "allgather" and k.size_bytes % (n * DTYPE_BYTES[k.dtype]):
                    raise ValueError(
                        f"scenarios.{i}.{part}: allgather size_bytes={k.size_bytes} must split into "
                        f"device.world_size={n} whole {k.dtype} parts"
                    )
        if self.device.dist_backend == "gloo" and self.device.backend in ("nvml", "amdsmi"):
            raise ValueError("device.dist_backend 'gloo' cannot run collectives on GPUs: use 'nccl' (or leave it out)")
        if self.device.dist_backend == "nccl" and self.device.backend == "sim":
            raise ValueError("device.dist_backend 'nccl' needs GPUs: the simulator runs its ranks over 'gloo'")
        return self

    def policy_for(self, name: str) -> RunPolicy:
        """The sweep's run policy with the scenario's own `run_policy` fields (those it sets) on top."""
        own = self.scenario(name).run_policy
        if own is None:
            return self.run_policy
        merged = {**self.run_policy.model_dump(), **own.model_dump(include=own.model_fields_set)}
        return RunPolicy.model_validate(merged)

    def scenario(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(name)


# --------------------------------------------------------------------------- loading
def _loc(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "<root>"


def _value_at(data: Any, loc: tuple[Any, ...]) -> Any:
    cur = data
    for p in loc:
        try:
            cur = cur[p]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def format_validation_error(err: ValidationError, data: Any) -> str:
    """One line per problem: `field = value: message`, naming the config path."""
    lines = []
    for e in err.errors():
        loc = tuple(p for p in e["loc"] if not (isinstance(p, str) and p in KERNEL_KINDS))
        value = e.get("input") if e["type"] != "missing" else None
        if e["type"] == "extra_forbidden":
            lines.append(f"{_loc(loc)}: unknown key (value {value!r})")
        elif not loc:  # a model-level check: its message names the fields itself
            lines.append(e["msg"].removeprefix("Value error, "))
        elif e["type"] == "missing":
            lines.append(f"{_loc(loc)}: required field is missing")
        else:
            shown = value if not isinstance(value, dict | list) else _value_at(data, loc)
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{_loc(loc)} = {shown!r}: {msg}")
    return "invalid sweep config:\n  " + "\n  ".join(lines)


def parse_config(data: dict[str, Any]) -> SweepConfig:
    """Validate a config mapping; raise ConfigError with a message naming each bad field."""
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, data)) from None


MAX_CONFIG_BYTES = 1 << 20  # a sweep config is a small file; anything larger is a mistake (or an attack)
MAX_YAML_ALIASES = 100


def read_yaml(path: str | Path) -> Any:
    """A YAML file parsed safely: no Python objects, duplicate keys rejected, aliases limited (no alias bombs),
    size limited. ConfigError names the file and the problem."""
    import yaml

    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes; a sweep config is at most {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file") from None

    class Loader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:  # count alias uses
            if self.check_event(yaml.AliasEvent):
                Loader.aliases += 1
                if Loader.aliases > MAX_YAML_ALIASES:
                    raise ConfigError(f"{path}: more than {MAX_YAML_ALIASES} YAML aliases")
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[Any] = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=deep)
                if key in seen:
                    raise ConfigError(f"{path}: line {key_node.start_mark.line + 1}: duplicate key {key!r}")
                seen.add(key)
            return super().construct_mapping(node, deep=deep)

    try:
        return yaml.load(text, Loader=Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None


def load_config(path: str | Path) -> SweepConfig:
    """Read and validate a sweep config file (`read_yaml`, then the models)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a sweep config must be a mapping")
    return parse_config(data)


def config_hash(part: Any) -> str:
    """Short sha256 of a JSON-able config part (sorted keys), recorded as provenance."""
    if isinstance(part, BaseModel):
        part = part.model_dump(mode="json")
    blob = json.dumps(part, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def json_schema() -> dict[str, Any]:
    schema = SweepConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "fingrav sweep config"
    return schema
