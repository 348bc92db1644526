"""The JAX releases between two versions: those on the index of jax, jaxlib (and the plugin)."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import InvalidVersion, Version


def releases_between(
    good: str,
    bad: str,
    jax: Iterable[str],
    jaxlib: Iterable[str],
    plugin: Iterable[str] | None = None,
) -> list[str]:
    """Every release from ``good`` to ``bad``, both included, oldest first.

    A release is a version the index offers of ``jax`` and of ``jaxlib`` both (they are pinned
    together, ``jax==V jaxlib==V``), and of the CUDA plugin where one is asked for; one without
    its jaxlib (``jax 0.5.2``) or its plugin is left out.

    Args:
        good: The version known to be fast (the baseline).
        bad: The version known to be slow (or to compare up to).
        jax: Versions of ``jax`` on the index.
        jaxlib: Versions of ``jaxlib`` on the index.
        plugin: Versions of the plugin (``jax-cuda13-plugin``, ...) on the index, or ``None``.

    Raises:
        ValueError: ``good`` or ``bad`` is not a version, or has no release of both packages
            on the index (the message names it and the nearest offered), or ``good`` is not
            older than ``bad`` (an empty range).
    """
    both = {str(v) for v in jax} & {str(v) for v in jaxlib}
    if plugin is not None:
        both &= {str(v) for v in plugin}
    what = "jax and jaxlib" if plugin is None else "jax, jaxlib and the plugin"
    offered = sorted(_parse(v) for v in both if _valid(v))
    for option, text in (("GOOD", good), ("BAD", bad)):
        if text not in both:
            near = ", ".join(str(v) for v in offered[-5:][::-1])
            raise ValueError(
                f"{option} {text!r}: no release of {what} {text} on the package index "
                f"(newest: {near})"
            )
    lo, hi = _parse(good), _parse(bad)
    if not lo < hi:
        raise ValueError(f"GOOD {good} is not older than BAD {bad}: the range is empty")
    return [str(v) for v in offered if lo <= v <= hi]


def _valid(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True


def _parse(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise ValueError(f"{text!r} is not a version") from None
