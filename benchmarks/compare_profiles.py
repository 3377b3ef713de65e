"""Compare two sweeps' summary.json files (every number within a relative tolerance, everything else exactly):
the check that an analysis change leaves the analysis of a given raw dataset identical.

    python benchmarks/compare_profiles.py OLD_SWEEP_DIR NEW_SWEEP_DIR [--rel 1e-9]

Skips the keys that record when and by which code a file was made (provenance, timings).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

SKIP = {"provenance", "created", "git_commit", "elapsed_s", "analysis_s", "format_version"}


def diff(a: Any, b: Any, rel: float, path: str, out: list[str]) -> None:
    """Append to `out` every place where `a` and `b` differ beyond `rel`."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in SKIP:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'new' if k in b else 'old'}")
                continue
            diff(a[k], b[k], rel, f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: length {len(a)} vs {len(b)}")
            return
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            diff(x, y, rel, f"{path}[{i}]", out)
    elif isinstance(a, int | float) and isinstance(b, int | float) and not isinstance(a, bool):
        if not (math.isclose(a, b, rel_tol=rel, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))):
            out.append(f"{path}: {a!r} vs {b!r}")
    elif a != b:
        out.append(f"{path}: {a!r} vs {b!r}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old", type=Path)
    ap.add_argument("new", type=Path)
    ap.add_argument("--rel", type=float, default=1e-9)
    args = ap.parse_args(argv)
    files = sorted(p.relative_to(args.old) for p in args.old.rglob("profiles/**/summary.json"))
    bad: list[str] = []
    for f in files:
        out: list[str] = []
        diff(json.loads((args.old / f).read_text()), json.loads((args.new / f).read_text()), args.rel, str(f), out)
        bad += out
    print("\n".join(bad[:50]))
    print(f"{len(files)} summary.json files, {len(bad)} differences beyond {args.rel:g}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
