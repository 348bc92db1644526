"""A case's programs at each level: jaxpr, StableHLO, optimized HLO, XLA's cost and memory figures.

:func:`capture` lowers and compiles each :class:`~jaxbench.measure.harness.CompileTarget` of a
prepared case again, from abstract arguments (``jax.ShapeDtypeStruct`` with the arguments'
shardings), so donated or deleted arrays are never touched. The texts are those of
``jax.make_jaxpr``, ``Lowered.as_text()`` and ``Compiled.as_text()`` (JAX docs, "Ahead-of-time
lowering and compilation"); each is cut at :data:`MAX_TEXT_CHARS` characters and marked so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: Longest text kept per level (characters); a longer one is cut and ``truncated`` lists it.
MAX_TEXT_CHARS = 2_000_000
LEVELS = ("jaxpr", "stablehlo", "hlo")
#: ``Compiled.memory_analysis()`` fields kept (bytes), where the JAX version has them.
MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "temp_size_in_bytes",
    "alias_size_in_bytes",
    "generated_code_size_in_bytes",
)


def capture(targets: Sequence[Any]) -> list[dict[str, Any]]:
    """The programs of a case's compile targets, as JSON-ready dicts.

    Args:
        targets: :class:`~jaxbench.measure.harness.CompileTarget` objects (``args`` a tuple or
            a function returning one).

    Returns:
        One dict per target: ``name``; ``jaxpr``, ``stablehlo`` and ``hlo`` (text);
        ``cost`` (XLA's ``cost_analysis()``: ``flops``, ``bytes accessed``, ... as floats);
        ``memory`` (:data:`MEMORY_FIELDS`, bytes); ``truncated`` (the levels that were cut).

    Raises:
        Any error of tracing, lowering or compiling, unchanged.
    """
    import jax

    out = []
    for target in targets:
        args = target.args() if callable(target.args) else target.args
        abstract = jax.tree.map(_abstract, args)
        lowered = target.jitted.lower(*abstract)
        compiled = lowered.compile()
        texts = {
            "jaxpr": str(jax.make_jaxpr(target.jitted)(*abstract)),
            "stablehlo": lowered.as_text(),
            "hlo": compiled.as_text(),
        }
        truncated = [level for level, text in texts.items() if len(text) > MAX_TEXT_CHARS]
        out.append(
            {
                "name": target.name,
                **{level: text[:MAX_TEXT_CHARS] for level, text in texts.items()},
                "cost": _cost(compiled),
                "memory": _memory(compiled),
                "truncated": truncated,
            }
        )
    return out


def _abstract(leaf: Any) -> Any:
    import jax

    if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
        return leaf
    sharding = getattr(leaf, "sharding", None)
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)


def _cost(compiled: Any) -> dict[str, float]:
    """``cost_analysis()`` as floats: a dict in new JAX, a one-element list in old releases."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # some backends do not implement it
        return {}
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else {}
    return {str(k): float(v) for k, v in (cost or {}).items() if isinstance(v, int | float)}


def _memory(compiled: Any) -> dict[str, int]:
    try:
        stats = compiled.memory_analysis()
    except Exception:
        return {}
    return {f: int(getattr(stats, f)) for f in MEMORY_FIELDS if hasattr(stats, f)}
