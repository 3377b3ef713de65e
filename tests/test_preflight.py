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


def test_the_committed_h200_dataset_replays() -> None:
    check_sweep(cfg(sweep="h200", backend="replay", replay_dir="results/h200/gpu"), ROOT)  # no rule writes gpu/


def test_a_measuring_sweep_never_writes_over_committed_results() -> None:
    with pytest.raises(ConfigError, match="holds committed files"):
        check_sweep(cfg(sweep="h200"), ROOT)


@pytest.mark.skipif(importlib.util.find_spec("pynvml") is not None, reason="pynvml is installed here")
def test_a_gpu_sweep_says_which_library_is_missing(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs the pynvml module.*fingrav\[nvidia\]"):
        check_sweep(cfg(backend="nvml"), tmp_path)


def test_reserved_scenario_name() -> None:
    with pytest.raises(ConfigError, match="'calibration' is reserved"):
        parse_config({"sweep": "s", "scenarios": [{"name": "calibration", "kernel": KERNEL}]})
