"""The one provenance model (`fingrav.contracts.provenance`): it keeps exactly the keys it was given, types what
fingrav reads, and parses every provenance record of the committed datasets (JSON files and parquet metadata)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav import rawio
from fingrav.contracts.provenance import DeviceInfo, Provenance, SchedulerJob, parse_provenance

ROOT = Path(__file__).resolve().parents[2]
COMMITTED_JSON = sorted(
    p
    for pattern in ("results/*/gpu/**/plan.json", "results/*/calibration/*.json", "results/*/gpu/calibration/*.json")
    for p in ROOT.glob(pattern)
)
COMMITTED_PARQUET = sorted(ROOT.glob("results/*/gpu/**/*.parquet"))


def test_a_record_writes_back_exactly_the_keys_it_was_given() -> None:
    rec = {"stage": "collect", "device": {"backend": "nvml", "driver": "570.1", "clocks": {"sm": 1980}}, "new": [1]}
    p = Provenance.model_validate(rec)
    assert p.to_json() == rec and json.loads(rawio.dumps(p)) == rec
    assert p.stage == "collect" and p.device is not None and p.device.backend == "nvml"
    assert p.device.model_extra == {"driver": "570.1", "clocks": {"sm": 1980}} and p.model_extra == {"new": [1]}
    assert Provenance().to_json() == {}
    assert Provenance(stage="x").model_copy(update={"raw": Provenance(host="h")}).to_json() == {
        "stage": "x",
        "raw": {"host": "h"},
    }


def test_parse_provenance_reads_a_parquet_record_at_the_top_or_under_provenance() -> None:
    top = {"format_version": 2, "stage": "collect", "device": {"backend": "sim"}, "gaps": []}
    assert parse_provenance(top).device.backend == "sim" and parse_provenance(top).format_version == 2
    nested = {"margin": 0.05, "provenance": {"stage": "bin", "rank": 1}}
    assert parse_provenance(nested).stage == "bin" and parse_provenance(nested).rank == 1
    assert parse_provenance(None) == Provenance() and parse_provenance([1]) == Provenance()


def test_device_info_uuid_name_and_power_limit() -> None:
    assert DeviceInfo(gpu_uuid_torch="GPU-77").gpu_uuid == "GPU-77" and DeviceInfo(name="x").gpu_uuid is None
    assert DeviceInfo(enforced_power_limit_mw=700_000, power_limit_mw=650_000).power_limit_w == 700.0
    assert DeviceInfo(power_limit_mw=650_000).power_limit_w == 650.0
    assert DeviceInfo(parameters={"power": {"cap_w": 750.0}}).power_limit_w == 750.0
    assert DeviceInfo(backend="amdsmi").power_limit_w is None
    assert DeviceInfo(torch_name="NVIDIA H200", backend="nvml").display_name == "NVIDIA H200"
    prov = Provenance(device=DeviceInfo(uuid="GPU-1"), raw=Provenance(device=DeviceInfo(uuid="GPU-2")))
    assert prov.measured_gpu_uuid == "GPU-1" and prov.measured_on is not None and prov.measured_on.uuid == "GPU-2"


def test_scheduler_job_keeps_the_visible_devices_variables() -> None:
    job = SchedulerJob.model_validate({"scheduler": "slurm", "job_id": "1", "cuda_visible_devices": "0,1"})
    assert job.job_id == "1" and job.to_json()["cuda_visible_devices"] == "0,1"


@pytest.mark.parametrize("path", COMMITTED_JSON, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_committed_json_provenance_parses_and_writes_back_unchanged(path: Path) -> None:
    rec = json.loads(path.read_text())["provenance"]
    p = Provenance.model_validate(rec)
    assert json.loads(rawio.dumps(p)) == rec
    assert p.stage in ("collect", "calibrate")


def test_every_committed_parquet_provenance_parses() -> None:
    assert len(COMMITTED_PARQUET) > 100
    stages = set()
    for path in COMMITTED_PARQUET:
        meta = rawio.read_metadata(path)
        p = rawio.read_provenance(path)
        inner = meta.get("provenance", meta)
        assert json.loads(rawio.dumps(p)) == inner, path
        stages.add(p.stage)
    assert {"collect", "calibrate"} <= stages
