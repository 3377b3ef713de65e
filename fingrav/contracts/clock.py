"""The GPU-to-host clock mapping, defined once (docs/ARCHITECTURE.md "Clocks and units").

host_ns = gpu_ns + offset_ns + drift * (gpu_ns - gpu_ref_ns), drift a fraction (1e-6 = 1 ppm). Fitted by
`fingrav.clocksync.fit_clock`; used by the analysis (LOIs) and the report (timelines) alike.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict

if TYPE_CHECKING:  # polars only where an expression is built
    import polars as pl


class ClockMap(BaseModel):
    """GPU clock -> host clock. offset_ns: host - gpu at gpu_ref_ns; drift: fraction; residual_ns: rms of the
    fit's kept pairs (NaN when unknown)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    offset_ns: float
    gpu_ref_ns: int
    drift: float = 0.0
    residual_ns: float = math.nan

    @classmethod
    def from_record(cls, rec: Any) -> ClockMap:
        """From a clock-fit record (calibration/gpu<k>.json or summary.json "clock", a `ClockFit`): `drift` (fraction)
        or `drift_ppm`; a missing residual is NaN."""
        get = rec.get if isinstance(rec, dict) else (lambda k, d=None: getattr(rec, k, d))
        drift = get("drift")
        if drift is None:
            ppm = get("drift_ppm")
            drift = float(ppm) * 1e-6 if ppm is not None else 0.0
        residual = get("residual_ns")
        offset = get("offset_ns")
        if offset is None or get("gpu_ref_ns") is None:
            from fingrav.errors import DataError

            raise DataError(f"clock fit lacks offset_ns / gpu_ref_ns: {rec!r}")
        return cls(
            offset_ns=offset if isinstance(offset, int) else float(offset),
            gpu_ref_ns=int(round(get("gpu_ref_ns"))),
            drift=float(drift),
            residual_ns=float(residual) if residual is not None else math.nan,
        )

    @property
    def drift_ppm(self) -> float:
        return self.drift * 1e6

    def to_host_ns(self, gpu_ns: np.ndarray) -> np.ndarray:
        """int64 GPU stamps -> int64 host ns (the same rounding as `host_expr`)."""
        g = np.asarray(gpu_ns, dtype=np.int64)
        off_int = int(round(self.offset_ns))
        off_frac = float(self.offset_ns) - off_int
        corr = np.round((g - self.gpu_ref_ns).astype(np.float64) * self.drift + off_frac).astype(np.int64)
        return g + off_int + corr

    def host_expr(self, gpu_col: str) -> pl.Expr:
        """Polars expression mapping an int64 GPU-clock column to int64 host-clock ns (rounded).

        The integer part of the offset is added exactly, so 64-bit epoch times keep ns precision."""
        import polars as pl

        off_int = int(round(self.offset_ns))
        off_frac = float(self.offset_ns) - off_int
        g = pl.col(gpu_col)
        corr = ((g - self.gpu_ref_ns).cast(pl.Float64) * self.drift + off_frac).round(0).cast(pl.Int64)
        return g + off_int + corr

    def to_summary(self) -> dict[str, float | int | None]:
        """summary.json "clock": offset_ns, gpu_ref_ns, drift_ppm, residual_ns (None when unknown)."""
        return {
            "offset_ns": self.offset_ns,
            "gpu_ref_ns": self.gpu_ref_ns,
            "drift_ppm": self.drift_ppm,
            "residual_ns": None if math.isnan(self.residual_ns) else self.residual_ns,
        }
