"""No function in fingrav/ is longer than MAX_LINES lines of body (its docstring not counted): a long function
becomes a composition of named steps (issue 18). The functions still longer are listed in `STILL_LONG` with their
length: none may be added, none may grow, and an entry that is split below the limit must leave the list (a
ratchet until the list is empty)."""

from __future__ import annotations

import ast
from pathlib import Path

MAX_LINES = 50
#: not split yet (body lines): the list may only shrink
STILL_LONG: dict[str, int] = {
    "fingrav/analysis/combine.py:combine_ranks": 111,
    "fingrav/analysis/kernel_power.py:estimate_kernel_power": 128,
    "fingrav/device/sim/device.py:SimulatedGPU._run_calls": 96,
    "fingrav/device/sim/kernels.py:build_kernel": 64,
    "fingrav/device/sim/presets.py:preset_summary": 94,
    "fingrav/report/collectives.py:fig10_data": 64,
    "fingrav/report/figures.py:binning_chart": 86,
    "fingrav/report/figures.py:sse_error_chart": 60,
    "fingrav/report/figures.py:timeline_sync_chart": 116,
    "fingrav/report/figures.py:timeline_sync_chart.panel": 55,
    "fingrav/testing/fakes/fake_amdsmi.py:amdsmi_get_gpu_metrics_info": 94,
    "fingrav/testing/fakes/fake_torch.py:fake_torch_module": 104,
}
PACKAGE = Path(__file__).resolve().parent.parent / "fingrav"


def body_lines(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first body statement after the docstring to the function's last line."""
    body = fn.body
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        body = body[1:]
    if not body:
        return 0
    return (fn.end_lineno or body[-1].end_lineno or 0) - body[0].lineno + 1


def long_functions(root: Path = PACKAGE, limit: int = MAX_LINES) -> list[tuple[str, int]]:
    """(module:qualified name, body lines) of every function over `limit` lines under `root`."""
    out = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), filename=str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef) and (n := body_lines(child)) > limit:
                        out.append((f"{path.relative_to(root.parent)}:{name}", n))
                    stack.append((child, name + "."))
    return sorted(out)


def test_the_scan_counts_body_lines_without_the_docstring(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(51))
    (tmp_path / "m.py").write_text(f'def long():\n    """Doc\n    string."""\n{body}\n\ndef short():\n    return 1\n')
    assert long_functions(tmp_path) == [(f"{tmp_path.name}/m.py:long", 51)]
    assert long_functions(tmp_path, 51) == []


def test_no_function_is_longer_than_the_limit_but_the_listed_ones_and_those_do_not_grow() -> None:
    found = dict(long_functions())
    assert set(found) - set(STILL_LONG) == set(), "split these into named steps"
    assert {f: n for f, n in found.items() if n > STILL_LONG[f]} == {}, "a listed function grew"
    assert set(STILL_LONG) - set(found) == set(), "split below the limit: remove them from STILL_LONG"
