"""Logging of a stage to its log file (Snakemake's `log:`) and stderr."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


@contextlib.contextmanager
def logging_to(log_path: str | Path | None, level: int = logging.INFO) -> Iterator[None]:
    """Send fingrav's log records to `log_path` (and stderr) while a stage runs, once each: not also through the
    root logger's handlers (the CLI's basicConfig would print every line twice)."""
    root = logging.getLogger("fingrav")
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path is not None:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w"))
    old_level, old_propagate = root.level, root.propagate
    root.setLevel(level)
    root.propagate = False
    for h in handlers:
        h.setFormatter(logging.Formatter(LOG_FORMAT))
        root.addHandler(h)
    try:
        yield
    finally:
        for h in handlers:
            root.removeHandler(h)
            h.close()
        root.setLevel(old_level)
        root.propagate = old_propagate
