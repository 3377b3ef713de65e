"""One measurement per GPU at a time, and no measurement outliving its parent.

GPU-side module (stdlib). `gpu_lock(backend, index)` takes an exclusive `flock` on a file per physical GPU for the
whole calibrate or collect job, so that two sweeps, or a rerun after `--unlock` beside an orphan, never measure one
GPU at once: the second one fails at once with a message naming the holder.

* The file is named by the GPU's UUID (`gpu_key`): the entry of CUDA_VISIBLE_DEVICES (ROCR/HIP on AMD) that the
  process's GPU `index` is (`node_gpu`: a scheduler's job sees its GPUs as 0, 1, ...), a UUID as it is, a node index
  resolved to its UUID by the vendor library; so a job that names the GPU by index and one that names it by UUID
  take one lock.
* It lives in one fixed folder (`lock_dir`: /run/lock where that is a shared sticky folder, else /tmp), never in
  $TMPDIR, which schedulers set per job. `FINGRAV_LOCK_DIR` overrides it (tests; a site where those are private):
  every process of a node must then set the same.
* It is opened without following a symbolic link (O_NOFOLLOW) and must be a regular file: a link planted at its
  name is refused, never written through.

`die_with_parent()` asks Linux to kill this process when the process that started it (Snakemake's job, the CLI)
dies, so a SIGKILLed Snakemake leaves no collector behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import logging
import os
import re
import signal
import stat
from collections.abc import Iterator, Mapping
from pathlib import Path

from fingrav.backends import get_backend
from fingrav.errors import DeviceError

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
LOCK_DIRS = (Path("/run/lock"), Path("/tmp"))  # the first shared, sticky, world-writable one (never $TMPDIR)


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


def vendor_uuid(backend: str, node_index: int) -> str | None:
    """The UUID of the node's GPU `node_index` from the vendor library (NVML, amdsmi); None where it cannot say."""
    try:
        if backend == "nvml":
            import pynvml

            pynvml.nvmlInit()
            try:
                uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(node_index))
            finally:
                pynvml.nvmlShutdown()
            return uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        if backend == "amdsmi":
            import amdsmi

            amdsmi.amdsmi_init()
            try:
                return str(amdsmi.amdsmi_get_gpu_device_uuid(amdsmi.amdsmi_get_processor_handles()[node_index]))
            finally:
                amdsmi.amdsmi_shut_down()
    except Exception as exc:  # no library, no driver, no such GPU: the node's index names it then
        logger.debug("no UUID for %s GPU %d: %s", backend, node_index, exc)
    return None


def gpu_key(backend: str, index: int, env: Mapping[str, str] | None = None) -> str:
    """The name of the process's GPU `index` in its lock file: its UUID where known (`node_gpu`, `vendor_uuid`),
    else "index<k>" (the node's index)."""
    name = node_gpu(backend, index, env)
    if not name.isdigit():
        return name  # a UUID (GPU-..., MIG-...) as CUDA_VISIBLE_DEVICES gives it
    return vendor_uuid(backend, int(name)) or f"index{name}"


def lock_dir() -> Path:
    """The one folder of every GPU lock on this node (module docstring)."""
    given = os.environ.get("FINGRAV_LOCK_DIR")
    if given:
        return Path(given)
    for folder in LOCK_DIRS:
        with contextlib.suppress(OSError):
            st = os.stat(folder, follow_symlinks=True)
            if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX and st.st_mode & 0o002:
                return folder
    return LOCK_DIRS[-1]


def lock_path(backend: str, index: int) -> Path:
    """The lock file of the process's GPU `index` (named by its UUID, `gpu_key`)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", gpu_key(backend, index))
    return lock_dir() / f"fingrav-{backend}-{name}.lock"


def _open_lock(path: Path) -> tuple[int, bool]:
    """Open (create) the lock file without following a link: (fd, writable). DeviceError naming the file when it is
    a link or not a regular file."""
    base = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # O_NONBLOCK: a planted FIFO never blocks the open
    try:
        try:
            fd, writable = os.open(path, base | os.O_RDWR | os.O_CREAT, 0o666), True
        except PermissionError:  # another user's lock file (sticky folder): a read-only fd locks as well
            fd, writable = os.open(path, base | os.O_RDONLY), False
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise DeviceError(f"{path}: the GPU lock file is a symbolic link; remove it (not fingrav's)") from None
        raise DeviceError(f"{path}: cannot open the GPU lock file ({err.strerror})") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise DeviceError(f"{path}: the GPU lock file is not a regular file; remove it (it is not fingrav's)")
    if writable and st.st_uid == os.getuid():
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o666)  # other users' measurements lock (and name their pid in) the same file
    return fd, writable


@contextlib.contextmanager
def gpu_lock(backend: str, index: int) -> Iterator[Path]:
    """Hold the GPU's lock while the block runs; DeviceError when another process holds it."""
    path = lock_path(backend, index)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, writable = _open_lock(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "another process"
            raise DeviceError(
                f"{backend} GPU {index} is being measured by {holder} ({path}): one measurement per GPU at a time"
            ) from None
        if writable:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        with contextlib.suppress(OSError):
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


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
