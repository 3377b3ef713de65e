"""No untyped record crosses a stage boundary: every field of every model in `fingrav.contracts` (the files one stage
writes and another reads) has a type without `Any`, except the few genuinely free-form records allowed below."""

from __future__ import annotations

import importlib
import pkgutil
import types
import typing
from typing import Any

from pydantic import BaseModel

import fingrav.contracts

# (model, field): why its content is free-form. Nothing in fingrav decides anything from these; they are kept
# verbatim so an artifact records exactly what was configured or reported.
ALLOWED: dict[tuple[str, str], str] = {
    ("Provenance", "scenario"): "the scenario exactly as configured: a fingrav.config.Scenario dump, which readers "
    "validate through that model (the contracts package cannot import fingrav.config)",
    ("Provenance", "calibration"): "the calibrate stage's settings as configured (a CalibrationConfig dump)",
    ("Provenance", "kernels"): "what each prepared kernel reported about itself (GPUDevice.prepare().describe()): "
    "backend- and kernel-kind-specific facts (SDPA backend, stamp kernel, ...)",
    ("DeviceInfo", "parameters"): "the simulator's effective model parameters in its preset's own nested "
    "structure, shown verbatim in the report",
}


def _models() -> list[type[BaseModel]]:
    out = []
    for info in pkgutil.iter_modules(fingrav.contracts.__path__):
        mod = importlib.import_module(f"fingrav.contracts.{info.name}")
        for obj in vars(mod).values():
            if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__ == mod.__name__:
                out.append(obj)
    return out


def _untyped(tp: Any) -> bool:
    """Whether a type annotation contains `Any` or a bare dict / list."""
    if tp is Any or tp in (dict, list):
        return True
    args = typing.get_args(tp)
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is not None:
        return any(_untyped(a) for a in args)
    return False


def test_no_model_field_in_the_contracts_is_an_untyped_dict() -> None:
    models = _models()
    assert len(models) > 30  # the scan sees the contracts
    found = {(m.__name__, name) for m in models for name, field in m.model_fields.items() if _untyped(field.annotation)}
    assert found - ALLOWED.keys() == set(), "untyped fields crossing a stage boundary"
    assert ALLOWED.keys() <= found, "an allowed field is typed now: drop it from ALLOWED"


def test_the_scan_finds_an_untyped_field() -> None:
    assert _untyped(dict[str, Any]) and _untyped(dict[str, Any] | None) and _untyped(list[Any])
    assert not _untyped(dict[str, int | float]) and not _untyped(list[float | None])
