"""No fingrav module runs polars work when imported: the analysis worker (`fingrav.stages.worker`) imports the
analysis and report modules and then forks one child per job, and a polars operation at import time starts polars'
thread pool in the worker, whose forked children then hang in their first polars call (a module-level
`pl.DataFrame(...).select(...)` did exactly that)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import importlib, os, pkgutil
    import numpy, polars, pyarrow  # their own start-up threads are not what this counts
    import fingrav

    def threads() -> int:
        return len(os.listdir("/proc/self/task"))

    before = threads()
    skip = ("fingrav.device.amd", "fingrav.device.nvidia", "fingrav.device.torch_device", "fingrav.device.sdpa")
    for m in pkgutil.walk_packages(fingrav.__path__, "fingrav."):
        if not m.name.startswith(skip):
            importlib.import_module(m.name)
    print(before, threads())
    polars.DataFrame({"a": [1, 2]}).select(polars.col("a") * 2)  # the check can fail: polars work starts threads
    print(threads())
    """
)


def test_importing_fingrav_starts_no_polars_threads():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True).stdout.split()
    before, after_import, after_work = (int(x) for x in out)
    assert after_import == before, "a fingrav module does polars work at import time (see the module docstring)"
    assert after_work > after_import  # the probe itself sees polars' pool start
