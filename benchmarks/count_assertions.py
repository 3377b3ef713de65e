"""Count the tests' assertions (AST): `assert` statements and `pytest.raises` / `pytest.warns` checks, per file.

    python benchmarks/count_assertions.py [--rev f98689e] [--by-file]

Counts the working tree's tests/ (or, with --rev, the tests/ of a git revision) so that a change to the tests can
show that no check was dropped.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def count(source: str) -> tuple[int, int, int]:
    """(assert statements, pytest.raises/warns calls, test functions) in one module's source."""
    tree = ast.parse(source)
    asserts = raises = tests = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            asserts += 1
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("raises", "warns") and getattr(node.func.value, "id", "") == "pytest":
                raises += 1
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test_"):
            tests += 1
    return asserts, raises, tests


def files(rev: str | None) -> dict[str, str]:
    """path -> source of every tests/**/*.py (at `rev`, else in the working tree)."""
    if rev is None:
        return {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "tests").rglob("*.py"))}
    names = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "tests"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return {
        n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
        for n in names
        if n.endswith(".py")
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="a git revision (default: the working tree)")
    ap.add_argument("--by-file", action="store_true")
    args = ap.parse_args(argv)
    total = [0, 0, 0]
    for name, src in files(args.rev).items():
        c = count(src)
        total = [a + b for a, b in zip(total, c, strict=True)]
        if args.by_file:
            print(f"{name:<55}{c[0]:>7}{c[1]:>7}{c[2]:>7}")
    print(f"{'all (asserts, raises/warns, tests)':<55}{total[0]:>7}{total[1]:>7}{total[2]:>7}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
