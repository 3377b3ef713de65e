"""Every real-GPU dataset that results/README.md lists is let through /results/* by a .gitignore exception: a
dataset the ignore rule swallows is sealed in one working tree and in no commit (results/h200-sse, -sse2, -sse3 at
stop 30). Read from the files, no git needed (a tarball checks the same)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _listed() -> list[str]:
    text = (ROOT / "results" / "README.md").read_text()
    return re.findall(r"^\| `([A-Za-z0-9._-]+)/` \|", text, flags=re.MULTILINE)


def test_every_listed_dataset_has_a_gitignore_exception() -> None:
    listed = _listed()
    assert len(listed) >= 15 and "h200" in listed and "h200-sse" in listed
    rules = set((ROOT / ".gitignore").read_text().splitlines())
    missing = [name for name in listed if f"!/results/{name}/" not in rules]
    assert not missing, f"datasets listed in results/README.md but git-ignored: {missing}"


def test_every_sealed_dataset_in_the_tree_is_listed() -> None:
    """A folder with a DATASET.json (a sealed dataset) is in results/README.md's table, so the check above covers it."""
    listed = set(_listed())
    sealed = sorted(p.parent.name for p in (ROOT / "results").glob("*/DATASET.json"))
    assert sealed and not [name for name in sealed if name not in listed]
