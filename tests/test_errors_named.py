"""Every error names its file or field and what to do: damaged files, a missing manifest, a too-short probe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fingrav import rawio
from fingrav.errors import DataError
from fingrav.layout import SweepLayout, producer


def test_the_job_that_writes_a_file_is_named_for_a_rerun(tmp_path: Path) -> None:
    lay = SweepLayout(tmp_path / "results" / "s")
    assert producer(lay.summary_json("a")) == "differentiate" and producer(lay.lois("a")) == "differentiate"
    assert producer(lay.binned("a")) == "bin" and producer(lay.combined("a")) == "combine"
    assert producer(lay.fleet("a")) == "fleet" and producer(lay.calibration_json()) == "calibrate"
    assert producer(lay.scenario_dir("a") / "samples.parquet") == "collect"
    assert producer(lay.calibration_dir() / "steps.parquet") == "calibrate"
    assert producer(tmp_path / "elsewhere.json") is None


def test_a_truncated_json_or_parquet_is_named_with_its_rerun(tmp_path: Path) -> None:
    lay = SweepLayout(tmp_path / "results" / "s")
    js = rawio.write_json(lay.summary_json("a"), {"x": 1})
    js.write_text('{"x": ')
    with pytest.raises(DataError, match=r"summary.json: not valid JSON .*snakemake --forcerun differentiate"):
        rawio.read_json(js)
    import pyarrow as pa

    pq = rawio.write_arrow(lay.binned("a"), pa.table({"x": list(range(100))}), {})
    pq.write_bytes(pq.read_bytes()[:40])
    for read in (rawio.read_table, rawio.read_metadata):
        with pytest.raises(DataError, match=r"a.parquet: cannot be read as parquet .*truncated; .*--forcerun bin"):
            read(pq)


def test_raw_data_without_its_manifest_is_refused(tmp_path: Path) -> None:
    raw = tmp_path / "raw" / "gpu0" / "a"
    rawio.write_json(raw / "plan.json", {})
    with pytest.raises(DataError, match=r"a: no MANIFEST.json, so its files cannot be checked"):
        rawio.require_manifest(raw)
    rawio.write_manifest(raw, ["plan.json"])
    rawio.require_manifest(raw)
    (raw / "plan.json").write_text("{}\n\n")
    with pytest.raises(DataError, match="sha256 mismatch"):
        rawio.require_manifest(raw)


def test_the_bin_stage_refuses_raw_data_without_a_manifest(tmp_path: Path) -> None:
    from fingrav.config import AnalysisConfig
    from fingrav.stages import bin as bin_stage

    lay = SweepLayout(tmp_path)
    rawio.write_json(lay.plan("a"), json.loads("{}"))
    with pytest.raises(DataError, match="no MANIFEST.json"):
        bin_stage.run(lay, "a", 0, AnalysisConfig())


def test_a_full_disk_in_a_stage_job_names_the_file(tmp_path: Path, monkeypatch) -> None:
    import errno

    from fingrav.stages import bin as bin_stage
    from fingrav.stages.job import run_stage

    def full(params: dict) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "binned" / "a.parquet"))

    monkeypatch.setattr(bin_stage, "from_params", full)
    params = tmp_path / "p.json"
    params.write_text(json.dumps({"root": str(tmp_path)}))
    assert run_stage(["bin", "--log", str(tmp_path / "bin.log"), "--params-file", str(params)]) == 1
    log = (tmp_path / "bin.log").read_text()
    assert f"bin: {tmp_path / 'binned' / 'a.parquet'}: No space left on device" in log and "Traceback" not in log


def test_a_stage_logs_each_line_once_under_the_cli(tmp_path: Path, capsys) -> None:
    """`fingrav gpu-sweep` configures the root logger; a stage's lines still reach stderr once, not twice."""
    import logging

    from fingrav.logs import logging_to

    handler = logging.StreamHandler()  # what the CLI's logging.basicConfig installs (stderr)
    logging.getLogger().addHandler(handler)
    try:
        with logging_to(tmp_path / "s.log"):
            logging.getLogger("fingrav.stages.x").info("one line")
    finally:
        logging.getLogger().removeHandler(handler)
    assert capsys.readouterr().err.count("one line") == 1
    assert (tmp_path / "s.log").read_text().count("one line") == 1
