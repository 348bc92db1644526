"""A case's programs at each level: jaxpr, StableHLO, optimized HLO, XLA's figures and flags.

:func:`describe` turns one compiled target into a JSON-ready dict while its ``Lowered`` and
``Compiled`` objects are at hand: :func:`jaxbench.measure.compile_targets` calls it on every
program it compiles, so a record's programs cost no second compile. The jaxpr is traced from
abstract arguments (``jax.ShapeDtypeStruct`` with the arguments' shardings), so donated or
deleted arrays are never touched. The texts are those of ``jax.make_jaxpr``,
``Lowered.as_text()`` and ``Compiled.as_text()`` (JAX docs, "Ahead-of-time lowering and
compilation"); each is cut at :data:`MAX_TEXT_CHARS` characters and marked so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any

from jaxbench.measure.costs import cost_figures, memory_analysis

#: Longest text kept per level (characters); a longer one is cut and ``truncated`` lists it.
MAX_TEXT_CHARS = 2_000_000
LEVELS = ("jaxpr", "stablehlo", "hlo")
#: JAX configuration flags that change what is compiled or how it is cached, as recorded.
JAX_FLAGS = (
    "jax_enable_x64",
    "jax_default_matmul_precision",
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_platforms",
    "jax_disable_jit",
)
#: JAX's debug and checking modes: each slows every call it is on for. :func:`jax_flags`
#: records one only while it is on, so a record of a clean process keeps the condition of
#: records written before these were read.
DEBUG_FLAGS = ("jax_debug_nans", "jax_debug_infs", "jax_enable_checks", "jax_log_compiles")
#: Environment variables that carry XLA's own flags.
XLA_FLAG_VARIABLES = ("XLA_FLAGS", "LIBTPU_INIT_ARGS")
#: A quoted absolute path of a Python file, as HLO metadata (``source_file="..."``) and
#: StableHLO locations (``loc("...":12:3)``) write it.
_SOURCE_PATH = re.compile(r'"(/[^"\n]*\.py)"')
#: Folders after which a path names an installed module.
_INSTALLED = ("/site-packages/", "/dist-packages/")


def source_name(path: str) -> str:
    """A Python file's path without the machine's folders, for a saved program.

    ``.../site-packages/jax/_src/lax.py`` -> ``jax/_src/lax.py``; a file of a ``jaxbench``
    checkout -> ``jaxbench/...`` (from its last folder of that name); any other file (a user's
    model, a test) -> its name alone.
    """
    for marker in _INSTALLED:
        if marker in path:
            return path.rsplit(marker, 1)[1]
    parts = path.split("/")
    if "jaxbench" in parts[:-1]:
        last = len(parts) - 2 - parts[-2::-1].index("jaxbench")
        return "/".join(parts[last:])
    return parts[-1]


def without_machine_paths(text: str) -> str:
    """``text`` with every quoted absolute ``.py`` path replaced by :func:`source_name`."""
    return _SOURCE_PATH.sub(lambda m: f'"{source_name(m.group(1))}"', text)


def jax_flags() -> dict[str, Any]:
    """The values of :data:`JAX_FLAGS`, and the :data:`DEBUG_FLAGS` that are on, in this process.

    Read from ``jax.config`` when called (so a flag a workload's module set counts, not only
    the environment's ``JAX_*`` variables); a flag this JAX lacks is left out.
    """
    import jax

    flags = {}
    for name in (*JAX_FLAGS, *DEBUG_FLAGS):
        try:
            value = getattr(jax.config, name)
        except AttributeError:
            continue
        if name in JAX_FLAGS or value:
            flags[name] = value
    return flags


def debug_modes() -> list[str]:
    """The debug modes on in this process: ``jax_disable_jit`` and the :data:`DEBUG_FLAGS`.

    Returns:
        Their ``jax.config`` names, in that order; empty when none is on.
    """
    flags = jax_flags()
    return [n for n in ("jax_disable_jit", *DEBUG_FLAGS) if flags.get(n)]


def effective_flags() -> dict[str, Any]:
    """The flags a compile ran under: the set :data:`XLA_FLAG_VARIABLES` and :func:`jax_flags`."""
    return {v: os.environ[v] for v in XLA_FLAG_VARIABLES if v in os.environ} | jax_flags()


def describe(
    name: str,
    jitted: Any,
    args: Sequence[Any],
    lowered: Any,
    compiled: Any,
) -> dict[str, Any]:
    """One compiled program as a JSON-ready dict.

    Args:
        name: The target's name (e.g. ``train_step``).
        jitted: The ``jax.jit`` callable (traced again, abstractly, for its jaxpr).
        args: Its positional arguments (arrays or ``jax.ShapeDtypeStruct``).
        lowered: ``jitted.lower(*args)``.
        compiled: ``lowered.compile()``.

    Returns:
        ``name``; ``jaxpr``, ``stablehlo`` and ``hlo`` (text); ``cost`` (XLA's
        ``cost_analysis()``: ``flops``, ``bytes accessed``, ... as floats); ``memory``
        (``memory_analysis()`` fields, bytes); ``flags``
        (:func:`effective_flags`); ``truncated`` (the levels that were cut). Nothing timed
        is in it, and the source files its metadata names are written without the machine's
        folders (:func:`without_machine_paths`), so one program compiled in two processes,
        or two checkouts, gives equal dicts (one artifact).
    """
    import jax

    abstract = jax.tree.map(_abstract, tuple(args))
    try:
        jaxpr = str(jax.make_jaxpr(jitted)(*abstract))
    except Exception as exc:  # a program that compiled is still described without its jaxpr
        jaxpr = f"(not traced: {type(exc).__name__}: {exc})"
    texts = {
        "jaxpr": jaxpr,
        "stablehlo": without_machine_paths(lowered.as_text()),
        "hlo": without_machine_paths(compiled.as_text()),
    }
    return {
        "name": name,
        **{level: text[:MAX_TEXT_CHARS] for level, text in texts.items()},
        "cost": cost_figures(compiled),
        "memory": memory_analysis(compiled),
        "flags": effective_flags(),
        "truncated": [level for level, text in texts.items() if len(text) > MAX_TEXT_CHARS],
    }


def _abstract(leaf: Any) -> Any:
    import jax

    if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
        return leaf
    sharding = getattr(leaf, "sharding", None)
    return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype, sharding=sharding)
