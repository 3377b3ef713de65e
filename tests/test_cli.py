"""`fingrav gpu-sweep` resumes where it stopped, never deletes an earlier measurement, and collects every scenario on
one device opened once (`fingrav.stages.collect.KeptDevice`) with the raw data of a device opened per scenario."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml
from conftest import tiny_config

from fingrav.cli import main
from fingrav.config import parse_config
from fingrav.device.sim import SimulatedGPU
from fingrav.errors import DeviceError
from fingrav.layout import SweepLayout


@pytest.mark.slow
def test_gpu_sweep_resumes_and_archives(tmp_path: Path) -> None:
    data = tiny_config(sweep="cli", max_runs=60)
    data["scenarios"] = data["scenarios"][:2]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    raw = out / "raw" / "gpu0"
    stamps = {p: p.stat().st_mtime_ns for p in raw.rglob("*.parquet")}
    # a rerun keeps everything: calibration and both scenarios are complete and by this config
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    assert {p: p.stat().st_mtime_ns for p in raw.rglob("*.parquet")} == stamps
    assert not (out / "archive").exists()
    # an interrupted (damaged) collection is moved aside and measured again
    victim = raw / "cb-8k" / "samples.parquet"
    victim.write_bytes(victim.read_bytes()[:100])
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    archived = list((out / "archive").glob("cb-8k-*"))
    assert len(archived) == 1 and (archived[0] / "samples.parquet").stat().st_size == 100
    assert (raw / "cb-8k" / "MANIFEST.json").exists() and victim.stat().st_size > 100
    assert (raw / "cb-2k" / "samples.parquet").stat().st_mtime_ns == stamps[raw / "cb-2k" / "samples.parquet"]
    # a changed collection parameter re-measures, and the earlier raw data is kept in the archive
    data["run_policy"]["max_runs"] = 50
    cfg.write_text(yaml.safe_dump(data))
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out)]) == 0
    assert len(list((out / "archive").glob("cb-2k-*"))) == 1 and len(list((out / "archive").glob("cb-8k-*"))) == 2


def test_gpu_sweep_starts_no_scenario_the_time_limit_would_cut(tmp_path: Path, monkeypatch) -> None:
    """--time-limit-s: a scenario whose planned GPU time (x TIME_LIMIT_MARGIN) does not fit in what is left is not
    started: nothing of it is written, it is listed as not_started, and the exit status says to call again; the
    scenarios before it are collected, and a call with time enough finishes the sweep."""
    import fingrav.cli as cli

    data = tiny_config(sweep="cli-limit", max_runs=40)
    data["scenarios"] = data["scenarios"][:2]
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    first, second = (s["name"] for s in data["scenarios"])
    prices = {first: 1.0, second: 1e6}  # the second would take far longer than any limit
    monkeypatch.setattr(cli, "_prices", lambda c, layout: prices)
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out), "--time-limit-s", "3600"]) == cli.TIME_LIMIT_RC
    raw = out / "raw" / "gpu0"
    assert (raw / first / "COLLECTED.json").exists() and not (raw / second).exists()
    assert json.loads((out / "gpu-sweep.json").read_text())["not_started"] == [second]
    prices[second] = 1.0
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(out), "--time-limit-s", "3600"]) == 0
    assert (raw / second / "COLLECTED.json").exists()
    assert json.loads((out / "gpu-sweep.json").read_text())["not_started"] == []
    # the prices are the plan's: every scenario of the sweep, positive
    real = cli._prices(parse_config(data), SweepLayout(out))
    assert set(real) == {first, second} and all(v > 0 for v in real.values())


def test_version_and_one_argument_style(capsys) -> None:
    """`fingrav --version`; every subcommand that reads a sweep config takes it as --config."""
    from fingrav.cli import build_parser

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0 and capsys.readouterr().out.startswith("fingrav ")
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "cmd")
    for name in ("validate", "calibrate", "collect", "gpu-sweep", "export"):
        opts = {o for a in sub.choices[name]._actions for o in a.option_strings}
        assert "--config" in opts, name
    assert main(["validate", "--config", "config/config.yaml"]) == 0


def _without_created(doc: Any) -> Any:
    """A plan.json without its creation times (the only field two collections of one config differ in)."""
    if isinstance(doc, dict):
        return {k: _without_created(v) for k, v in doc.items() if k != "created_utc"}
    return [_without_created(v) for v in doc] if isinstance(doc, list) else doc


@pytest.mark.slow
def test_gpu_sweep_on_one_kept_device_gives_the_raw_data_of_a_device_per_scenario(tmp_path: Path, monkeypatch) -> None:
    """gpu-sweep opens the device once for its scenarios (plus once to calibrate); the Snakemake rule's way, a device
    opened for each scenario (`fingrav.stages.collect.run` alone), gives the same raw tables and truth, bit for bit,
    and the same plans (the simulator's state is reset between scenarios: `SimulatedGPU.reset_for_next_scenario`)."""
    import fingrav.device
    from fingrav.stages import collect

    data = tiny_config(sweep="kept", max_runs=30)  # 3 scenarios, one with a predecessor: two kernels prepared
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    opened: list[int] = []
    real_open = fingrav.device.open_device

    def counting_open(device_cfg: Any, seed: int = 0) -> Any:
        opened.append(seed)
        return real_open(device_cfg, seed=seed)

    monkeypatch.setattr(fingrav.device, "open_device", counting_open)
    kept, each = tmp_path / "kept", tmp_path / "each"
    assert main(["gpu-sweep", "--config", str(cfg_path), "--out", str(kept)]) == 0
    assert len(opened) == 2  # calibrate, then every scenario
    assert main(["calibrate", "--config", str(cfg_path), "--out", str(each)]) == 0
    cfg, layout = parse_config(data), SweepLayout(each)
    for s in cfg.scenarios:
        collect.run(layout, cfg.device, s, cfg.policy_for(s.name), cfg.seed)
    assert len(opened) == 2 + 1 + len(cfg.scenarios)
    tables = sorted(p.relative_to(kept) for p in kept.rglob("*.parquet"))
    assert tables == sorted(p.relative_to(each) for p in each.rglob("*.parquet"))
    assert sum(p.parts[0] == "truth" for p in tables) == 2 * len(cfg.scenarios)  # truth and reading truth
    for rel in tables:
        assert pq.read_table(kept / rel).equals(pq.read_table(each / rel)), rel
    for s in cfg.scenarios:
        a, b = (json.loads(SweepLayout(r).plan(s.name, 0).read_text()) for r in (kept, each))
        assert _without_created(a) == _without_created(b), s.name


@pytest.mark.slow
def test_the_simulated_sensor_noise_is_new_in_every_scenario(tmp_path: Path) -> None:
    """Each scenario's random streams are keyed to it (`SimulatedGPU.begin_scenario`): the sensor noise of two
    scenarios of one sweep (the raw samples less their noise-free readings) is uncorrelated, where it used to be the
    same sequence (correlation 0.985 in a fidelity sweep)."""
    import numpy as np
    import polars as pl

    data = tiny_config(sweep="noise", max_runs=30)
    data["device"]["sim"] = {"preset": "mi300x", "overrides": {"sensor_noise_mw": 20_000.0}}
    cfg_path = tmp_path / "c.yaml"
    cfg_path.write_text(yaml.safe_dump(data))
    assert main(["gpu-sweep", "--config", str(cfg_path), "--out", str(tmp_path / "s")]) == 0
    layout, noise = SweepLayout(tmp_path / "s"), []
    for s in parse_config(data).scenarios[:2]:
        raw = pl.read_parquet(layout.scenario_dir(s.name, 0) / "samples.parquet").filter(pl.col("channel") == "total")
        clean = pl.read_parquet(layout.reading_truth(s.name, 0)).filter(pl.col("channel") == "total")
        j = raw.join(clean.rename({"power_mw": "clean_mw"}), on=["t_ns", "channel"]).sort("t_ns")
        noise.append((j["power_mw"] - j["clean_mw"]).to_numpy())
    n = min(len(x) for x in noise)
    assert n > 200
    assert abs(float(np.corrcoef(noise[0][:n], noise[1][:n])[0, 1])) < 0.2


class _Recording(SimulatedGPU):
    """A simulated GPU that logs its opening, kernel releases and closing in `events`."""

    events: list[str] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events.append("open")

    def release_kernels(self) -> None:
        self.events.append(f"release {len(self._kernels)}")
        super().release_kernels()

    def close(self) -> None:
        self.events.append("close")
        super().close()


def _fake_sweep(monkeypatch, fail: str | None = None) -> list[str]:
    """gpu-sweep's own steps with a recording device (`_Recording`) and a collection that only prepares the
    scenario's kernels (it fails with a DeviceError on scenario `fail`); no calibration, no raw files. Returns
    the event log: "open", "collect <scenario> <kernels held at its start>", "release <kernels>", "close"."""
    import fingrav.cli
    import fingrav.device
    from fingrav.collect import runner
    from fingrav.stages import collect

    events: list[str] = []
    monkeypatch.setattr(_Recording, "events", events)
    monkeypatch.setattr(fingrav.device, "open_device", lambda c, seed=0: _Recording(c.sim, c.index, seed))

    def fake_collect(dev: _Recording, scenario: Any, *args: Any, **kwargs: Any) -> None:
        events.append(f"collect {scenario.name} {len(dev._kernels)}")
        dev.prepare(scenario.kernel)
        if scenario.predecessor is not None:
            dev.prepare(scenario.predecessor.kernel)
        if scenario.name == fail:
            raise DeviceError(f"injected fault in {fail}")

    monkeypatch.setattr(runner, "collect_scenario", fake_collect)
    monkeypatch.setattr(collect, "calibration_for_gpu", lambda *a, **k: None)
    monkeypatch.setattr(collect, "_write_receipt", lambda layout, name, rank: layout.collected(name, rank))
    monkeypatch.setattr(fingrav.cli, "_cmd_calibrate", lambda args: 0)
    return events


def test_gpu_sweep_opens_the_device_once_and_releases_the_kernels_between_scenarios(tmp_path, monkeypatch) -> None:
    """One device for all scenarios: each scenario starts on it with no kernel of the previous one left (released,
    as a new device holds none), and it is closed once, at the end."""
    events = _fake_sweep(monkeypatch)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(sweep="kept")))
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(tmp_path / "out")]) == 0
    assert events == [
        "open",
        "collect cb-2k 0", "release 1",
        "collect cb-8k 0", "release 1",
        "collect cb-2k-after-mb-4k 0", "release 2",
        "close",
    ]  # fmt: skip
    assert (tmp_path / "out" / "gpu-sweep.json").exists()


def test_a_failing_scenario_closes_the_kept_device_and_stops_the_sweep(tmp_path, monkeypatch, caplog) -> None:
    """As with a device per scenario: the error ends gpu-sweep (exit 2, no gpu-sweep.json, later scenarios not
    collected); the device, which may still be sampling, is closed at once, never reused."""
    events = _fake_sweep(monkeypatch, fail="cb-8k")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump(tiny_config(sweep="kept")))
    assert main(["gpu-sweep", "--config", str(cfg), "--out", str(tmp_path / "out")]) == 2
    assert events == ["open", "collect cb-2k 0", "release 1", "collect cb-8k 0", "close"]
    assert "injected fault in cb-8k" in caplog.text and not (tmp_path / "out" / "gpu-sweep.json").exists()
