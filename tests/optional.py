"""Optional test dependencies: skipped where the README's install leaves them out, required in CI.

`pip install -e '.[test]'` (the README's install) brings no torch (754 MB); `.ci/run` installs `.[test,torch]`
and sets CI, so a test that needs torch runs there and fails, rather than skips, if torch is missing."""

from __future__ import annotations

import os
from types import ModuleType

import pytest


def import_or_skip(module: str, install: str) -> ModuleType:
    """`module`, imported; without it: skip with how to install it, or fail in CI (CI set), where it must run."""
    try:
        return pytest.importorskip(module)
    except pytest.skip.Exception:
        if os.environ.get("CI"):
            pytest.fail(f"{module} is missing but CI must run this test: {install}")
        raise pytest.skip.Exception(f"needs {module}: {install}", allow_module_level=True) from None
