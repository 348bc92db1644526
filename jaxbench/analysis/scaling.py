"""Scaling exponents from records: latency against each swept numeric parameter, per version.

A parameter is *swept* in a family of records (same benchmark, backend, device kind, machine and
every other parameter) when it is a number (not a flag) with at least
:data:`jaxbench.inference.scaling.MIN_POINTS` distinct values there: ``k`` of the forward-mode
strategies, a user workload's ``--param n=...``. Each ``ok`` record gives one point, its median
latency at its value; the fit and its interval are over processes
(:mod:`jaxbench.inference.scaling`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from jaxbench.inference.scaling import (
    DEFAULT_EXPONENT_THRESHOLD,
    MIN_POINTS,
    compare_exponents,
    fit_exponent,
)

#: Columns that keep families apart besides the parameters.
FAMILY = ("benchmark", "backend", "device_kind", "machine")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )


def swept_params(frame: pd.DataFrame) -> list[str]:
    """Names of the numeric parameters with ``MIN_POINTS`` values or more in ``frame``."""
    out = []
    for column in (c for c in frame.columns if c.startswith("param.")):
        values = frame[column].dropna()
        if len(values) and values.map(_is_number).all() and values.nunique() >= MIN_POINTS:
            out.append(column.removeprefix("param."))
    return out


def exponents_frame(frame: pd.DataFrame, alpha: float = 0.05, by: str = "jax") -> pd.DataFrame:
    """One row per family, swept parameter and JAX version (or ``by`` value): the exponent.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` (``samples_s``, ``process``,
            ``by``, ``param.*``); rows that are not ``ok`` are left out.
        alpha: 1 - the confidence level of the intervals.
        by: The column whose values are compared (``jax``; ``compare``'s ``side``). Its
            values go to the ``jax`` column of the result.

    Returns:
        Columns ``benchmark``, ``backend``, ``device_kind``, ``machine``, ``params`` (the other
        parameters, ``k=v`` text), ``swept``, ``jax``, ``exponent``, ``ci_low``, ``ci_high``,
        ``se``, ``df``, ``processes``, ``points``, ``basis``, and ``fit`` (the
        :class:`~jaxbench.inference.scaling.Exponent`). Empty when nothing is swept.
    """
    ok = frame[frame["status"] == "ok"] if len(frame) else frame
    rows = []
    for swept in swept_params(ok):
        column = f"param.{swept}"
        sub = ok[ok[column].notna()]
        others = [c for c in sub.columns if c.startswith("param.") and c != column]
        labels = sub[others].apply(_label, axis=1) if others else pd.Series("", index=sub.index)
        sub = sub.assign(_params=labels, _median=sub["samples_s"].map(np.median))
        keys = [*FAMILY, "_params", by]
        for key, group in sub.groupby(keys, dropna=False, sort=True):
            by_process = {
                str(p): (g[column].astype(float).tolist(), g["_median"].tolist())
                for p, g in group.groupby("process", sort=True)
            }
            fit = fit_exponent(by_process, alpha)
            if fit is None:
                continue
            family = dict(zip(keys, key, strict=True))
            rows.append({
                **{k: family[k] for k in FAMILY}, "params": family["_params"], "swept": swept,
                "jax": family[by], "exponent": fit.exponent, "ci_low": fit.ci_low,
                "ci_high": fit.ci_high, "se": fit.se, "df": fit.df, "processes": fit.processes,
                "points": fit.points, "basis": fit.basis, "fit": fit,
            })  # fmt: skip
    return pd.DataFrame(rows)


def _label(row: pd.Series) -> str:
    return " ".join(f"{c.removeprefix('param.')}={v}" for c, v in row.items() if pd.notna(v))


def exponent_changes(
    exponents: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    threshold: float = DEFAULT_EXPONENT_THRESHOLD,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per family and pair of versions: the change of exponent and its verdict.

    Args:
        exponents: From :func:`exponents_frame`.
        pairs: ``(baseline, candidate)`` JAX versions.
        threshold: Smallest change of exponent that counts.
        alpha: 1 - the confidence level.

    Returns:
        Columns of the family, ``baseline``, ``candidate``, ``exponent_baseline``,
        ``exponent_candidate``, ``difference``, ``ci_low``, ``ci_high``, ``verdict``,
        ``reason`` (:func:`~jaxbench.inference.scaling.compare_exponents`).
    """
    if exponents.empty:
        return pd.DataFrame()
    keys = [*FAMILY, "params", "swept"]
    rows = []
    for key, group in exponents.groupby(keys, dropna=False, sort=True):
        fits = dict(zip(group["jax"], group["fit"], strict=True))
        for a, b in pairs:
            if a not in fits or b not in fits:
                continue
            change = compare_exponents(fits[a], fits[b], threshold, alpha)
            rows.append({
                **dict(zip(keys, key, strict=True)), "baseline": a, "candidate": b,
                "exponent_baseline": fits[a].exponent, "exponent_candidate": fits[b].exponent,
                "difference": change.difference, "ci_low": change.ci_low,
                "ci_high": change.ci_high, "verdict": change.verdict, "reason": change.reason,
            })  # fmt: skip
    return pd.DataFrame(rows)
