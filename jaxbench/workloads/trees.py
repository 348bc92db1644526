"""PyTrees as flat ``{name: array}`` maps, the form a drift reference saves, and back.

A leaf's name is its prefix and its key path joined by dots: ``params.0.w`` for layer 0's
weights of an MLP (a list of dicts), ``params.layers.1.qkv`` for a transformer's, ``arg.0`` for
a user workload's first positional argument when it is an array. A correctness gate names a
failing leaf by its key path joined by slashes (:func:`path_text`), ``params/attn/key/bias``.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def _key_text(key: Any) -> str:
    for attr in ("key", "idx", "name"):
        if hasattr(key, attr):
            return str(getattr(key, attr))
    return str(key)


def path_text(path: tuple[Any, ...], separator: str = ".") -> str:
    """A key path's keys as text joined by ``separator``: ``params/attn/key/bias`` with ``/``.

    Dict keys, sequence indices and attribute names alike (``jax.tree_util`` key entries);
    ``""`` for the root (a tree that is one leaf).
    """
    return separator.join(_key_text(k) for k in path)


def leaf_names(tree: Any, prefix: str) -> list[str]:
    """The names of ``tree``'s leaves in JAX's flattening order, e.g. ``params.layers.0.qkv``."""
    paths = jax.tree_util.tree_flatten_with_path(tree)[0]
    return [".".join([prefix, *(_key_text(k) for k in path)]) for path, _ in paths]


def flatten_tree(tree: Any, prefix: str) -> dict[str, np.ndarray]:
    """``{name: host numpy array}`` of every leaf of ``tree`` (names as :func:`leaf_names`).

    Raises:
        ValueError: Two leaves get the same name (keys that differ only in type, ``1`` and
            ``"1"``).
    """
    names = leaf_names(tree, prefix)
    if len(set(names)) != len(names):
        raise ValueError(f"{prefix}: leaf names repeat: {names}")
    leaves = jax.tree.leaves(jax.device_get(tree))
    return {n: np.asarray(a) for n, a in zip(names, leaves, strict=True)}


def unflatten_like(template: Any, flat: dict[str, np.ndarray], prefix: str) -> Any:
    """The PyTree of ``template``'s structure with the leaves of ``flat`` (by name).

    Args:
        template: Any PyTree of the wanted structure (arrays or ``jax.ShapeDtypeStruct`` s).
        flat: ``{name: array}`` holding at least every leaf name of ``template``.
        prefix: The names' prefix.

    Raises:
        ValueError: A leaf of ``template`` has no array in ``flat`` (the message names it).
    """
    names = leaf_names(template, prefix)
    missing = [n for n in names if n not in flat]
    if missing:
        raise ValueError(f"no saved array for {', '.join(missing)}")
    return jax.tree.unflatten(jax.tree.structure(template), [flat[n] for n in names])
