"""Wall time of the test suite as the README runs it (`python -m pytest -q -p no:cacheprovider`), with the load.

    python benchmarks/test_time.py [--repeat 1] [--top 15] [-- extra pytest args]

Prints one JSON line per run (wall seconds, pytest's summary line, the load average before and after, the machine)
and a short table of the slowest tests (pytest's --durations), so that a quiet machine can re-measure it with one
command. Not collected by pytest (benchmarks/ is outside `testpaths`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_DURATION = re.compile(r"^\s*([0-9.]+)s (call|setup|teardown)\s+(\S+)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--top", type=int, default=15, help="slowest tests to list")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    args = ap.parse_args(argv)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--durations={args.top}", *args.pytest_args]
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    for i in range(args.repeat):
        load0 = os.getloadavg()
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        lines = proc.stdout.splitlines()
        summary = next((ln for ln in reversed(lines) if re.search(r"\d+ (passed|failed)", ln)), "")
        print(
            json.dumps(
                {
                    "run": i + 1,
                    "rc": proc.returncode,
                    "wall_s": round(wall, 1),
                    "summary": summary.strip("= "),
                    "load_before": [round(x, 2) for x in load0],
                    "load_after": [round(x, 2) for x in os.getloadavg()],
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                }
            ),
            flush=True,
        )
        for ln in lines:
            if ln.startswith(("FAILED ", "ERROR ")):
                print(ln)
        slow = [m.groups() for ln in lines if (m := _DURATION.match(ln))]
        if slow:
            print(f"{'seconds':>8}  {'phase':<8} test")
            for secs, phase, test in slow:
                print(f"{float(secs):>8.1f}  {phase:<8} {test}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
