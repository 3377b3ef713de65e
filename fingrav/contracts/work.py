"""The work of one kernel execution: floating-point operations and bytes moved, where they are known.

Defined by the kernel models (`fingrav.config`, each kernel's `work()`: from the shape for GEMM, GEMV and attention,
declared by the user for a callable; None for collectives) and read by the analysis, which turns them into the
throughput and efficiency columns (`fingrav.contracts.profile.Throughput`). GPU-side: pydantic only.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Work(BaseModel):
    """Per execution: `flop` floating-point operations and `bytes` read + written in memory (None: not known).

    source: "model" (computed from the kernel's shape) or "declared" (a callable's config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    flop: float | None = Field(None, ge=0)
    bytes: float | None = Field(None, ge=0)
    source: Literal["model", "declared"] = "model"
