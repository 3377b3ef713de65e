"""The provenance record every artifact carries (plan.json, calibration/gpu<k>.json, summary.json, the combined and
fleet results, every parquet's metadata), as one typed model shared by the writer (`fingrav.provenance.provenance`)
and every reader.

A record keeps exactly the keys it was given: fields left unset are not written back (`Record`), so a file read and
written again is the same JSON, and keys an older or newer fingrav wrote are kept (``extra="allow"``) rather than
refused: provenance describes the run, it never decides anything. Parquet files keep the record as a JSON blob in
their metadata; `fingrav.rawio.read_provenance` parses it into `Provenance`, the one way in.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from fingrav.contracts.units import MW_PER_W


class Record(BaseModel):
    """A record whose JSON is the keys it was given: typed where fingrav reads a key, open (``extra="allow"``)
    for the rest of what a backend or an older version recorded."""

    model_config = ConfigDict(frozen=True, extra="allow")

    @model_serializer(mode="wrap")
    def _given_keys(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        out = handler(self)
        given = self.model_fields_set | set(self.model_extra or {})
        return {k: v for k, v in out.items() if k in given}

    def to_json(self) -> dict[str, Any]:
        """The record as written (JSON types, only the keys it was given)."""
        return self.model_dump(mode="json")


class DeviceInfo(Record):
    """What a backend's `GPUDevice.describe()` recorded about the GPU: the fields fingrav reads are typed; the
    rest (driver, clocks, telemetry, the simulator's model) stays as the backend wrote it. Powers in mW."""

    backend: str | None = None
    vendor: str | None = None
    name: str | None = None
    index: int | None = None
    uuid: str | None = None
    world_size: int | None = None
    torch_name: str | None = None
    torch_version: str | None = None
    gpu_uuid_torch: str | None = None
    enforced_power_limit_mw: float | None = None
    power_limit_mw: float | None = None
    # allowed free-form: the simulator's effective model parameters (its preset's own nested structure, shown
    # verbatim in the report and read only for the power cap)
    parameters: dict[str, Any] | None = None

    @property
    def display_name(self) -> str | None:
        """The GPU's name (else its torch name, else the backend); None when the record has none."""
        return self.name or self.torch_name or self.backend or None

    @property
    def gpu_uuid(self) -> str | None:
        """The UUID (NVML's "GPU-...", the simulator's "SIM-..."), else None."""
        uuid = self.uuid or self.gpu_uuid_torch
        return str(uuid) if uuid else None

    @property
    def power_limit_w(self) -> float | None:
        """The power limit (W): NVML's enforced limit (else its management limit), the simulator's cap; None where
        the backend records none (amdsmi)."""
        for mw in (self.enforced_power_limit_mw, self.power_limit_mw):
            if mw is not None:
                return float(mw) / MW_PER_W
        cap = ((self.parameters or {}).get("power") or {}).get("cap_w")
        return float(cap) if isinstance(cap, int | float) and not isinstance(cap, bool) else None


class SchedulerJob(Record):
    """The scheduler's job a process ran in (`fingrav.provenance.scheduler_job`): SLURM's variables (strings as
    SLURM set them) and the visible-devices variables (their lower-case names, extra keys)."""

    scheduler: str
    job_id: str | None = None
    array_job_id: str | None = None
    array_task_id: str | None = None
    step_id: str | None = None
    node: str | None = None
    partition: str | None = None
    account: str | None = None
    job_gpus: str | None = None
    step_gpus: str | None = None
    gpus: str | None = None


class DistributedInfo(Record):
    """How the ranks of a multi-GPU collection were joined (`fingrav.collect.distributed.TorchLockstep.describe`):
    rank, world size, the torch.distributed backends, barriers taken and the NVLS / NCCL environment."""

    rank: int
    world_size: int
    backend: str | None = None
    control_backend: str | None = None
    barriers: int | None = None
    env: dict[str, str | None] = {}


class Provenance(Record):
    """Who made an artifact, from what, where and when (`fingrav.provenance.provenance`): versions, git commit,
    host, time (UTC, ISO), the scheduler's job, the device and its UUID, the config hash, the stage and its rank,
    and what a stage adds (`raw`: the provenance of the raw data it analysed; `clock_source`; the collect
    stage's scenario and kernels; the calibrate stage's settings)."""

    fingrav_version: str | None = None
    git_commit: str | None = None
    python: str | None = None
    packages: dict[str, str] = {}
    host: str | None = None
    created_utc: str | None = None
    scheduler_job: SchedulerJob | None = None
    device: DeviceInfo | None = None
    gpu_uuid: str | None = None
    config_hash: str | None = None
    stage: str | None = None
    rank: int | None = None
    seed: int | None = None
    format_version: int | None = None  # a parquet record's own version (`fingrav.rawio.write_arrow`)
    clock_source: str | None = None  # differentiate: where the scenario's clock map came from
    raw: Provenance | None = None  # differentiate, calibrate: the raw data's own record
    distributed: DistributedInfo | None = None  # collect on several GPUs
    # allowed free-form: the scenario exactly as configured (a `fingrav.config.Scenario` dump; readers validate it
    # through that model: `scenario_config`) and the calibrate stage's settings (a `CalibrationConfig` dump)
    scenario: dict[str, Any] | None = None
    calibration: dict[str, Any] | None = None
    # allowed free-form: what each prepared kernel reported about itself ({"main", "predecessor"}:
    # `GPUDevice.prepare(...).describe()`, backend- and kind-specific: the SDPA backend, the stamp kernel, ...)
    kernels: dict[str, dict[str, Any]] | None = None

    @property
    def measured_on(self) -> DeviceInfo | None:
        """The device the data were measured on: the raw data's record, else this one's."""
        if self.raw is not None and self.raw.device is not None:
            return self.raw.device
        return self.device

    @property
    def measured_gpu_uuid(self) -> str | None:
        """The GPU's UUID: recorded on its own, else the device record's."""
        return self.gpu_uuid or (self.device.gpu_uuid if self.device is not None else None)


def parse_provenance(record: Any) -> Provenance:
    """A provenance record as stored (a parquet metadata record with the provenance at its top level or under
    "provenance", a JSON object, None) as `Provenance`; an empty one when there is none."""
    if isinstance(record, Provenance):
        return record
    if not isinstance(record, dict):
        return Provenance()
    inner = record.get("provenance")
    return Provenance.model_validate(inner if isinstance(inner, dict) else record)
