"""Order versions as versions: ``0.4.9 < 0.4.10`` and ``0.4.36.dev20241122 < 0.4.36``.

Ordering follows PEP 440 through :class:`packaging.version.Version` (see
https://packaging.python.org/en/latest/specifications/version-specifiers/). Strings that are not
PEP 440 versions (e.g. a git commit) sort after every valid version, in text order, so nothing is
ever dropped. Tables and plots use :func:`version_categorical`, a pandas ordered
:class:`~pandas.Categorical`, so ``sort_values`` and seaborn's ``order`` agree.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
from packaging.version import InvalidVersion, Version


def version_key(version: str) -> tuple[int, Version | str]:
    """Sort key of one version string.

    Returns:
        ``(0, Version)`` for a PEP 440 version, ``(1, text)`` for anything else, so invalid
        strings sort after all valid ones.
    """
    try:
        return (0, Version(str(version)))
    except InvalidVersion:
        return (1, str(version))


def sort_versions(versions: Iterable[object]) -> list[str]:
    """The distinct versions, oldest first; missing values (``None``, NaN) are left out.

    Example:
        ``sort_versions(["0.4.10", "0.4.9", "0.4.36", "0.4.36.dev20241122"])`` gives
        ``["0.4.9", "0.4.10", "0.4.36.dev20241122", "0.4.36"]``.
    """
    distinct = {str(v) for v in versions if v is not None and not pd.isna(v)}
    return sorted(distinct, key=version_key)


def version_categorical(values: Iterable[object]) -> pd.Categorical:
    """``values`` as an ordered categorical whose categories are in version order.

    Missing values stay missing (pandas code ``-1``).
    """
    values = list(values)
    cats = sort_versions(values)
    strings = [None if v is None or pd.isna(v) else str(v) for v in values]
    return pd.Categorical(strings, categories=cats, ordered=True)


def previous_version(versions: Iterable[object], version: str) -> str | None:
    """The version just before ``version`` among ``versions`` (by version order).

    Returns:
        That version, or ``None`` when ``version`` is the oldest.

    Raises:
        ValueError: ``version`` is not among ``versions``.
    """
    ordered = sort_versions(versions)
    if str(version) not in ordered:
        raise ValueError(f"version {version!r} is not among {ordered}")
    i = ordered.index(str(version))
    return ordered[i - 1] if i > 0 else None
