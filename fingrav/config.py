"""The sweep configuration: pydantic v2 models, loading and error formatting.

This module is imported on the GPU machine too, so it depends only on pydantic and PyYAML.
Every model forbids unknown keys. `config/schema.json` is generated from `SweepConfig`
(`python -m fingrav.cli schema`) and a test keeps it in sync.

Units are in the field names (`_ms`, `_us`, `_mw`, `_pct`, `_ppm`); sizes are element counts.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import reprlib
import types
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    create_model,
    field_validator,
    model_validator,
)

from fingrav import grid as grids
from fingrav.backends import BACKENDS, get_backend
from fingrav.contracts.work import Work
from fingrav.errors import ConfigError
from fingrav.kinds import (
    DTYPE_BYTES,
    KINDS,
    attention_work,
    collective_work,
    declared_work,
    gemm_work,
    gemv_work,
    is_collective,
)

logger = logging.getLogger(__name__)

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
RESERVED_SCENARIO_NAMES = frozenset({"calibration"})  # fingrav.layout: raw/gpu<k>/calibration/
RESERVED_NAME_SUFFIXES = (".readings",)  # fingrav.layout: truth/gpu<k>/<scenario>.readings.parquet
PERIODIC_REPEATS = 20  # Snakemake refuses a wildcard value ending in a part repeated this often (a "cycle")
# keys that moved: an unknown key here gets "moved to ..." (config paths without the scenario)
MOVED_KEYS: dict[tuple[str, ...], str] = {("run_policy", "margin"): "analysis.margin"}


def periodic_suffix(name: str) -> str | None:
    """The part that `name` ends in PERIODIC_REPEATS or more times (Snakemake's periodic-wildcard test, which stops
    the workflow with a "cyclic dependency" error), else None."""
    import re

    m = re.search(rf"((?P<part>.+?)(?P=part){{{PERIODIC_REPEATS - 1},}})$", name)
    return m.group("part") if m else None


def check_name(name: str) -> str:
    """A scenario's or sweep's name that Snakemake takes as it is (not a periodic wildcard value)."""
    part = periodic_suffix(name)
    if part is not None:
        raise ValueError(
            f"{name!r} ends in {part!r} repeated {PERIODIC_REPEATS} or more times, which Snakemake takes for a cyclic "
            "dependency: choose another name"
        )
    return name


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

    def work(self) -> Work:
        """flop = 2 m n k; bytes = A and B read + C written, once each (`fingrav.kinds.gemm_work`)."""
        return gemm_work(self)

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

    def work(self) -> Work:
        """flop = 2 m k; bytes = A and x read + y written (`fingrav.kinds.gemv_work`)."""
        return gemv_work(self)

    @model_validator(mode="after")
    def _fits(self) -> GemvKernel:
        size = (self.m * self.k + self.m + self.k) * DTYPE_BYTES[self.dtype]
        if size > MAX_OPERAND_BYTES:
            raise ValueError(f"gemv {self.m}x{self.k} {self.dtype} needs {size / 2**30:.0f} GiB of operands")
        return self


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

    def work(self) -> None:
        """No throughput columns for collectives (their bandwidth is a bus bandwidth, not a memory one)."""
        return collective_work(self)


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

    def work(self) -> None:
        """No throughput columns for collectives (their bandwidth is a bus bandwidth, not a memory one)."""
        return collective_work(self)


class AttentionKernel(_Model):
    """Scaled dot-product attention, softmax(Q K^T / sqrt(head_dim)) V, through
    torch.nn.functional.scaled_dot_product_attention: torch picks the backend (FlashAttention, memory-efficient,
    cuDNN or math) and the one it chose is recorded in the plan's provenance (`kernels.main.sdpa_backend`).
    Q and the output: [batch, heads, q_len, head_dim]; K, V: [batch, heads, kv_len, head_dim]. Prefill: q_len =
    kv_len, causal; decode: q_len = 1 against a kv_len cache, not causal (the one query sees every key)."""

    kind: Literal["attention"] = "attention"
    batch: Dim
    heads: Annotated[int, Field(ge=1, le=1024)]
    q_len: Dim = Field(description="query length (tokens)")
    kv_len: Dim = Field(description="key/value length (tokens)")
    head_dim: Annotated[int, Field(ge=1, le=1024)]
    causal: bool = Field(False, description="causal mask (needs q_len == kv_len)")
    dtype: Dtype = "bf16"

    def label(self) -> str:
        causal = " causal" if self.causal else ""
        shape = f"b{self.batch} h{self.heads} q{self.q_len} kv{self.kv_len} d{self.head_dim}"
        return f"attention {shape}{causal} {self.dtype}"

    @model_validator(mode="after")
    def _fits(self) -> AttentionKernel:
        if self.causal and self.q_len != self.kv_len:
            raise ValueError(
                f"causal attention needs q_len == kv_len (q_len={self.q_len}, kv_len={self.kv_len}): torch's is_causal "
                "masks from the top-left corner, so a shorter query block would see only the first keys; a decode "
                "step (q_len 1) is not causal"
            )
        size = self.work().bytes or 0.0
        if size > MAX_OPERAND_BYTES:
            raise ValueError(f"{self.label()} needs {size / 2**30:.0f} GiB of operands")
        return self

    def work(self) -> Work:
        """flop = 4 b h q kv d (two matmuls), halved when causal; bytes = Q, K, V read + the output written
        (`fingrav.kinds.attention_work`)."""
        return attention_work(self)


# "package.module:factory" or "path/to/file.py:factory" (a file path relative to the working directory)
TARGET_PATTERN = r"^([A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*|[^:\s]+\.py):[A-Za-z_][A-Za-z0-9_]*$"
Amount = Annotated[float, Field(ge=0, le=1e21)]


class CallableSim(_Model):
    """How the simulated GPU models a callable, which it cannot run: a roofline of the declared flops and bytes
    at these fractions of the preset's peak flop rate (of the kernel's dtype) and memory bandwidth."""

    compute_efficiency: Annotated[float, Field(gt=0, le=1)] = 0.7
    memory_efficiency: Annotated[float, Field(gt=0, le=1)] = 0.8


class CallableKernel(_Model):
    """A user kernel: `target` names a factory, "package.module:factory" (importable from the working directory
    or sys.path) or "path/to/file.py:factory". `factory(**args)` builds its inputs on the current GPU and returns
    a function of no arguments that launches the work once on the current stream (CUDA-graph capturable; when
    capture fails the whole device falls back to stream launches, recorded in the plan's provenance).
    `flops` / `bytes` per execution give the throughput columns; the simulated GPU needs at least one of them
    (its roofline, `sim`) and never calls the factory (it imports it, so a broken target fails there too)."""

    kind: Literal["callable"] = "callable"
    target: Annotated[str, Field(pattern=TARGET_PATTERN, max_length=300)] = Field(
        description='the factory: "package.module:factory" or "path/to/file.py:factory"'
    )
    args: dict[str, Any] = Field(default_factory=dict, description="keyword arguments of the factory")
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=80)] | None = Field(
        None, description="the kernel's label (default: the factory's name)"
    )
    flops: Amount | None = Field(None, description="floating-point operations per execution")
    bytes: Amount | None = Field(None, description="bytes read + written in memory per execution")
    dtype: Dtype | None = Field(None, description="the dtype of its arithmetic (simulator peak: fp32 when unset)")
    sim: CallableSim = CallableSim()

    def label(self) -> str:
        return f"callable {self.name or self.target.rsplit(':', 1)[1]}"

    def work(self) -> Work | None:
        """The declared work (None when neither flops nor bytes is declared; `fingrav.kinds.declared_work`)."""
        return declared_work(self)


Kernel = Annotated[
    GemmKernel | GemvKernel | AllReduceKernel | AllGatherKernel | AttentionKernel | CallableKernel,
    Field(discriminator="kind"),
]
# every member's kind has its entry in fingrav.kinds.KINDS (label, work model, torch and simulator models, export
# fields); tests/test_kinds.py keeps the two equal
KERNEL_MODELS: tuple[type[_Model], ...] = get_args(get_args(Kernel)[0])
if _unregistered := {m.model_fields["kind"].default for m in KERNEL_MODELS} ^ set(KINDS):
    raise ImportError(f"kernel kinds without both a config model and a fingrav.kinds entry: {sorted(_unregistered)}")


class Predecessor(_Model):
    """Interleaving: run `kernel` `count` times right before the measured kernel in every run."""

    kernel: Kernel
    count: Count


class Scenario(_Model):
    name: Annotated[str, Field(pattern=NAME_PATTERN, max_length=80)]
    kernel: Kernel
    predecessor: Predecessor | None = None
    run_policy: RunPolicyOverride | None = Field(
        None,
        description="per-scenario run policy: the fields given here override the sweep's run_policy; the merged "
        "policy is what is checked (SweepConfig.policy_for)",
    )

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, name: str) -> str:
        if name.lower() in RESERVED_SCENARIO_NAMES:
            raise ValueError(f"{name!r} is reserved (raw/gpu<k>/{name}/ holds other files): choose another name")
        suffix = next((x for x in RESERVED_NAME_SUFFIXES if name.lower().endswith(x)), None)
        if suffix is not None:
            raise ValueError(
                f"{name!r} ends in {suffix!r}, which names another scenario's files (truth/gpu<k>/<scenario>{suffix}"
                ".parquet): choose another name"
            )
        return check_name(name)

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
    sensor_late_every: Annotated[int, Field(ge=0, le=1000)] | None = Field(
        None,
        description="late sample stamps: every n-th sample of each sensor stream is stamped late, its value still "
        "read at its grid time (0: none; an H200 stamps one in five late)",
    )
    sensor_late_ms: Annotated[float, Field(ge=0, le=1000.0)] | None = Field(
        None, description="median lateness of those stamps"
    )
    sensor_late_spread_ms: Annotated[float, Field(ge=0, le=1000.0)] | None = Field(
        None, description="spread (sd of a normal cut at 0) of that lateness"
    )
    sensor_late_far_share: Annotated[float, Field(ge=0, le=0.5)] | None = Field(
        None, description="share of all samples stamped late by 6-18 ms instead"
    )
    sensor_acquire_jitter_ms: Annotated[float, Field(ge=0, le=1000.0)] | None = Field(
        None,
        description="sd of each sample's acquisition time around its grid time (the value is read there, the stamp "
        "stays; an H200's: ~0.5 ms)",
    )
    clock_offset_us: float | None = None
    clock_drift_ppm: float | None = None
    exec_jitter_pct: Annotated[float, Field(ge=0, le=20)] | None = None
    outlier_run_fraction: Annotated[float, Field(ge=0, le=0.5)] | None = None
    launch_gap_us: Annotated[float, Field(ge=0)] | None = None
    limit_cycle_start_ms: Annotated[float, Field(ge=0, le=60_000.0)] | None = Field(
        None, description="busy time before the power limit cycle's first clamp"
    )
    limit_cycle_high_ms: Annotated[float, Field(ge=0, le=60_000.0)] | None = Field(
        None, description="released phase of the power limit cycle (0 with limit_cycle_low_ms 0: no cycle)"
    )
    limit_cycle_low_ms: Annotated[float, Field(ge=0, le=60_000.0)] | None = Field(
        None, description="clamped phase of the power limit cycle"
    )
    limit_cycle_jitter_pct: Annotated[float, Field(ge=0, le=100.0)] | None = Field(
        None, description="cycle-to-cycle spread (log-sd, %) of the limit cycle's released and clamped lengths"
    )
    stamp_overhead_us: Annotated[float, Field(ge=0, le=1_000.0)] | None = Field(
        None, description="GPU time the stamps around one stamped execution add to its cycle"
    )
    thermal_rise_pct: Annotated[float, Field(ge=0, le=50.0)] | None = Field(
        None, description="how much the excess power of a kernel below the cap rises as the die warms (%)"
    )
    thermal_tau_ms: Annotated[float, Field(gt=0, le=600_000.0)] | None = Field(
        None, description="time constant of that warming while busy (and of the cooling while idle)"
    )
    placement_sd_pct: Annotated[float, Field(ge=0, le=5.0)] | None = Field(
        None,
        description="how much a memory-bound kernel's execution time moves with where its inputs sit (sd over its "
        "input sets, % at full memory utilization; the excess power moves against it)",
    )
    state_sd_pct: Annotated[float, Field(ge=0, le=5.0)] | None = Field(
        None,
        description="the card's state between runs: how much a below-cap kernel's excess power moves from one "
        "scenario to the next (sd, %; one draw per scenario, constant over it)",
    )


class SimConfig(_Model):
    preset: Literal["mi300x", "h200"] = "mi300x"
    overrides: SimOverrides = SimOverrides()
    card_spread_pct: Annotated[float, Field(ge=0, le=10)] = Field(
        0.0,
        description="card-to-card differences of the simulated GPUs (sd, % of the preset's values): every card "
        "(device index) draws its own power coefficients (idle, dynamic), sensor timing (delay, window, lag: 2x "
        "this) and noise (5x), and clock offset and drift, from a generator seeded by the card alone, whatever the "
        "sweep's seed (fingrav.device.sim.presets.card_preset); 0: every card is the preset",
    )


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
    gpus: Annotated[list[Annotated[int, Field(ge=0, le=1023)]], Field(min_length=1, max_length=64)] | None = Field(
        None,
        description="GPUs of this node (device indices) the sweep may use, one job per scenario and GPU: scenarios "
        "are spread over them (scenario i on gpus[i % len(gpus)]), each job pinned to its GPU, every listed GPU "
        "calibrated; files under results/<sweep>/cards/<index>/ (fingrav.layout). Not with world_size > 1 "
        "(a lockstep group) nor with index (list the GPUs here)",
    )
    fleet: bool = Field(
        False,
        description="with gpus: run every scenario on every listed GPU (a fleet survey); the report shows the "
        "card-to-card spread with CIs (profiles/fleet/<scenario>.json)",
    )

    @model_validator(mode="after")
    def _replay_needs_dir(self) -> DeviceConfig:
        if self.backend == "replay" and not self.replay_dir:
            raise ValueError("backend 'replay' needs device.replay_dir")
        return self

    @model_validator(mode="after")
    def _listed_gpus(self) -> DeviceConfig:
        if self.gpus is None:
            if self.fleet:
                raise ValueError("device.fleet needs device.gpus: the GPUs every scenario runs on")
            return self
        if len(set(self.gpus)) != len(self.gpus):
            raise ValueError(f"device.gpus = {self.gpus}: a GPU is listed twice")
        if self.world_size > 1:
            raise ValueError(
                f"device.gpus = {self.gpus} and device.world_size = {self.world_size}: listed GPUs run scenarios each "
                "on its own; a lockstep group (collectives) is world_size GPUs from device.index: give one of them"
            )
        if self.index != 0:
            raise ValueError(f"device.gpus = {self.gpus} and device.index = {self.index}: list the GPUs in device.gpus")
        if self.fleet and len(self.gpus) < 2:
            raise ValueError(f"device.fleet with device.gpus = {self.gpus}: a fleet survey needs at least 2 GPUs")
        return self

    @property
    def cards(self) -> list[int]:
        """The listed GPUs (device.gpus) in their order; [] for a sweep of device.index (+ world_size ranks)."""
        return list(self.gpus or [])

    def card(self, index: int) -> DeviceConfig:
        """The device config of listed GPU `index`'s jobs: a one-GPU sweep of that device (replay: the dataset's
        cards/<index>/ folder, `fingrav.layout.card_root`)."""
        from fingrav.layout import card_root

        if index not in self.cards:
            raise KeyError(f"GPU {index} is not in device.gpus = {self.gpus}")
        replay_dir = str(card_root(self.replay_dir, index)) if self.replay_dir is not None else None
        return self.model_copy(update={"index": index, "gpus": None, "fleet": False, "replay_dir": replay_dir})


if _unregistered := set(get_args(DeviceConfig.model_fields["backend"].annotation)) ^ set(BACKENDS):
    raise ImportError(
        f"device backends without both a config literal and a fingrav.backends entry: {sorted(_unregistered)}"
    )


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
    min_lois: Annotated[int, Field(ge=1, le=100_000)] = Field(30, description="LOIs wanted per profile (SSE and SSP)")
    max_runs: Count = Field(4000, description="upper bound on runs when more are needed for LOIs")
    probe_ms: DurationMs = Field(
        400.0,
        description="length of the stability probe (back-to-back executions), at least: a sensor that needs longer "
        "(its settling and 6 of its sample periods: fingrav.collect.estimate.probe_load_ns) gets a longer probe",
    )
    probe_idle_ms: DurationMs | None = Field(
        None,
        description="idle after the stability probe, in which its return to idle (t_recover) is watched: at least "
        "two sensor settling times; None: probe_ms (as before). A recovery longer than the watch is read as the "
        "watch's length (the idle before each run then follows it)",
    )
    probe_source: Literal["separate", "reference"] = Field(
        "separate",
        description="where the stability probe comes from: 'separate' runs it on its own before the reference run; "
        "'reference' reads it from the first probe_ms of the reference run (needs reference_ms >= probe_ms; its "
        "return to idle is watched for probe_idle_ms after the reference run) and saves the probe run, its idle "
        "and the reference run's own idle (~1 s per scenario on the H200: results/h200-db4). Its cost: the "
        "reference run starts without the probe's warming, so a power limiter starts later in it, and on the "
        "simulated fidelity matrix 10 of 159 valid rows became imprecise (limit-cycling headlines; "
        "benchmarks/RESULTS.md, stop 28)",
    )
    reference_ms: Annotated[float, Field(ge=0, le=600_000.0)] = Field(
        3000.0,
        description="shortest length of the reference run: the kernel back to back, launched as users launch it "
        "(no stamp between executions), whose mean over whole power-limit cycles is the headline SSP and energy "
        "(ssp_source 'sustained'); 0: none, the headline is the burst SSP of the short runs after idle "
        "(ssp_source 'burst', flag burst_only). Must be long enough to see whether the power cycles",
    )
    reference_max_ms: Annotated[float, Field(ge=0, le=600_000.0)] = Field(
        30_000.0,
        description="longest length of the reference run: past reference_ms it goes on while its power cycles and "
        "the whole-cycle mean has fewer than 3 cycles or a CI wider than reference_ci_pct, or, where it does not "
        "cycle but its 200 ms blocks spread nearly as much as a cycling run's, for up to 1 s more to see whether the "
        "limiter starts to clamp (fingrav.analysis.sustained.reference_decision); <= reference_ms: a fixed length",
    )
    reference_ci_pct: PositiveFloat = Field(
        0.7,
        description="the adaptive reference run stops once the 95 % CI of its whole-cycle mean is within +- this "
        "many % (below analysis.max_ci_pct, the validity limit, so that the final analysis meets it)",
    )
    ssp_ci_pct: PositiveFloat | None = Field(
        0.5,
        description="adaptive SSP stop: the SSP runs stop once there are min_lois SSP LOIs and the statistical 95 % "
        "CI of the method SSP (pooled LOI mean, CI over runs) is within +- this many %, at most max_runs runs "
        "(fingrav.analysis.ssp_stop.ssp_stop_decision); below analysis.max_ci_pct, the validity limit, so that the "
        "final CI with its systematic terms meets it. Where the probe settled, each SSP run's steady tail then spans "
        "4 sensor periods (more LOIs per GPU-second). null: a fixed count (runs, else the guidance table, <= "
        "max_runs) with the tail spread over it, as before. In mode auto an explicit runs is the budget; mode explicit "
        "always runs exactly runs",
    )
    sse: Literal["auto", "always", "never"] = Field(
        "auto",
        description="SSE runs: 'auto' measures them when the run budget (sse_runs, else max_runs) is expected to "
        "give at least sse_min_lois SSE LOIs on the calibrated sensor (one per run at most, execution time / sample "
        "period on a slow sensor) and else skips them, saying in the plan and the log what they would cost (the SSE "
        "columns are then empty, flag sse_skipped); 'always' measures them; 'never' skips them",
    )
    sse_targeting: Literal["on", "off"] = Field(
        "off",
        description="SSE runs: 'on' aims each run's random delay so that the next power sample (the sensor's clock "
        "predicted from the drained timestamps) reads the SSE execution (fingrav.collect.targeting; one GPU, no "
        "predecessor); 'off' leaves the sample's phase to chance",
    )
    sse_base_runs: Annotated[int, Field(ge=0, le=100_000)] = Field(
        0,
        description="base runs measured beside the SSE runs: the SSE run without its SSE execution (the warm-ups "
        "alone, each after the same idle). The SSE's kernel power is then the difference the SSE execution makes "
        "(fingrav.analysis.kernel_power), with no prior over the burst; with about as many base runs as SSE runs it "
        "is measurable for 1-5 ms kernels through a 20 ms sensor at ~200 runs in all (experiments/RESULTS.md). 0: "
        "none; not measured where the SSE runs are not, nor without warm-ups",
    )
    sse_min_lois: Annotated[int, Field(ge=1, le=100_000)] | None = Field(
        None,
        description="'auto' SSE: skip the SSE runs when fewer than half this many SSE LOIs are expected within the "
        "run budget (half: the prediction is conservative, a number measurable today is never lost); unset: "
        "analysis.min_lois, the count below which the analysis reports no SSE number (too_few_lois_sse)",
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
        if self.probe_source == "reference" and self.reference_ms < self.probe_ms:
            raise ValueError(
                f"run_policy.probe_source 'reference' needs run_policy.reference_ms ({self.reference_ms:g}) >= "
                f"run_policy.probe_ms ({self.probe_ms:g}): the probe is the reference run's first probe_ms"
            )
        if self.executions_per_run is not None and self.executions_per_run < self.warmups + 1:
            raise ValueError(
                f"run_policy.executions_per_run={self.executions_per_run} must be >= warmups + 1 = {self.warmups + 1}"
            )
        return self


def _partial(model: type[_Model], name: str, doc: str) -> type[_Model]:
    """`model` with every field optional (None: not given) and its bounds kept, but without its cross-field
    checks: a part of a model that is validated as a whole only once merged with the rest."""
    fields: dict[str, Any] = {}
    for fname, f in model.model_fields.items():
        tp = Annotated[(f.annotation, *f.metadata)] if f.metadata else f.annotation
        fields[fname] = (tp | None, Field(None, description=f.description))
    return create_model(name, __base__=_Model, __doc__=doc, **fields)


RunPolicyOverride = _partial(
    RunPolicy,
    "RunPolicyOverride",
    "A scenario's own run-policy fields, on top of the sweep's run_policy; checked once merged (so `mode: explicit` "
    "here may take `runs` from the sweep).",
)


Scenario.model_rebuild()


class AnalysisConfig(_Model):
    margin: Annotated[float, Field(gt=0, le=0.5)] | None = Field(
        None,
        description="binning margin as a fraction (0.02 = 2 %); unset: METHOD.md's guidance table for the "
        "measured kernel time, decided when binning",
    )
    bootstrap_reps: Annotated[int, Field(ge=100, le=100_000)] = 1000
    ci_level: Annotated[float, Field(gt=0.5, lt=1.0)] = 0.95
    fit_degree: Annotated[int, Field(ge=0, le=8)] = Field(
        4,
        description="highest degree of the TOI-power fits; the degree used is the one the data support "
        "(5-fold cross-validation, one-standard-error rule)",
    )
    min_lois: Annotated[int, Field(ge=1, le=100_000)] = Field(
        10, description="fewer LOIs than this flags a profile as too_few_lois"
    )
    delay_correction: bool = Field(True, description="shift samples back by the calibrated sensor delay")
    max_drift_ppm: PositiveFloat = Field(200.0, description="flag clock_drift beyond this")
    max_ci_pct: PositiveFloat = Field(
        1.0,
        description="a row is valid only when the 95 % CIs of its SSP power and energy per execution are within "
        "+- this many % of the value (flag imprecise); collect more runs to get there",
    )
    kernel_power_max_ci_pct: PositiveFloat = Field(
        10.0,
        description="the kernel power of the SSE and of the interleaved execution (estimated through the sensor "
        "model) is reported only when its 95 % CI is within +- this many % of the value; otherwise it is "
        "'not measurable' and only the sensor reading is given",
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
    scenarios: Annotated[list[Scenario], Field(max_length=MAX_SCENARIOS)] = Field(
        default_factory=list, description="the scenarios, each a kernel to profile (a grid adds more)"
    )
    grid: list[grids.GridEntry] = Field(
        default_factory=list,
        exclude=True,  # its scenarios are in `scenarios`; a dump re-validates to the same sweep
        description="shape grids: each entry expands to scenarios (kernel | shape | axes crossed | ties) that are "
        "appended after `scenarios` and validated like them (fingrav.grid; `fingrav validate --expand` lists them)",
    )

    @model_validator(mode="before")
    @classmethod
    def _expand_grids(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not data.get("grid"):
            return data
        try:
            return grids.expand(data)
        except ValidationError:
            return data  # a malformed grid: the `grid` field's own validation names what is wrong

    @model_validator(mode="after")
    def _some_scenario(self) -> SweepConfig:
        if not self.scenarios:
            raise ValueError("scenarios: no scenario: give at least one in `scenarios` or a `grid`")
        return self

    max_gpu_hours: Annotated[float, Field(gt=0, le=1e6)] = Field(
        24.0,
        description="refuse a sweep whose GPU time, bounded from below before it runs (fingrav.cost: calibration, "
        "each scenario's probe, reference run, runs and executions), exceeds this many hours; replays are never "
        "refused",
    )

    @field_validator("sweep")
    @classmethod
    def _sweep_name(cls, name: str) -> str:
        return check_name(name)

    @model_validator(mode="after")
    def _unique_names(self) -> SweepConfig:
        counts = Counter(s.name for s in self.scenarios)
        dup = next((name for name, c in counts.items() if c > 1), None)
        if dup is not None:
            raise ValueError(f"scenarios: duplicate scenario name {dup!r} (given {counts[dup]} times)")
        return self

    @model_validator(mode="after")
    def _merged_policies(self) -> SweepConfig:
        for s in self.scenarios:
            if s.run_policy is not None:
                try:
                    self.policy_for(s.name)
                except ValidationError as err:
                    msg = "; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())
                    raise ValueError(f"scenarios[{s.name!r}].run_policy (merged with the sweep's): {msg}") from None
        return self

    @model_validator(mode="after")
    def _collectives_need_gpus(self) -> SweepConfig:
        n = self.device.world_size
        for s in self.scenarios:
            if s.has_collective and n < 2:
                raise ValueError(f"scenario {s.name!r} runs a collective: device.world_size must be >= 2 (it is {n})")
            for part, k in (("kernel", s.kernel), ("predecessor", s.predecessor.kernel if s.predecessor else None)):
                if k is not None and k.kind == "allgather" and k.size_bytes % (n * DTYPE_BYTES[k.dtype]):
                    raise ValueError(
                        f"scenarios[{s.name!r}].{part}: allgather size_bytes={k.size_bytes} must split into "
                        f"device.world_size={n} whole {k.dtype} parts"
                    )
            pred = s.predecessor.kernel if s.predecessor else None
            for part, k in (("kernel", s.kernel), ("predecessor.kernel", pred)):
                if self.device.backend == "sim" and k is not None and k.kind == "callable" and k.work() is None:
                    raise ValueError(
                        f"scenarios[{s.name!r}].{part}: a callable on the simulated GPU needs flops and/or bytes "
                        f"(the simulator cannot run {k.target!r}: it models it as a roofline of the declared work)"
                    )
        want, reg = self.device.dist_backend, get_backend(self.device.backend)
        if want is not None and reg.dist_backend is not None and want != reg.dist_backend:
            if reg.real_gpu:
                raise ValueError(
                    f"device.dist_backend {want!r} cannot run collectives on GPUs: use {reg.dist_backend!r} "
                    "(or leave it out)"
                )
            raise ValueError(
                f"device.dist_backend {want!r} needs GPUs: device.backend {reg.name!r} runs its ranks over "
                f"{reg.dist_backend!r}"
            )
        return self

    @model_validator(mode="after")
    def _bounded_gpu_time(self) -> SweepConfig:
        if self.device.backend == "replay":
            return self
        from fingrav.cost import calibration_cost, scenario_cost

        cal = calibration_cost(self.calibration)
        costs = [(s.name, scenario_cost(s, self.policy_for(s.name))) for s in self.scenarios]
        hours = (cal.seconds + sum(c.seconds for _, c in costs)) / 3600.0
        if hours <= self.max_gpu_hours:
            return self
        name, top = max(costs, key=lambda nc: nc[1].seconds)
        if cal.seconds >= top.seconds:
            part = f"calibration: {self.calibration.steps} steps of {self.calibration.step_on_ms:g} + "
            part += f"{self.calibration.step_off_ms:g} ms = {cal.hours:.3g} h"
        else:
            part = f"scenario {name!r}: {top.executions:.3g} executions in {top.runs:.3g} runs >= {top.hours:.3g} h"
        raise ValueError(
            f"max_gpu_hours = {self.max_gpu_hours:g}: this sweep needs at least {hours:.3g} h of GPU time (the most: "
            f"{part}); lower its runs, executions or calibration steps, or raise max_gpu_hours"
        )

    def policy_for(self, name: str) -> RunPolicy:
        """The sweep's run policy with the scenario's own `run_policy` fields (those it sets) on top; sse_min_lois,
        where neither sets it, is analysis.min_lois (the SSE runs `auto` skips are those that cannot reach it)."""
        own = self.scenario(name).run_policy
        merged = self.run_policy.model_dump()
        if own is not None:
            merged.update(own.model_dump(include=own.model_fields_set))
        if merged.get("sse_min_lois") is None:  # the analysis' threshold: SSE runs that cannot reach it buy nothing
            merged["sse_min_lois"] = self.analysis.min_lois
        return RunPolicy.model_validate(merged)

    def gpus_of(self, name: str) -> list[int]:
        """The listed GPUs (device.gpus) scenario `name` runs on: every one in a fleet survey (device.fleet), else
        gpus[i % len(gpus)] for the i-th scenario (a fixed spread: the same sweep always measures a scenario on the
        same GPU, so its numbers never depend on which job ran first); [] when the sweep lists no GPUs."""
        cards = self.device.cards
        if not cards:
            return []
        if self.device.fleet:
            return cards
        i = [s.name for s in self.scenarios].index(name)
        return [cards[i % len(cards)]]

    def scenario(self, name: str) -> Scenario:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise KeyError(name)


# --------------------------------------------------------------------------- loading
_REPR = reprlib.Repr()  # values in messages: short (a huge list or string is cut, never printed whole)
_REPR.maxstring, _REPR.maxother, _REPR.maxlist, _REPR.maxdict, _REPR.maxlevel = 60, 60, 4, 4, 2


def _loc(loc: tuple[Any, ...], data: Any = None) -> str:
    """A config path for a message; a scenario is named by its name (`scenarios['cb-8k'].kernel.m`), by its
    position only when the name itself is the problem or missing (`scenarios[3].name`)."""
    parts: list[str] = []
    for i, p in enumerate(loc):
        if isinstance(p, int):
            name = _value_at(data, (*loc[:i], p, "name")) if loc[:i] == ("scenarios",) else None
            named = isinstance(name, str) and loc[i + 1 : i + 2] != ("name",)
            parts.append(f"[{name!r}]" if named else f"[{p}]")
        else:
            parts.append(("." if parts else "") + str(p))
    return "".join(parts) or "<root>"


def _value_at(data: Any, loc: tuple[Any, ...]) -> Any:
    cur = data
    for p in loc:
        try:
            cur = cur[p]
        except (KeyError, IndexError, TypeError):
            return None
    return cur


def _step(tp: Any, p: Any) -> Any:
    """The type one config-path step `p` below type `tp` (a model field, a list item, a kernel kind's model)."""
    origin = get_origin(tp)
    if origin is Annotated:
        return _step(get_args(tp)[0], p)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) == 1:
            return _step(members[0], p)
        for m in members:  # a discriminated union: the step is the member's `kind`
            kind = getattr(m, "model_fields", {}).get("kind")
            if kind is not None and kind.default == p:
                return m
        return None
    if origin is list:
        return get_args(tp)[0] if isinstance(p, int) else None
    if isinstance(tp, type) and issubclass(tp, BaseModel) and isinstance(p, str) and p in tp.model_fields:
        return tp.model_fields[p].annotation
    return None


def _fields_at(loc: tuple[Any, ...]) -> list[str]:
    """The field names of the model at config path `loc` (pydantic's, kernel kinds included); [] if unknown."""
    tp: Any = SweepConfig
    for p in loc:
        tp = _step(tp, p)
        if tp is None:
            return []
    while get_origin(tp) in (Annotated, Union, types.UnionType):  # Optional[Model] -> Model
        members = [a for a in get_args(tp) if a is not type(None)]
        if len(members) != 1:
            return []
        tp = members[0]
    return list(tp.model_fields) if isinstance(tp, type) and issubclass(tp, BaseModel) else []


def _show(value: Any) -> str:
    """A value for a message: short (a long list is counted, a long string cut; never printed whole)."""
    if isinstance(value, list | tuple) and len(value) > _REPR.maxlist:
        return f"<a list of {len(value)} items>"
    return _REPR.repr(value)


def did_you_mean(key: Any, fields: list[str]) -> str:
    """ "; did you mean 'runs'?" for a misspelled key (difflib over the model's field names), else ""."""
    close = difflib.get_close_matches(str(key), fields, n=1, cutoff=0.6) if fields else []
    return f"; did you mean {close[0]!r}?" if close else ""


def format_validation_error(err: ValidationError, data: Any) -> str:
    """One line per problem: `field = value: message`, naming the config path (scenarios by name) and, for an
    unknown key, the closest known one (a misspelled required key is one problem, not also a missing one)."""
    lines = []
    errors = err.errors()
    missing = {tuple(e["loc"]) for e in errors if e["type"] == "missing"}
    explained: set[tuple[Any, ...]] = set()  # missing fields that a misspelled key's suggestion names
    for e in errors:
        full = tuple(e["loc"])
        if e["type"] == "extra_forbidden":
            close = difflib.get_close_matches(str(full[-1]), _fields_at(full[:-1]), n=1, cutoff=0.6)
            if close and (*full[:-1], close[0]) in missing:
                explained.add((*full[:-1], close[0]))
    for e in errors:
        full = tuple(e["loc"])
        loc = tuple(p for p in full if not (isinstance(p, str) and p in KINDS))
        value = e.get("input") if e["type"] != "missing" else None
        where = _loc(loc, data)
        if e["type"] == "extra_forbidden":
            plain = tuple(p for p in loc if not isinstance(p, int) and p != "scenarios")
            moved = next((new for old, new in MOVED_KEYS.items() if plain[-len(old) :] == old), None)
            hint = f"; moved to {moved}" if moved else did_you_mean(full[-1], _fields_at(full[:-1]))
            lines.append(f"{where}: unknown key (value {_show(value)}){hint}")
        elif not loc:  # a model-level check: its message names the fields itself
            lines.append(e["msg"].removeprefix("Value error, "))
        elif e["type"] == "missing":
            if full in explained:
                continue
            lines.append(f"{where}: required field is missing")
        else:
            shown = value if not isinstance(value, dict | list) else _value_at(data, loc)
            msg = e["msg"].removeprefix("Value error, ")
            lines.append(f"{where} = {_show(shown)}: {msg}")
    return "invalid sweep config:\n  " + "\n  ".join(lines)


def parse_config(data: dict[str, Any]) -> SweepConfig:
    """Validate a config mapping; raise ConfigError with a message naming each bad field."""
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, _expanded(data))) from None


def _expanded(data: Any) -> Any:
    """The config mapping with its grids expanded where they expand (so that a message names a generated scenario
    by its name), else as given."""
    if not isinstance(data, dict) or not data.get("grid"):
        return data
    try:
        return grids.expand(data)
    except (ValidationError, ValueError):
        return data


MAX_CONFIG_BYTES = 1 << 20  # a sweep config is a small file; anything larger is a mistake (or an attack)
MAX_YAML_ALIASES = 100
# the document as the models see it, every alias expanded (an alias bomb is a few aliases that expand to millions of
# nodes): 2,000 scenarios (MAX_SCENARIOS) of ~40 nodes each fit many times over
MAX_CONFIG_NODES = 200_000
YTE_KEY = "__use_yte__"  # Snakemake renders a YAML config with YTE (Python expressions) when it sets this key

_INT_12 = r"^[-+]?[0-9]+$|^0o[0-7]+$|^0x[0-9a-fA-F]+$"
_FLOAT_12 = r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$|^[-+]?\.(inf|Inf|INF)$|^\.(nan|NaN|NAN)$"
_BOOL_12 = r"^(true|True|TRUE|false|False|FALSE)$"
_NULL_12 = r"^(~|null|Null|NULL|)$"


def _yaml12_loader() -> type:
    """A safe PyYAML loader with YAML 1.2 (core schema) scalars: `0512` is 512 (1.1: octal 330), `0o17` octal, `1.0e9`
    and `1e9` floats (1.1: strings), only true/false booleans (1.1: also yes/no/on/off), no timestamps, no `<<`
    merge keys."""
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.yaml_implicit_resolvers = {}
    for tag, pattern, first in (
        ("bool", _BOOL_12, "tTfF"),
        ("int", _INT_12, "-+0123456789"),
        ("float", _FLOAT_12, "-+0123456789."),
        ("null", _NULL_12, ["~", "n", "N", ""]),
    ):
        Loader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(pattern), list(first))

    def construct_int(loader: Any, node: Any) -> int:
        text = str(loader.construct_scalar(node))
        sign = -1 if text.startswith("-") else 1
        body = text.lstrip("+-")
        if body.startswith("0o"):
            return int(body[2:], 8)
        if body.startswith("0x"):
            return int(body[2:], 16)
        return sign * int(body, 10)

    Loader.add_constructor("tag:yaml.org,2002:int", construct_int)
    return Loader


def _expanded_nodes(node: Any, memo: dict[int, int]) -> int:
    """The nodes of a composed YAML document with every alias expanded, counted without expanding (an aliased
    node is one object, counted once and reused)."""
    key = id(node)
    if key not in memo:
        memo[key] = 0  # a recursive alias: refused by the constructor, counted as nothing here
        value = node.value
        if isinstance(value, list):
            children = [n for pair in value for n in (pair if isinstance(pair, tuple) else (pair,))]
            memo[key] = 1 + sum(_expanded_nodes(c, memo) for c in children)
        else:
            memo[key] = 1
    return memo[key]


def _config_text(path: Path) -> str:
    """A config file's text: readable, at most MAX_CONFIG_BYTES, UTF-8 (ConfigError naming the file otherwise)."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror})") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: {len(raw)} bytes; a sweep config is at most {MAX_CONFIG_BYTES} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file") from None


def read_yaml(path: str | Path) -> Any:
    """A YAML file parsed safely, with YAML 1.2 numbers (`_yaml12_loader`): no Python objects, duplicate keys
    rejected, size, aliases and the expanded document limited (no alias bombs: `MAX_CONFIG_NODES` counted before
    anything is built), no YTE. ConfigError names the file and the problem."""
    import yaml

    path = Path(path)
    text = _config_text(path)

    class Loader(_yaml12_loader()):  # type: ignore[misc]
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

    loader = Loader(text)
    try:
        node = loader.get_single_node()
        if node is not None and (n := _expanded_nodes(node, {})) > MAX_CONFIG_NODES:
            raise ConfigError(
                f"{path}: expands to {n} YAML nodes (aliases expanded); a sweep config has at most {MAX_CONFIG_NODES}"
            )
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    finally:
        loader.dispose()
    if isinstance(data, dict) and YTE_KEY in data:
        raise ConfigError(
            f"{path}: {YTE_KEY} = {_show(data[YTE_KEY])}: YTE templates are not allowed in a sweep config (Snakemake "
            "would evaluate the Python in them while loading the file): write plain values"
        )
    return data


def merge_config(base: dict[str, Any], more: Any, source: str) -> dict[str, Any]:
    """`more` (a config file's mapping, or --config values) over `base`, mappings merged key by key as Snakemake
    merges config files; ConfigError naming `source` when it is not a mapping."""
    if not isinstance(more, dict):
        raise ConfigError(f"{source}: a sweep config must be a mapping")
    out = dict(base)
    for key, value in more.items():
        old = out.get(key)
        out[key] = merge_config(old, value, source) if isinstance(old, dict) and isinstance(value, dict) else value
    return out


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


def _default_new_fields(policy: RunPolicy) -> set[str]:
    """Run-policy fields added after collections were committed, where they hold their default (which is what
    those collections did): left out of `collection_hash`."""
    out = set()
    if policy.sse_targeting == "off":
        out.add("sse_targeting")
    if policy.sse_base_runs == 0:
        out.add("sse_base_runs")
    if policy.probe_idle_ms is None:
        out.add("probe_idle_ms")
    if policy.probe_source == "separate":  # plan.json's probe.source records which one a collection used
        out.add("probe_source")
    return out


def collection_hash(scenario: Scenario, policy: RunPolicy, seed: int) -> str:
    """The config hash of one scenario's collection (recorded in its raw data's provenance): the scenario (its own
    run_policy left out: `policy` is the merged one), the merged run policy and the seed."""
    return config_hash(
        {
            "scenario": {**scenario.model_dump(mode="json"), "run_policy": None},
            # sse_targeting 'off', sse_base_runs 0, probe_idle_ms None and probe_source 'separate' (their defaults)
            # are left out:
            # collections from before them keep their hash (and are not measured again for them)
            "policy": policy.model_dump(mode="json", exclude=_default_new_fields(policy) or None),
            "seed": seed,
        }
    )


def json_schema() -> dict[str, Any]:
    schema = SweepConfig.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "fingrav sweep config"
    return schema
