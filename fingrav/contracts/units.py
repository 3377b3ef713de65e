"""Unit conversions. Files and frames carry int64 ns, mW and mJ; people read µs, ms, W and %."""

from __future__ import annotations

NS_PER_US = 1_000
NS_PER_MS = 1_000_000
NS_PER_S = 1_000_000_000
MW_PER_W = 1_000.0
MJ_PER_MW_NS = 1e-9  # 1 mW for 1 ns = 1e-12 J = 1e-9 mJ


def w(mw: float | None) -> float | None:
    """mW -> W (None stays None)."""
    return None if mw is None else mw / MW_PER_W


def us(ns: float | None) -> float | None:
    """ns -> µs (None stays None)."""
    return None if ns is None else ns / NS_PER_US


def ms(ns: float | None) -> float | None:
    """ns -> ms (None stays None)."""
    return None if ns is None else ns / NS_PER_MS


def ms_to_ns(value_ms: float | None) -> float | None:
    """ms -> ns (None stays None)."""
    return None if value_ms is None else value_ms * NS_PER_MS


def pct(value: float | None, ref: float | None) -> float | None:
    """(value - ref) / ref x 100; None when either is missing or ref is 0."""
    if value is None or ref is None or ref == 0:
        return None
    return (value - ref) / ref * 100.0
