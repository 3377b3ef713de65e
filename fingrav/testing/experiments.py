"""Load a script of experiments/ as a module for its tests (the scripts are not a package: each runs on its own,
also on the GPU machine, and imports its siblings from its own folder)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS = ROOT / "experiments"


def load_experiment(name: str) -> ModuleType:
    """experiments/<name>.py as the module `name` (registered in sys.modules, its folder on sys.path)."""
    if str(EXPERIMENTS) not in sys.path:
        sys.path.insert(0, str(EXPERIMENTS))
    spec = importlib.util.spec_from_file_location(name, EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
