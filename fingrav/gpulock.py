"""One measurement per GPU at a time, and no measurement outliving its parent.

GPU-side module (stdlib). `gpu_lock(backend, index)` takes an exclusive `flock` on a file per physical GPU
(`$FINGRAV_LOCK_DIR`, default the system's temporary folder; the GPU named as the node knows it, `node_gpu`, so
that jobs a scheduler renumbered do not collide) for the whole calibrate or collect job, so that two
sweeps, or a rerun after `--unlock` beside an orphan, never measure one GPU at once: the second one fails at once
with a message naming the holder. `die_with_parent()` asks Linux to kill this process when the process that
started it (Snakemake's job, the CLI) dies, so a SIGKILLed Snakemake leaves no collector behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import logging
import os
import re
import signal
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from fingrav.backends import get_backend
from fingrav.errors import DeviceError

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1


def node_gpu(backend: str, index: int, env: Mapping[str, str] | None = None) -> str:
    """The node's name for the process's GPU `index`: the index-th entry of CUDA_VISIBLE_DEVICES (ROCR/HIP on
    AMD) when that lists the process's GPUs (a number or a UUID), else the index itself. Two jobs that each see
    "GPU 0" on one node (a scheduler gave them GPUs 2 and 5) lock different GPUs."""
    env = os.environ if env is None else env
    for var in get_backend(backend).visible_devices_env:  # the variables that renumber the process's GPUs
        listed = [x.strip() for x in (env.get(var) or "").split(",") if x.strip()]
        if listed:
            return listed[int(index)] if int(index) < len(listed) else str(int(index))
    return str(int(index))


def lock_path(backend: str, index: int) -> Path:
    """The lock file of the process's GPU `index` (named by its node-wide name, `node_gpu`)."""
    base = Path(os.environ.get("FINGRAV_LOCK_DIR") or tempfile.gettempdir())
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", node_gpu(backend, index))
    return base / f"fingrav-{backend}-gpu{name}.lock"


@contextlib.contextmanager
def gpu_lock(backend: str, index: int) -> Iterator[Path]:
    """Hold the GPU's lock while the block runs; DeviceError when another process holds it."""
    path = lock_path(backend, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")  # noqa: SIM115 - held open for the whole block
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            raise DeviceError(
                f"{backend} GPU {index} is being measured by {holder} ({path}): one measurement per GPU at a time"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}\n")
        fh.flush()
        yield path
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


def _parent_of(pid: int) -> int | None:
    """The parent pid of `pid` (Linux /proc), None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def die_with_parent(poll_s: float = 1.0) -> bool:
    """Linux only: SIGTERM this process when its parent dies (prctl), and also when its grandparent dies (a
    watchdog thread): a rule's shell survives a SIGKILLed Snakemake, so the shell alone is not enough.
    Returns whether the parent-death signal was set."""
    import threading
    import time

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        ok = libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
    except (OSError, AttributeError):
        ok = False
    parent = os.getppid()
    grandparent = _parent_of(parent)
    if grandparent is not None and grandparent > 1:

        def watch() -> None:
            while True:
                time.sleep(poll_s)
                if _parent_of(parent) != grandparent:  # the grandparent is gone: the shell was reparented
                    logger.error("the process that started this measurement died: stopping")
                    os.kill(os.getpid(), signal.SIGTERM)
                    return

        threading.Thread(target=watch, name="fingrav-die-with-parent", daemon=True).start()
    return ok
