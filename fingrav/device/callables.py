"""User kernels (`kind: callable`): find, import and call the factory a `target` names, each failure one message.

GPU-side module (standard library only). A target is "package.module:factory" (imported from sys.path; the working
directory is put first, as `python -m` does) or "path/to/file.py:factory" (a file, relative to the working
directory). `factory(**args)` builds its inputs on the current GPU and returns a function of no arguments that
launches the work once on the current stream (`fingrav.config.CallableKernel`).

Errors name the target and say what went wrong in one line (ConfigError: the target does not name a factory;
DeviceError: the factory or the function it returned raised), with the innermost frame of the user's code, so that
a stage log shows one message rather than a traceback.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fingrav.errors import ConfigError, DeviceError

logger = logging.getLogger(__name__)


def split_target(target: str) -> tuple[str, str]:
    """("package.module" or "path/to/file.py", "factory") of a target; ConfigError when there is no ':'."""
    module, sep, attr = str(target).rpartition(":")
    if not sep or not module or not attr:
        raise ConfigError(f"callable target {target!r}: expected 'package.module:factory' or 'file.py:factory'")
    return module, attr


def _is_file(module: str) -> bool:
    return module.endswith(".py")


def _where(exc: BaseException) -> str:
    """' (at file:line in function)' of the innermost frame of an exception, or ''."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {f.filename}:{f.lineno} in {f.name})"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _find_module(module: str) -> Any:
    """The spec of a dotted module name, found without importing any of it: the top-level name through the import
    system's finders (which never execute a module), each submodule by the path finder in its parent's search
    locations (importlib.util.find_spec would import the parent packages: their __init__ would run). None when a
    part is missing or a parent is no package."""
    from importlib.machinery import PathFinder

    parts = module.split(".")
    spec = importlib.util.find_spec(parts[0])
    for i in range(1, len(parts)):
        locations = spec.submodule_search_locations if spec is not None else None
        if not locations:
            return None
        spec = PathFinder.find_spec(".".join(parts[: i + 1]), list(locations))
    return spec


def find_problem(target: str, cwd: Path | str | None = None) -> str | None:
    """Why `target` cannot be imported, found without running any of its code (the module or the file is looked
    up, not executed: each package's and the module's spec, `_find_module`; a file's existence); None when it looks
    importable."""
    try:
        module, _attr = split_target(target)
    except ConfigError as err:
        return str(err)
    base = Path(cwd) if cwd is not None else Path.cwd()
    if _is_file(module):
        path = Path(module) if Path(module).is_absolute() else base / module
        return None if path.is_file() else f"callable target {target!r}: no such file {path}"
    added = str(base) not in sys.path
    if added:
        sys.path.insert(0, str(base))
    try:
        spec = _find_module(module)
    except Exception as exc:  # a malformed name, an unreadable folder
        return f"callable target {target!r}: cannot look up module {module!r} ({_one_line(exc)})"
    finally:
        if added:
            sys.path.remove(str(base))
    if spec is None:
        return f"callable target {target!r}: no module named {module!r} (on sys.path or in {base})"
    return None


def load_factory(target: str) -> Callable[..., Any]:
    """Import the module (or file) of `target` and return its factory; ConfigError naming the target otherwise."""
    module, attr = split_target(target)
    try:
        if _is_file(module):
            path = Path(module).resolve()
            if not path.is_file():
                raise ConfigError(f"callable target {target!r}: no such file {path}")
            name = f"fingrav_user_{path.stem}_{abs(hash(str(path))):x}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is None or spec.loader is None:
                raise ConfigError(f"callable target {target!r}: {path} cannot be loaded as a Python module")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod
            spec.loader.exec_module(mod)
        else:
            cwd = os.getcwd()
            if cwd not in sys.path:
                sys.path.insert(0, cwd)
            mod = importlib.import_module(module)
    except ConfigError:
        raise
    except Exception as exc:  # ImportError, SyntaxError, anything the module raises at import
        raise ConfigError(
            f"callable target {target!r}: importing {module!r} failed: {_one_line(exc)}{_where(exc)}"
        ) from None
    factory = getattr(mod, attr, None)
    if factory is None:
        raise ConfigError(f"callable target {target!r}: module {module!r} has no attribute {attr!r}")
    if not callable(factory):
        raise ConfigError(f"callable target {target!r}: {attr!r} is of type {type(factory).__name__}, not a function")
    return factory


def build_launcher(target: str, args: Mapping[str, Any]) -> Callable[[], Any]:
    """`factory(**args)` of `target`: the launch function it returns. ConfigError when the target names no
    factory; DeviceError (naming the target, the exception and where it was raised) when the factory raises or
    returns something that is not callable."""
    factory = load_factory(target)
    try:
        fn = factory(**dict(args))
    except Exception as exc:
        raise DeviceError(f"callable target {target!r}: the factory raised {_one_line(exc)}{_where(exc)}") from None
    if not callable(fn):
        raise DeviceError(
            f"callable target {target!r}: the factory returned an object of type {type(fn).__name__}, "
            "not a function launching the work"
        )
    return fn


def call_launcher(target: str, fn: Callable[[], Any]) -> None:
    """Run the launch function once; DeviceError naming the target when it raises."""
    try:
        fn()
    except Exception as exc:
        raise DeviceError(
            f"callable target {target!r}: its launch function raised {_one_line(exc)}{_where(exc)}"
        ) from None
