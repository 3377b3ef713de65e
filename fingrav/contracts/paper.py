"""The paper's published numbers that fingrav shows next to its own (METHOD.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

# SSE-vs-SSP error of the compute-bound GEMMs on the MI300X, % (FinGraV, ISPASS 2025)
SSE_VS_SSP_PCT: Final[dict[str, float]] = {"cb-2k": 80.0, "cb-4k": 36.0, "cb-8k": 20.0}


def norm_name(name: str) -> str:
    """A scenario name for loose matching with the paper's names: lower case, letters and digits only."""
    return "".join(ch for ch in name.lower() if ch.isalnum())


def paper_sse_vs_ssp_pct(scenario: str, paper: Mapping[str, Any] | None = SSE_VS_SSP_PCT) -> float | None:
    """The paper's SSE-vs-SSP error (%, signed: the paper's SSE under-reads the SSP) of the scenario of that name
    (matched by `norm_name`), or None. paper: name -> % (its magnitude), or name -> {"pct": %}."""
    for key, val in (paper or {}).items():
        v = val.get("pct") if isinstance(val, Mapping) else val
        if norm_name(str(key)) == norm_name(scenario) and isinstance(v, int | float) and not isinstance(v, bool):
            return -abs(float(v))
    return None
