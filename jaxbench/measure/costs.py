"""Work and memory of a compiled program: XLA's own analyses (MFU is derived in analysis)."""

from __future__ import annotations

from typing import Any

MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "generated_code_size_in_bytes",
)


def cost_figures(compiled: Any) -> dict[str, float]:
    """Every numeric figure of ``compiled.cost_analysis()`` (``flops``, ``bytes accessed``, ...).

    Older JAX returns a list with one dict per program; its first entry is used. Empty where
    the backend has no cost analysis.
    """
    try:
        cost = compiled.cost_analysis()
    except Exception:  # some backends raise instead of returning nothing
        return {}
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else None
    return {str(k): float(v) for k, v in (cost or {}).items() if isinstance(v, int | float)}


def cost_analysis(compiled: Any) -> tuple[float | None, float | None]:
    """FLOP and bytes accessed per call of ``compiled`` (a ``jax.stages.Compiled``).

    Returns:
        ``(flops, bytes_accessed)`` from :func:`cost_figures`; ``None`` for a figure the
        backend does not report (or reports as negative).
    """
    cost = cost_figures(compiled)
    flops, accessed = cost.get("flops"), cost.get("bytes accessed")
    return (
        flops if flops is not None and flops >= 0 else None,
        accessed if accessed is not None and accessed >= 0 else None,
    )


def memory_analysis(compiled: Any) -> dict[str, int]:
    """Sizes in bytes from ``compiled.memory_analysis()`` (arguments, outputs, temporaries, code).

    Returns an empty dict where the backend has no memory analysis.
    """
    try:
        stats = compiled.memory_analysis()
    except Exception:  # not implemented on every backend
        return {}
    if stats is None:
        return {}
    return {f: int(getattr(stats, f)) for f in MEMORY_FIELDS if hasattr(stats, f)}
