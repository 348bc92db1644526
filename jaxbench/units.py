"""Numbers as text for tables and figures: seconds, bytes, FLOP/s (``n/a`` for unknown)."""

from __future__ import annotations


def fmt_seconds(value: float | None) -> str:
    """``1.23 ms`` style; ``n/a`` for ``None``."""
    if value is None:
        return "n/a"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value / 1e-9:.3g} ns"


def fmt_bytes(value: int | None) -> str:
    """MiB with one decimal; ``n/a`` for ``None`` (never 0 for "unknown")."""
    return "n/a" if value is None else f"{value / 2**20:.1f} MiB"


def fmt_rate(value: float | None) -> str:
    """GFLOP/s; ``n/a`` for ``None``."""
    return "n/a" if value is None else f"{value / 1e9:.3g} GFLOP/s"
