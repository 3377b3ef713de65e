"""What a sweep needs beyond a valid config is checked when it is planned: one message, no job started."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fingrav.config import parse_config
from fingrav.errors import ConfigError
from fingrav.preflight import check_sweep

ROOT = Path(__file__).resolve().parent.parent
KERNEL = {"kind": "gemm", "m": 64, "n": 64, "k": 64}


def cfg(sweep: str = "s", **device: object):
    return parse_config(
        {"sweep": sweep, "device": {"backend": "sim", **device}, "scenarios": [{"name": "a", "kernel": KERNEL}]}
    )


def test_results_folder_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "results").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "results" / "s").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="symbolic link"):
        check_sweep(cfg(), tmp_path)


@pytest.mark.parametrize("replay_dir", ["results/s", "results/s/raw/gpu0", "results/s/profiles"])
def test_replay_of_what_its_own_rules_write_is_refused(tmp_path: Path, replay_dir: str) -> None:
    (tmp_path / replay_dir).mkdir(parents=True)
    with pytest.raises(ConfigError, match="lies where this sweep writes"):
        check_sweep(cfg(backend="replay", replay_dir=replay_dir), tmp_path)


def test_replay_of_a_missing_dataset_is_refused_at_planning(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="replay_dir = 'datasets/nope': no such folder"):
        check_sweep(cfg(backend="replay", replay_dir="datasets/nope"), tmp_path)
    (tmp_path / "datasets" / "x" / "raw").mkdir(parents=True)
    with pytest.raises(ConfigError, match="GPU 0"):
        check_sweep(cfg(backend="replay", replay_dir="datasets/x"), tmp_path)


def test_the_committed_h200_dataset_replays_into_a_folder_of_its_own() -> None:
    check_sweep(cfg(sweep="h200-replay", backend="replay", replay_dir="results/h200/gpu"), ROOT)


@pytest.mark.parametrize("backend", ["sim", "replay"])
def test_no_sweep_writes_over_a_committed_dataset(backend: str) -> None:
    """A measuring sweep or a replay (of another dataset, too) named like a committed dataset is refused."""
    device = {"replay_dir": "results/h200-check/gpu"} if backend == "replay" else {}
    with pytest.raises(ConfigError, match="committed dataset 'h200'"):
        check_sweep(cfg(sweep="h200", backend=backend, **device), ROOT)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml is installed here")
def test_a_gpu_sweep_says_which_library_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs the pynvml module.*fingrav\[nvidia\]"):
        check_sweep(cfg(backend="nvml"), tmp_path)


def test_reserved_scenario_name() -> None:
    with pytest.raises(ConfigError, match="'calibration' is reserved"):
        parse_config({"sweep": "s", "scenarios": [{"name": "calibration", "kernel": KERNEL}]})


def test_a_results_folder_of_another_sweep_is_refused(tmp_path: Path) -> None:
    """raw/OWNER.json (written by calibrate / collect) names the backend and GPU that measured the folder's raw
    data: a sweep of another backend or GPU under the same name is refused when it is planned."""
    from fingrav.layout import SweepLayout
    from fingrav.preflight import claim_results

    layout = SweepLayout.of("s", tmp_path / "results")
    claim_results(layout, cfg().device)  # a simulated sweep measured here
    check_sweep(cfg(), tmp_path)  # the same sweep again: fine
    for other in ({"index": 1}, {"backend": "replay", "replay_dir": "data"}):
        (tmp_path / "data" / "raw" / "gpu0" / "calibration").mkdir(parents=True, exist_ok=True)
        with pytest.raises(ConfigError, match=r"results/s belongs to another sweep .*'backend': 'sim'"):
            check_sweep(cfg(**other), tmp_path)
    layout.owner_json.write_text('{"backend": "nvml", "index": 0}')  # real-GPU measurements
    with pytest.raises(ConfigError, match="give this sweep a name of its own"):
        check_sweep(cfg(), tmp_path)


def test_the_command_line_screen_refuses_a_yte_file_with_one_message(tmp_path: Path) -> None:
    from fingrav.preflight import screen_snakemake_command_line

    ok, bad = tmp_path / "ok.yaml", tmp_path / "bad.yaml"
    ok.write_text("sweep: s\n")
    bad.write_text("__use_yte__: true\nsweep: ?print('evaluated')\n")
    screen_snakemake_command_line(["-n", "--configfile", str(ok)])
    with pytest.raises(SystemExit, match="YTE templates are not allowed") as exc:
        screen_snakemake_command_line(["-n", "--configfile", str(ok), str(bad)])
    assert str(bad) in str(exc.value)


def test_estimate_line_gives_the_expected_gpu_time(tmp_path: Path) -> None:
    from fingrav.preflight import estimate_line

    line = estimate_line(cfg(), tmp_path)
    assert line is not None and "GPU-s expected for 1 scenarios" in line and "fingrav plan" in line
    replay = cfg(backend="replay", replay_dir=str(tmp_path))
    assert estimate_line(replay, tmp_path) is None
