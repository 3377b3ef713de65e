"""fingrav: fine-grain GPU power profiles of short AI kernels (the FinGraV method).

`fingrav.profile(kernel_or_callable, device=..., policy=...)` measures one kernel from Python (`fingrav.api`).
This package stays light: GPU-side code imports it, so the API (which needs polars) is imported only when
`fingrav.profile` or `fingrav.ProfileResult` is first used.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing itself is not imported: every stage job's client imports this package
if TYPE_CHECKING:
    from typing import Any

__version__ = "0.1.0"

_LAZY = {"profile": "fingrav.api", "ProfileResult": "fingrav.api", "LimitCycle": "fingrav.api"}


def __getattr__(name: str) -> Any:
    """The API's names, imported on first use (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fingrav' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
