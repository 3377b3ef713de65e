"""The "adding a kernel kind" / "adding a backend" drills as docs/ARCHITECTURE.md lists them, for the registry
tests (tests/test_kinds.py, tests/test_backends.py) that check each listed file has its part."""

from __future__ import annotations

from pathlib import Path

ARCHITECTURE = Path(__file__).resolve().parents[2] / "docs" / "ARCHITECTURE.md"


def drill_files(heading: str, doc: Path = ARCHITECTURE) -> list[str]:
    """The files listed under the bold `heading` of the architecture document: each bullet's first `path`."""
    block = doc.read_text().split(f"**{heading}**", 1)[1].split("\n\n", 1)[0]
    return [line.split("`")[1] for line in block.splitlines() if line.startswith("- `")]
