"""A stage worker: a process that has imported the analysis libraries once and forks one child per job.

Every Snakemake job is a new process, and importing numpy, pyarrow, polars and pydantic costs ~0.5 s a job
(~25 s of a 45-job sweep). `python -m fingrav.stages` (the client, stdlib only) hands its job to a worker
over a UNIX socket instead: the worker forks, the child takes over the client's stdin/stdout/stderr (passed
as file descriptors), working directory and environment, runs the stage exactly as the client would have,
and reports its exit status. The worker is started on demand by the first client, serves one sweep folder
(the socket lives in `.snakemake/`), refuses jobs from a client whose fingrav source differs from its own
(so an edited checkout never runs stale code) and exits after `IDLE_S` seconds without a job.

GPU stages (calibrate, collect on real hardware) never go through a worker: CUDA and vendor libraries must
not be initialized in a forked child. `FINGRAV_NO_WORKER=1` turns the worker off everywhere.
"""

from __future__ import annotations

import array
import contextlib
import hashlib
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path

IDLE_S = 15.0
PRELOAD = (
    "numpy",
    "pyarrow.parquet",
    "polars",
    "pydantic",
    "fingrav.stages.collect",
    "fingrav.device.sim",
    "fingrav.stages.bin",
    "fingrav.stages.differentiate",
)
# imported once the first job has been handed to a child, while it runs: the report's libraries (altair,
# vl-convert: ~1 s) are needed only by the last job of a sweep, so they never delay the first one
LATE_PRELOAD = ("fingrav.stages.report", "fingrav.report.build")
_HDR = struct.Struct("!I")


def source_stamp() -> str:
    """A hash of the fingrav package's source files (paths, sizes, mtimes): a worker serves only clients
    that import the same code."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    files = []
    for top, _, names in os.walk(root):  # strings, not pathlib: this runs in every job's client
        files += [os.path.join(top, n) for n in names if n.endswith(".py")]
    h = hashlib.sha1(usedforsecurity=False)
    for f in sorted(files):
        st = os.stat(f)
        h.update(f"{os.path.relpath(f, root)}:{st.st_size}:{st.st_mtime_ns};".encode())
    h.update(sys.executable.encode())
    return h.hexdigest()[:16]


def socket_path(cwd: str | None = None) -> Path:
    """The worker socket of a working directory (the sweep's Snakemake folder)."""
    base = Path(cwd or os.getcwd()) / ".snakemake"
    return base / f"fingrav-worker-{os.getuid()}.sock"


def _send(conn: socket.socket, obj: dict, fds: list[int] | None = None) -> None:
    data = json.dumps(obj).encode()
    msg = _HDR.pack(len(data)) + data
    if fds:
        conn.sendmsg([msg], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])
    else:
        conn.sendall(msg)


def _recv(conn: socket.socket, with_fds: int = 0) -> tuple[dict | None, list[int]]:
    fds: list[int] = []
    buf = b""
    if with_fds:
        msg, anc, _, _ = conn.recvmsg(1 << 16, socket.CMSG_LEN(with_fds * array.array("i").itemsize))
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                a = array.array("i")
                a.frombytes(data[: len(data) - (len(data) % a.itemsize)])
                fds.extend(a)
        buf = msg
    while len(buf) < _HDR.size:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return None, fds
        buf += chunk
    (n,) = _HDR.unpack(buf[: _HDR.size])
    buf = buf[_HDR.size :]
    while len(buf) < n:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return None, fds
        buf += chunk
    return json.loads(buf[:n]), fds


# ----------------------------------------------------------------------------------------------- client
def run_via_worker(argv: list[str]) -> int | None:
    """Run `python -m fingrav.stages argv` in a worker; None when no worker can take it (run in-process)."""
    if os.environ.get("FINGRAV_NO_WORKER") or not hasattr(socket, "AF_UNIX"):
        return None
    path = socket_path()
    stamp = source_stamp()
    for attempt in range(2):
        conn = _connect(path)
        if conn is None:
            if attempt or not _spawn(path):
                return None
            conn = _connect(path, wait_s=10.0)
            if conn is None:
                return None
        with conn:
            try:
                _send(conn, {"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "stamp": stamp}, [0, 1, 2])
                reply, _ = _recv(conn)
            except OSError:
                reply = None
        if reply is None:
            return None
        if reply.get("stale"):  # a worker of other code: it has exited; start a new one
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
            continue
        return int(reply["status"])
    return None


def _connect(path: Path, wait_s: float = 0.0) -> socket.socket | None:
    deadline = time.monotonic() + wait_s
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(str(path))
            return s
        except OSError:
            s.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def _spawn(path: Path) -> bool:
    import subprocess

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        subprocess.Popen(
            [sys.executable, "-m", "fingrav.stages.worker", str(path)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return False
    return True


# ----------------------------------------------------------------------------------------------- worker
def serve(path: Path) -> None:
    """Preload, listen on `path`, fork a child per job; exit after IDLE_S seconds without a job."""
    import importlib
    import signal

    lock = _only_worker(path)
    if lock is None:
        return
    _preload()
    stamp = source_stamp()
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        srv.bind(str(path))
    except OSError:
        return  # another worker got there first
    srv.listen(16)
    srv.settimeout(IDLE_S)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped automatically
    late = list(LATE_PRELOAD)
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                return
            with conn:
                req, fds = _recv(conn, with_fds=3)
                if req is None or len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    continue
                if req.get("stamp") != stamp:
                    _send(conn, {"stale": True})
                    for fd in fds:
                        os.close(fd)
                    return
                if os.fork() == 0:  # the child runs the job
                    srv.close()
                    _child(conn, req, fds)
                for fd in fds:
                    os.close(fd)
            while late:  # between jobs, in the worker itself (a job's child already runs)
                with contextlib.suppress(Exception):  # a library that fails to import fails in the job instead
                    importlib.import_module(late.pop(0))
    finally:
        srv.close()
        with contextlib.suppress(FileNotFoundError):
            if path.exists():
                path.unlink()


def _preload() -> None:
    """Import the analysis libraries (`PRELOAD`) and read the installed package versions every job's provenance
    records (`fingrav.provenance.package_versions`): once here, not in every job's child."""
    import importlib

    for mod in PRELOAD:
        importlib.import_module(mod)
    importlib.import_module("fingrav.provenance").package_versions()


def _only_worker(path: Path, wait_s: float = 10.0):  # noqa: ANN202 - an open file or None
    """The lock that makes this the socket's one worker (held while the process lives), or None when another
    worker answers there: jobs that start together (`--cores 2`) each spawn a worker, and only one preloads."""
    import fcntl

    lock = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 - held for the process's life
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            conn = _connect(path)
            if conn is not None or time.monotonic() >= deadline:  # served by the other one (or it hangs)
                if conn is not None:
                    conn.close()
                lock.close()
                return None
            time.sleep(0.05)


def _child(conn: socket.socket, req: dict, fds: list[int]) -> None:
    import signal

    status = 1
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
            os.close(fd)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's own stdio
        sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        from fingrav.stages.job import run_stage

        status = run_stage(list(req["argv"]))
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # report like an uncaught exception of the job itself
        import traceback

        traceback.print_exc()
        status = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        with contextlib.suppress(OSError):
            _send(conn, {"status": status})
        os._exit(status)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
