"""The paper's published numbers that fingrav shows next to its own (METHOD.md)."""

from __future__ import annotations

from typing import Final

# SSE-vs-SSP error of the compute-bound GEMMs on the MI300X, % (FinGraV, ISPASS 2025)
SSE_VS_SSP_PCT: Final[dict[str, float]] = {"cb-2k": 80.0, "cb-4k": 36.0, "cb-8k": 20.0}
