"""The power-sampler host: one vendor *poller* run in its own process (or thread), behind a pipe.

GPU-side module: standard library only (the batches it carries are whatever the poller takes, e.g.
`fingrav.device.base.PowerSamples`). Vendor libraries are imported by the poller factory, in the child.

Why a process
-------------
The poll loop must neither perturb the kernel-launch loop (no GIL sharing) nor be delayed by it, so
`SamplerHost` runs it in a child started with the multiprocessing *spawn* context (no CUDA/HIP state is
inherited). ``mode="thread"`` runs the very same loop (`host_main`) in a thread of the calling process
(tests, with a fake vendor module installed in ``sys.modules``).

The vendor poller (`Poller`)
----------------------------
A poller is made in the child by ``open_poller(config)``, a module-level function (spawn pickles it by
reference) that initializes the vendor library and returns an object with:

* ``schedule``: a `PollSchedule` (period in ns, busy-wait before a poll, what to do when late);
* ``describe() -> dict``: sent to the parent once the poller is ready;
* ``start()`` / ``stop()``: begin / end a sampling period (polls happen only in between);
* ``poll()``: one read of the vendor library; raises `DeviceError` when the poller gives up (too many
  failed reads in a row), which stops polling and is reported at the next drain;
* ``take()``: what was collected since the last take (a picklable batch);
* ``stats``: a dict of JSON-able counters, sent with every answer (a ``"warnings"`` list in it is logged
  by the parent, each message once);
* ``close()``: release the vendor library (called in the child on the way out, always).

Pipe protocol
-------------
The parent sends 1-tuples; the child answers each one:

* child, once set up: ``("ready", describe())``, or ``("error", error class name, message)`` and exits;
* ``("start",)`` -> ``("ok", stats)``; ``("stats",)`` -> ``("ok", stats)``;
* ``("drain",)`` / ``("stop",)`` -> ``("batch", batch, stats)``: the child polls once more first, so that
  what was published up to the request is included; ``stop`` ends the sampling period;
* ``("close",)`` -> ``("ok", stats)``, then the child closes the poller and exits;
* after a fatal poll error, a drain or stop is answered ``("error", "DeviceError", message)`` (what was
  collected is dropped) and polling stays off until the next ``start``.

Note for scripts: *spawn* re-imports the parent's ``__main__`` module in the child, so keep heavy imports
(torch) inside ``main()`` and guard the entry point with ``if __name__ == "__main__":``.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from fingrav.errors import BackendUnavailableError, DeviceError, FingravError

logger = logging.getLogger(__name__)

#: (module, function, kwargs) the child calls before opening the poller (tests configure a fake with it)
Setup = tuple[str, str, dict[str, Any]]

_ERRORS: dict[str, type[FingravError]] = {
    "BackendUnavailableError": BackendUnavailableError,
    "DeviceError": DeviceError,
}


@dataclass(frozen=True)
class PollSchedule:
    """When the child polls (all ns).

    period_ns: poll period; spin_ns: busy-wait the last `spin_ns` before a poll (0: sleep all of it);
    catch_up: when a poll is late by up to one period, poll again at once (True) or one period from now
    (False); later than one period, the schedule restarts from now either way (no burst of polls)."""

    period_ns: int
    spin_ns: int = 0
    catch_up: bool = False

    def __post_init__(self) -> None:
        if self.period_ns <= 0:
            raise ValueError(f"period_ns must be > 0, got {self.period_ns}")

    def next_after(self, due_ns: int, now_ns: int) -> int:
        """The deadline after the poll that was due at `due_ns`, now being `now_ns` (perf_counter_ns)."""
        nxt = due_ns + self.period_ns
        if self.catch_up:
            return now_ns if now_ns - nxt > self.period_ns else nxt
        return now_ns + self.period_ns if nxt < now_ns else nxt


class Poller(Protocol):
    """What a vendor poller offers the sampler host (module docstring)."""

    schedule: PollSchedule

    def describe(self) -> dict[str, Any]: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def poll(self) -> Any: ...

    def take(self) -> Any: ...

    @property
    def stats(self) -> dict[str, Any]: ...

    def close(self) -> None: ...


# --------------------------------------------------------------------------- the child
def _wait(conn: Any, deadline_ns: int | None, spin_ns: int) -> bool:
    """Wait for a request or for `deadline_ns` (perf_counter_ns; None: a request only). True when a
    request is there. The last `spin_ns` before the deadline are busy-waited (pipe checked between)."""
    if deadline_ns is None:
        return bool(conn.poll(None))
    left = deadline_ns - time.perf_counter_ns()
    if left > spin_ns and conn.poll((left - spin_ns) / 1e9):
        return True
    while time.perf_counter_ns() < deadline_ns:
        if conn.poll():
            return True
    return False


class _Server:
    """The sampler host's state between requests: whether it samples, when the next poll is due (perf_counter
    ns) and why the poller gave up (reported at the next drain)."""

    def __init__(self, conn: Any, poller: Poller, name: str) -> None:
        self.conn, self.poller, self.name = conn, poller, name
        self.running = False
        self.fatal: str | None = None
        self.due = time.perf_counter_ns()

    def poll(self) -> None:
        try:
            self.poller.poll()
        except DeviceError as exc:  # the poller gave up: reported at the next drain
            self.fatal = str(exc)
            self.running = False
            self.poller.stop()

    def begin(self) -> None:
        self.fatal = None
        self.poller.start()
        self.running = True
        self.due = time.perf_counter_ns()

    def handle(self, msg: Any) -> bool:
        """Answer one request (module docstring); False after "close"."""
        conn, poller = self.conn, self.poller
        cmd = msg[0] if isinstance(msg, tuple | list) and msg else msg
        if cmd == "close":
            conn.send(("ok", poller.stats))
            return False
        if cmd == "start":
            self.begin()
            conn.send(("ok", poller.stats))
        elif cmd in ("drain", "stop"):
            if self.running:
                self.poll()
            if self.fatal is not None:
                conn.send(("error", "DeviceError", self.fatal))
                poller.take()
                return True
            if cmd == "stop":
                self.running = False
                poller.stop()
            conn.send(("batch", poller.take(), poller.stats))
        elif cmd == "stats":
            conn.send(("ok", poller.stats))
        else:
            conn.send(("error", "DeviceError", f"{self.name}: unknown request {msg!r}"))
        return True


def serve(conn: Any, poller: Poller, name: str, autostart: bool = False) -> None:
    """Serve requests from `conn` (module docstring) and poll on `poller.schedule` while sampling.
    Returns on "close" or when the parent goes away."""
    schedule = poller.schedule
    server = _Server(conn, poller, name)
    if autostart:
        server.begin()
    while True:
        try:
            ready = _wait(conn, server.due if server.running else None, schedule.spin_ns)
        except (EOFError, OSError):
            return
        if ready:
            try:
                msg = conn.recv()
            except (EOFError, OSError):
                return  # the parent is gone
            if not server.handle(msg):
                return
            continue
        if not server.running:
            continue
        server.poll()
        server.due = schedule.next_after(server.due, time.perf_counter_ns())


def host_main(
    conn: Any,
    open_poller: Callable[[Any], Poller],
    config: Any,
    name: str,
    setup: Setup | None = None,
    autostart: bool = False,
) -> None:
    """Entry point of the sampler (child process or thread): run `setup`, open the poller, answer
    ("ready", info) or ("error", kind, message), then serve requests; the poller is closed on the way out."""
    poller: Poller | None = None
    try:
        try:
            if setup is not None:
                mod, fn, kwargs = setup
                getattr(importlib.import_module(mod), fn)(**kwargs)
            poller = open_poller(config)
            info = poller.describe()
        except FingravError as exc:
            conn.send(("error", type(exc).__name__, str(exc)))
            return
        except Exception as exc:  # anything else: report it rather than die silently
            conn.send(("error", "DeviceError", f"{name} failed to start: {type(exc).__name__}: {exc}"))
            return
        conn.send(("ready", info))
        serve(conn, poller, name, autostart)
    except (EOFError, BrokenPipeError):
        pass  # the parent went away
    finally:
        if poller is not None:
            with contextlib.suppress(Exception):  # best effort at exit
                poller.close()
        with contextlib.suppress(Exception):
            conn.close()


# --------------------------------------------------------------------------- the parent's side
class SamplerHost:
    """The parent's handle on one sampler process (or thread, ``mode="thread"``).

    open_poller / config: what the child opens (`open_poller(config)`, both picklable); name: for messages
    and logs ("NVML sampler"); empty: the batch drain/stop return when the sampler is not open; setup:
    (module, function, kwargs) the child calls first; autostart: the child starts sampling as soon as it is
    ready (no "start" round trip).

    open() starts the child and waits until it is ready; start() begins a sampling period; drain() returns
    what was collected since the last drain; stop() ends the period and returns what was not drained;
    close() ends the child. `stats` holds the child's counters as of the last answer."""

    def __init__(
        self,
        open_poller: Callable[[Any], Poller],
        config: Any,
        *,
        name: str = "sampler",
        mode: Literal["process", "thread"] = "process",
        empty: Callable[[], Any] = lambda: None,
        setup: Setup | None = None,
        autostart: bool = False,
        start_timeout_s: float = 60.0,
        reply_timeout_s: float = 30.0,
    ) -> None:
        if mode not in ("process", "thread"):
            raise ValueError(f"mode={mode!r}: 'process' or 'thread'")
        self.open_poller = open_poller
        self.config = config
        self.name = name
        self.mode = mode
        self.empty = empty
        self.setup = setup
        self.autostart = autostart
        self.start_timeout_s = start_timeout_s
        self.reply_timeout_s = reply_timeout_s
        self.stats: dict[str, Any] = {}
        self.info: dict[str, Any] = {}
        self._conn: Any = None
        self._worker: Any = None
        self._sampling = False
        self._warned = 0

    @property
    def alive(self) -> bool:
        return self._worker is not None and self._worker.is_alive()

    @property
    def sampling(self) -> bool:
        return self._sampling

    def open(self) -> dict[str, Any]:
        """Start the child and wait until its poller is set up; returns its describe()."""
        if self._conn is not None:
            return self.info
        args = (self.open_poller, self.config, self.name, self.setup, self.autostart)
        thread_name = "fingrav-" + self.name.lower().replace(" ", "-")
        if self.mode == "process":
            ctx = multiprocessing.get_context("spawn")
            parent, child = ctx.Pipe(duplex=True)
            worker: Any = ctx.Process(target=host_main, args=(child, *args), name=thread_name, daemon=True)
        else:
            parent, child = multiprocessing.Pipe(duplex=True)
            worker = threading.Thread(target=host_main, args=(child, *args), name=thread_name, daemon=True)
        worker.start()
        if self.mode == "process":
            child.close()  # the child holds its own copy
        self._conn, self._worker = parent, worker
        try:
            _kind, payload = self._receive(self.start_timeout_s, "start")
        except BaseException:
            self._abandon()
            raise
        self.info = payload
        self._sampling = self.autostart
        logger.info("%s ready (%s mode, pid %s)", self.name, self.mode, getattr(worker, "pid", None))
        return self.info

    def _receive(self, timeout_s: float, what: str) -> tuple[str, Any]:
        conn = self._conn
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            try:
                if conn.poll(min(max(left, 0.0), 0.5)):
                    reply = conn.recv()
                    break
            except (EOFError, OSError) as exc:
                raise DeviceError(f"{self.name} ({what}): the sampler {self.mode} went away") from exc
            if not self.alive:
                code = getattr(self._worker, "exitcode", None)
                raise DeviceError(f"{self.name} ({what}): the sampler {self.mode} died (exit code {code})")
            if left <= 0:
                raise DeviceError(f"{self.name} ({what}): no answer within {timeout_s:.0f} s")
        if reply[0] == "error":
            raise _ERRORS.get(reply[1], DeviceError)(reply[2])
        if len(reply) >= 3 and isinstance(reply[-1], dict):
            self._take_stats(reply[-1])
        elif reply[0] == "ok" and isinstance(reply[1], dict):
            self._take_stats(reply[1])
        return reply[0], reply[1]

    def _take_stats(self, stats: dict[str, Any]) -> None:
        self.stats = stats
        warnings = stats.get("warnings", [])
        for msg in warnings[self._warned :]:
            logger.warning("%s: %s", self.name, msg)
        self._warned = len(warnings)

    def _request(self, cmd: str) -> tuple[str, Any]:
        if self._conn is None:
            self.open()
        try:
            self._conn.send((cmd,))
        except (OSError, EOFError, BrokenPipeError) as exc:
            raise DeviceError(f"{self.name} ({cmd}): the sampler {self.mode} went away") from exc
        return self._receive(self.reply_timeout_s, cmd)

    def start(self) -> None:
        """Begin a sampling period (opens the child first when needed)."""
        self._request("start")
        self._sampling = True

    def drain(self) -> Any:
        """What was collected since the last drain (`empty()` when the sampler is not open)."""
        if self._conn is None:
            return self.empty()
        kind, batch = self._request("drain")
        return batch if kind == "batch" else self.empty()

    def stop(self) -> Any:
        """End the sampling period; return what was not drained yet (the child stays open)."""
        if self._conn is None:
            return self.empty()
        self._sampling = False
        kind, batch = self._request("stop")
        return batch if kind == "batch" else self.empty()

    def close(self, timeout_s: float = 5.0) -> None:
        """Ask the child to exit; terminate it (this process's own child, by handle) if it does not.
        Idempotent."""
        if self._conn is None:
            return
        try:
            self._conn.send(("close",))
            if self._conn.poll(timeout_s):
                reply = self._conn.recv()
                if reply and reply[0] == "ok" and isinstance(reply[1], dict):
                    self._take_stats(reply[1])
        except (OSError, EOFError, BrokenPipeError):
            pass
        self._abandon(timeout_s)

    def _abandon(self, timeout_s: float = 5.0) -> None:
        worker, conn = self._worker, self._conn
        self._worker = self._conn = None
        self._sampling = False
        if worker is not None:
            worker.join(timeout_s)
            if self.mode == "process" and worker.is_alive():
                logger.warning("%s process did not exit; terminating it", self.name)
                worker.terminate()
                worker.join(timeout_s)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self) -> SamplerHost:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
