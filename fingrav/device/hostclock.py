"""The host clock of every timestamp fingrav records on a real GPU, and the wall clock some vendors stamp with.

GPU-side module: standard library only. Host timestamps (run starts, the brackets of GPU-clock reads, amdsmi
sample stamps) come from `host_ns`: CLOCK_MONOTONIC (``time.monotonic_ns``), which NTP may slew (by at most
500 ppm, like every Linux clock, and which the clock fit's drift absorbs) but never steps. The wall clock
(CLOCK_REALTIME, ``time.time_ns``) can jump at any time (an NTP step, settimeofday, a leap second), which would
shift every later sample against the executions: it is used only where a vendor stamps with it (NVML stamps its
power samples in wall-clock microseconds) and converted at once (`WallClock`), which detects a step.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

logger = logging.getLogger(__name__)

HOST_CLOCK = "CLOCK_MONOTONIC"  # recorded in provenance: what host_ns reads
STEP_TOLERANCE_NS = 200_000  # a change of the wall - host offset beyond this is a step (reads jitter by ~1 us)


def host_ns() -> int:
    """Now on the host clock (CLOCK_MONOTONIC, ns): never stepped."""
    return time.monotonic_ns()


class WallClock:
    """Converts wall-clock stamps (ns) to the host clock and notices when the wall clock steps.

    offset = wall - host, measured when made and checked by `update()` (a host read on each side of a wall read, the
    narrowest of a few brackets). Linux slews both clocks alike, so their offset never changes except when the wall
    clock is set: a change beyond `tolerance_ns` is a step, returned by `update()` (ns, signed), and the offset moves
    with it. `to_host(wall_ns)` uses the current offset: a stamp taken before a step and converted after it is off
    by the step, so a poller sets aside what it read across one (`fingrav.device.nvidia.poller`)."""

    def __init__(
        self,
        wall: Callable[[], int] = time.time_ns,
        host: Callable[[], int] = host_ns,
        tolerance_ns: int = STEP_TOLERANCE_NS,
    ) -> None:
        self.wall = wall
        self.host = host
        self.tolerance_ns = int(tolerance_ns)
        self.offset_ns = self._measure()
        self.steps: list[tuple[int, int]] = []  # (host ns when noticed, step ns)

    def _measure(self) -> int:
        best: tuple[int, int] | None = None
        for _ in range(3):
            h0 = self.host()
            w = self.wall()
            h1 = self.host()
            if best is None or h1 - h0 < best[0]:
                best = (h1 - h0, w - (h0 + h1) // 2)
        assert best is not None
        return best[1]

    def update(self) -> int | None:
        """Measure the offset again: the step (ns) when it moved by more than the tolerance (the new offset is used
        from now on), else None (the offset is kept as it was: the stamps it converts carry no read jitter)."""
        now = self._measure()
        step = now - self.offset_ns
        if abs(step) <= self.tolerance_ns:
            return None
        self.offset_ns = now
        self.steps.append((self.host(), step))
        logger.warning("the host's wall clock stepped by %+.3f ms (NTP or settimeofday)", step / 1e6)
        return step

    def to_host(self, wall_ns: int) -> int:
        """A wall-clock stamp (ns) on the host clock."""
        return int(wall_ns) - self.offset_ns
