"""One measurement per GPU at a time; a measurement dies with the process that started it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fingrav.errors import DeviceError
from fingrav.gpulock import gpu_lock


def test_second_measurement_of_one_gpu_fails_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FINGRAV_LOCK_DIR", str(tmp_path))
    holder = subprocess.Popen(
        [sys.executable, "-c", "from fingrav.gpulock import gpu_lock\nimport time\nwith gpu_lock('nvml', 0):\n"
         "    print('held', flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE, text=True, env={**__import__("os").environ, "FINGRAV_LOCK_DIR": str(tmp_path)},
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(DeviceError, match=r"nvml GPU 0 is being measured by pid \d+"), gpu_lock("nvml", 0):
            pass
        with gpu_lock("nvml", 1):  # another GPU is free
            pass
    finally:
        holder.kill()
        holder.wait()
    with gpu_lock("nvml", 0):  # released when its holder died
        pass


def test_measurement_dies_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    """A 'Snakemake' (grandparent) starts a 'shell' (parent) that starts the stage; SIGKILL the grandparent."""
    marker = tmp_path / "alive"
    stage = (
        "import time, pathlib\nfrom fingrav.gpulock import die_with_parent\ndie_with_parent(0.1)\n"
        f"p = pathlib.Path({str(marker)!r})\n"
        "for i in range(300):\n    p.write_text(str(i)); time.sleep(0.05)\n"
    )
    shell = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {stage!r}])\n"
    grandparent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {shell!r}])\n"]
    )
    deadline = time.time() + 20
    while not marker.exists() and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists()
    grandparent.kill()
    grandparent.wait()
    time.sleep(1.0)
    before = marker.read_text()
    time.sleep(0.5)
    assert marker.read_text() == before  # the stage stopped writing: it is gone


def test_lock_names_the_gpu_as_the_node_knows_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two scheduler jobs that each see their one GPU as GPU 0 (CUDA_VISIBLE_DEVICES=2 and =5) lock different GPUs;
    without the variable the index is the node's."""
    from fingrav.gpulock import lock_path, node_gpu

    monkeypatch.setenv("FINGRAV_LOCK_DIR", str(tmp_path))
    assert node_gpu("nvml", 0, {"CUDA_VISIBLE_DEVICES": "2"}) == "2"
    assert node_gpu("nvml", 1, {"CUDA_VISIBLE_DEVICES": "2,5"}) == "5"
    assert node_gpu("nvml", 0, {"CUDA_VISIBLE_DEVICES": "GPU-1b2c"}) == "GPU-1b2c"
    assert node_gpu("amdsmi", 0, {"ROCR_VISIBLE_DEVICES": "3"}) == "3"
    assert node_gpu("nvml", 4, {}) == "4"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    first = lock_path("nvml", 0)
    with gpu_lock("nvml", 0):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
        assert lock_path("nvml", 0) != first
        with gpu_lock("nvml", 0):  # the other job's GPU: free
            pass
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
        with pytest.raises(DeviceError, match="is being measured"), gpu_lock("nvml", 0):
            pass


def test_one_gpu_named_by_index_or_by_uuid_is_one_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that sees the GPU as CUDA_VISIBLE_DEVICES=GPU-aaa and one that sees it as node index 0 take one lock."""
    from fingrav import gpulock

    monkeypatch.setenv("FINGRAV_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpulock, "vendor_uuid", lambda backend, i: {0: "GPU-aaa", 1: "GPU-bbb"}.get(i))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert gpulock.lock_path("nvml", 0).name == "fingrav-nvml-GPU-aaa.lock"
    with gpu_lock("nvml", 0):
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaa")
        with pytest.raises(DeviceError, match="is being measured"), gpu_lock("nvml", 0):
            pass
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
        with gpu_lock("nvml", 0):  # GPU-bbb: free
            pass


def test_the_lock_folder_is_fixed_whatever_tmpdir_says(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from fingrav import gpulock

    monkeypatch.delenv("FINGRAV_LOCK_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "a"))
    first = gpulock.lock_dir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "b"))
    assert gpulock.lock_dir() == first and first in gpulock.LOCK_DIRS


def test_a_planted_link_is_refused_and_its_target_untouched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fingrav import gpulock

    monkeypatch.setenv("FINGRAV_LOCK_DIR", str(tmp_path))
    monkeypatch.setattr(gpulock, "vendor_uuid", lambda backend, i: "GPU-aaa")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    gpulock.lock_path("nvml", 0).symlink_to(victim)
    with pytest.raises(DeviceError, match="GPU lock file is a symbolic link"), gpu_lock("nvml", 0):
        pass
    assert victim.read_text() == "precious\n"
    gpulock.lock_path("nvml", 0).unlink()
    import os

    os.mkfifo(gpulock.lock_path("nvml", 0))
    with pytest.raises(DeviceError, match="not a regular file"), gpu_lock("nvml", 0):
        pass
