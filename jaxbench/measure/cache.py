"""Persistent compilation cache settings, so cold-compile figures are never cache hits by accident.

JAX writes a compiled program to the persistent cache only if its compile took at least
``jax_persistent_cache_min_compile_time_secs`` (default 1 s) and it is at least
``jax_persistent_cache_min_entry_size_bytes`` large (JAX docs, "Persistent compilation cache").
"""

from __future__ import annotations

import atexit
import difflib
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

OFF = "off"
FRESH = "fresh"
#: Words that mean "no cache" to a reader but name no existing folder: refused with a hint of
#: ``off``, not made into a cache folder of that name.
OFF_WORDS = frozenset({"no", "none", "false", "0", "disable", "disabled", "null"})
#: The ``fresh`` cache folders this process made, removed at exit (:func:`remove_fresh`).
_FRESH_DIRS: list[str] = []


def remove_fresh() -> None:
    """Remove the ``fresh`` cache folders this process made (at exit, or before ``os._exit``)."""
    while _FRESH_DIRS:
        shutil.rmtree(_FRESH_DIRS.pop(), ignore_errors=True)


def configure_compilation_cache(
    mode: str = OFF,
    min_compile_time_s: float | None = None,
    min_entry_size_bytes: int | None = None,
) -> dict[str, Any]:
    """Set the persistent compilation cache for this process; call before the first compile.

    Args:
        mode: ``"off"`` (no persistent cache: every first compile is cold), ``"fresh"`` (a new
            empty folder for this process, removed at exit) or the path of a cache folder to
            use and fill.
        min_compile_time_s: Override of ``jax_persistent_cache_min_compile_time_secs`` (seconds).
        min_entry_size_bytes: Override of ``jax_persistent_cache_min_entry_size_bytes`` (bytes).

    Returns:
        The settings in force: ``dir`` (``None`` when off), ``min_compile_time_secs`` and
        ``min_entry_size_bytes``; recorded with every result.

    Raises:
        ValueError: ``mode`` is empty, close to ``off`` or ``fresh`` or one of
            :data:`OFF_WORDS` but not an existing folder (a typo), or names a path that is not
            a folder or cannot be created, or whose parent folder does not exist (the message
            names ``--compilation-cache``); a threshold is negative or not finite.
    """
    import jax

    for name, value in (
        ("min_compile_time_s", min_compile_time_s),
        ("min_entry_size_bytes", min_entry_size_bytes),
    ):
        if value is not None and not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    if mode == OFF:
        cache_dir = None
    elif mode == FRESH:
        cache_dir = tempfile.mkdtemp(prefix="jaxbench-xla-cache-")
        if not _FRESH_DIRS:
            atexit.register(remove_fresh)
        _FRESH_DIRS.append(cache_dir)
    elif not mode.strip():
        raise ValueError("--compilation-cache '': expected off, fresh or a folder")
    else:
        path = Path(mode)
        word = mode.strip().lower()
        near = ([OFF] if word in OFF_WORDS else
                difflib.get_close_matches(word, (OFF, FRESH), n=1, cutoff=0.6))  # fmt: skip
        if near and not path.exists():  # "Off", "fresh ", "frsh": a typo, not a new folder
            raise ValueError(f"--compilation-cache {mode!r}: expected off, fresh or a "
                             f"folder; did you mean {near[0]}? (a folder of that name: "
                             f"./{mode})")  # fmt: skip
        if path.exists() and not path.is_dir():
            raise ValueError(f"--compilation-cache {mode!r}: exists and is not a folder")
        if not path.parent.is_dir():  # one new folder at most: a path with a typo is not made
            raise ValueError(f"--compilation-cache {mode!r}: no folder {str(path.parent)!r} to "
                             "make it in")  # fmt: skip
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise ValueError(
                f"--compilation-cache {mode!r}: the folder cannot be created: {exc.strerror or exc}"
            ) from None
        cache_dir = str(path.resolve())
    jax.config.update("jax_compilation_cache_dir", cache_dir)
    if min_compile_time_s is not None:
        jax.config.update("jax_persistent_cache_min_compile_time_secs", min_compile_time_s)
    if min_entry_size_bytes is not None:
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", min_entry_size_bytes)
    _reset_cache_backend()
    return cache_settings()


def _reset_cache_backend() -> None:
    """Make JAX re-read the cache folder if it already opened one (private API, guarded)."""
    try:
        from jax._src import compilation_cache
    except ImportError:
        return
    reset = getattr(compilation_cache, "reset_cache", None)
    if reset is not None:
        reset()


def cache_settings() -> dict[str, Any]:
    """The persistent-cache settings currently in force (folder and thresholds)."""
    import jax

    return {
        "dir": jax.config.jax_compilation_cache_dir,
        "min_compile_time_secs": jax.config.jax_persistent_cache_min_compile_time_secs,
        "min_entry_size_bytes": jax.config.jax_persistent_cache_min_entry_size_bytes,
    }
