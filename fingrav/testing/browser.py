"""Debian's Chromium as the report's tests and benchmarks drive it (through Playwright, never its downloads).

The flags keep a headless Chromium quiet on a machine with no network: without the background-networking ones it
tries Google's hosts at every start."""

from __future__ import annotations

from pathlib import Path
from typing import Final

CHROMIUM: Final = Path("/usr/bin/chromium")  # apt-get install -y --no-install-recommends chromium (.ci/run does)
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
