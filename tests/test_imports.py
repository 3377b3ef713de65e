"""Package structure: no import circle in fingrav/, and the GPU-side modules import no analysis library."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "fingrav"

# modules that run on the GPU machine, where polars, altair and snakemake are not installed
GPU_SIDE = (
    "fingrav.config",
    "fingrav.rawio",
    "fingrav.layout",
    "fingrav.logs",
    "fingrav.provenance",
    "fingrav.errors",
    "fingrav.ranks",
    "fingrav.clocksync",
    "fingrav.sensorfit",
    "fingrav.contracts",
    "fingrav.contracts.calibration",
    "fingrav.contracts.clock",
    "fingrav.contracts.flags",
    "fingrav.contracts.plan",
    "fingrav.contracts.roles",
    "fingrav.contracts.sensor",
    "fingrav.contracts.summary",
    "fingrav.contracts.tables",
    "fingrav.contracts.units",
    "fingrav.contracts.work",
    "fingrav.contracts.export",
    "fingrav.export",
    "fingrav",
    "fingrav.collect.calibrate",
    "fingrav.collect.plan",
    "fingrav.collect.runner",
    "fingrav.collect.targeting",
    "fingrav.collect.distributed",
    "fingrav.device",
    "fingrav.device.base",
    "fingrav.device.sim",
    "fingrav.device.nvidia",
    "fingrav.device.amd",
    "fingrav.device.torch_device",
    "fingrav.device.sampler_host",
    "fingrav.device.kernels",
    "fingrav.device.callables",
    "fingrav.device.patterns",
    "fingrav.device.sdpa",
    "fingrav.stages",
    "fingrav.stages.__main__",
    "fingrav.stages.worker",
    "fingrav.stages.calibrate",
    "fingrav.stages.collect",
    "fingrav.cli",
    "fingrav.preflight",
    "fingrav.gpulock",
    "fingrav.backends",
    "fingrav.kinds",
    "fingrav.collect.estimate",
    "fingrav.analysis.energy",
    "fingrav.analysis.sustained",
)
FORBIDDEN = ("polars", "altair", "vl_convert", "snakemake")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """Every fingrav module `path` imports (module level and inside functions; not under TYPE_CHECKING).
    `from pkg import sub` is an import of the submodule `pkg.sub` only (the package is already initialized)."""
    tree = ast.parse(path.read_text())
    me = _module_name(path)
    is_pkg = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names if a.name.startswith("fingrav"))
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = me.split(".") if is_pkg else me.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    mod = ".".join(base + ([child.module] if child.module else []))
                else:
                    mod = child.module or ""
                if mod.startswith("fingrav"):
                    subs = {f"{mod}.{a.name}" for a in child.names} & modules
                    out.update(subs)
                    if len(subs) < len(child.names):  # names defined in `mod` itself
                        out.add(mod)
            visit(child)

    visit(tree)
    return out


def import_graph() -> dict[str, set[str]]:
    mods = {_module_name(p): p for p in PKG.rglob("*.py")}
    return {m: {d for d in _imports(p, set(mods)) if d in mods and d != m} for m, p in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    stack: list[str] = []

    def dfs(u: str) -> list[str] | None:
        color[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if color.get(v) == 1:
                return stack[stack.index(v) :] + [v]
            if v not in color and (c := dfs(v)):
                return c
        stack.pop()
        color[u] = 2
        return None

    for u in sorted(graph):
        if u not in color and (c := dfs(u)):
            return c
    return None


def test_no_import_cycle_in_fingrav() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("module", GPU_SIDE)
def test_gpu_side_modules_import_no_analysis_library(module: str) -> None:
    code = (
        f"import sys, importlib; importlib.import_module({module!r}); "
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]; print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"{module} imports {out}"


def test_the_peers_experiment_imports_no_analysis_library() -> None:
    """experiments/peers.py runs on the GPU machine (results/h200-db/REPRODUCE.md), which has no polars."""
    peers = Path(__file__).resolve().parent.parent / "experiments"
    code = (
        f"import sys; sys.path.insert(0, {str(peers)!r}); import peers; "
        f"bad = [m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}]; print(','.join(sorted(bad)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "", f"experiments/peers.py imports {out}"
