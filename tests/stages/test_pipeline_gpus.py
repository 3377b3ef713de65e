"""Sweeps over the listed GPUs of one node (device.gpus) through Snakemake: every listed GPU calibrated, its files under
cards/<i>/ (fingrav.layout), jobs on different GPUs at once and never two on one GPU; a fleet survey (device.fleet)
runs every scenario on every GPU and reports the card-to-card spread. Simulated cards 3 % apart. Slow."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import snakemake, tiny_config

from fingrav.contracts.multigpu import FleetResult
from fingrav.contracts.profile import ScenarioSummary
from fingrav.contracts.summary import fleet_columns
from fingrav.rawio import read_model
from fingrav.replay_check import replayed_columns

pytestmark = pytest.mark.slow


def _summary(path: Path) -> ScenarioSummary:
    return ScenarioSummary.model_validate(json.loads(path.read_text()))


CARDS = (0, 1)


def fleet_config(fleet: bool = True) -> dict:
    data = tiny_config(sweep="fleet" if fleet else "spread")
    data["device"].update(gpus=list(CARDS), fleet=fleet)
    data["device"]["sim"]["card_spread_pct"] = 3.0
    return data


@pytest.fixture(scope="module")
def fleet_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    work = tmp_path_factory.mktemp("fleet")
    (work / "fleet.yaml").write_text(yaml.safe_dump(fleet_config()))
    proc = snakemake(work, "--configfile", str(work / "fleet.yaml"), "--cores", "2")
    return work / "results" / "fleet", proc.stdout + proc.stderr


def gpu_jobs(log: str) -> list[tuple[int, int, str]]:
    """(start, end, unit folder) of every calibrate / collect job, in Snakemake's log order (event indices)."""
    starts: dict[str, tuple[int, str]] = {}
    out = []
    job = r"^(?:local)?rule (?P<rule>calibrate|collect):\n(?P<body>(?:    .*\n)+)"
    events = re.finditer(rf"{job}|^Finished jobid: (?P<done>\d+)", log, re.M)
    for i, m in enumerate(events):
        if m["rule"]:
            jobid = re.search(r"jobid: (\d+)", m["body"])[1]
            root = re.search(r"root=([^,\s]+)", m["body"])[1]
            card = root.rsplit("/", 1)[1]  # the job holds its GPU's slot and no other's
            slots = dict(re.findall(r"fingrav_gpu(\d+)=(\d+)", m["body"]))
            assert slots == {str(i): str(int(str(i) == card)) for i in CARDS}, m["body"]
            starts[jobid] = (i, root)
        elif m["done"] in starts:
            begin, root = starts.pop(m["done"])
            out.append((begin, i, root))
    return out


def test_every_listed_gpu_is_calibrated_and_measured_in_its_folder(fleet_run: tuple[Path, str]) -> None:
    res, _ = fleet_run
    uuids = set()
    for i in CARDS:
        card = res / "cards" / str(i)
        cal = json.loads((card / "calibration" / "gpu0.json").read_text())
        uuids.add(cal["provenance"]["gpu_uuid"])
        assert cal["provenance"]["device"]["index"] == i
        for name in ("cb-2k", "cb-8k", "cb-2k-after-mb-4k"):
            plan = json.loads((card / "raw" / "gpu0" / name / "plan.json").read_text())
            assert plan["provenance"]["gpu_uuid"] == cal["provenance"]["gpu_uuid"]  # calibrated and measured alike
            assert (card / "profiles" / "gpu0" / name / "summary.json").is_file()
    assert len(uuids) == len(CARDS)
    assert not (res / "raw").exists() and not (res / "calibration").exists()  # per-GPU files: only under cards/


def test_jobs_on_different_gpus_run_at_once_never_two_on_one(fleet_run: tuple[Path, str]) -> None:
    _, log = fleet_run
    jobs = gpu_jobs(log)
    assert len(jobs) == len(CARDS) * 4  # a calibrate and 3 collects per GPU
    overlap_across = False
    for a in jobs:
        for b in jobs:
            if a is not b and a[0] < b[0] < a[1]:  # b started while a ran
                assert a[2] != b[2], f"two jobs at once on {a[2]}"
                overlap_across = True
    assert overlap_across, "no two GPU jobs ran at once"


def test_fleet_report_shows_the_card_to_card_spread(fleet_run: tuple[Path, str]) -> None:
    res, _ = fleet_run
    rows = replayed_columns(res)  # every number (metrics.csv: `gpu` and the fleet columns too) and the text
    fleets = {}
    for name, row in rows.items():
        fleet = fleets[name] = read_model(res / "profiles" / "fleet" / f"{name}.json", FleetResult)
        first = _summary(res / "cards" / "0" / "profiles" / "gpu0" / name / "summary.json").row
        assert row["power_w"] == pytest.approx(first["power_w"])  # the row: the first listed GPU
        assert row["gpu"] == 0 and row["fleet_gpus"] == 2
        numeric = [c for c in fleet_columns() if not c.endswith("_distinct")]
        assert all(c in row for c in numeric if fleet.row[c] is not None)
        assert row["fleet_power_spread_pct"] == pytest.approx(fleet.metrics["power"].spread_pct.value)
        cards = fleet.metrics["power"].cards
        for c in cards:  # each card's number is its own analysis', not recomputed
            own = _summary(res / "cards" / str(c.gpu) / "profiles" / "gpu0" / name / "summary.json")
            assert c.value.value == own.row["power_w"] and c.value.ci_low == own.row["power_ci_low_w"]
    assert any(f.row["fleet_power_distinct"] is True for f in fleets.values())  # 3 % cards: told apart
    html = (res / "report" / "index.html").read_text()
    assert "Card-to-card spread" in html and '<table class="fleet">' in html
    assert (res / "report" / "fleet_spread.png").stat().st_size > 0


def test_spread_sweep_plans_one_job_per_scenario_on_its_gpu(tmp_path: Path) -> None:
    (tmp_path / "spread.yaml").write_text(yaml.safe_dump(fleet_config(fleet=False)))
    proc = snakemake(tmp_path, "--configfile", str(tmp_path / "spread.yaml"), "-n", "--cores", "2")
    counts = dict(re.findall(r"^(calibrate|collect|bin|differentiate|fleet|report)\s+(\d+)$", proc.stdout, re.M))
    assert counts == {"calibrate": "2", "collect": "3", "bin": "3", "differentiate": "3", "report": "1"}
    plan = r"^(?:local)?rule collect:\n(?:    .*\n)*?    wildcards: root=(\S+), scenario=(\S+)"
    collects = re.findall(plan, proc.stdout, re.M)
    assert sorted(collects) == [
        ("results/spread/cards/0", "cb-2k"),
        ("results/spread/cards/0", "cb-2k-after-mb-4k"),
        ("results/spread/cards/1", "cb-8k"),
    ]
