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


def cost_analysis(compiled: Any) -> tuple[float | None, float | None]:
    """FLOP and bytes accessed per call of ``compiled`` (a ``jax.stages.Compiled``).

    Returns:
        ``(flops, bytes_accessed)`` from ``compiled.cost_analysis()``; ``None`` for a figure the
        backend does not report. Older JAX returns a list with one dict per program; its first
        entry is used.
    """
    try:
        cost = compiled.cost_analysis()
    except Exception:  # some backends raise instead of returning nothing
        return None, None
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else None
    if not cost:
        return None, None
    flops = cost.get("flops")
    accessed = cost.get("bytes accessed")
    return (
        float(flops) if flops is not None and flops >= 0 else None,
        float(accessed) if accessed is not None and accessed >= 0 else None,
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
