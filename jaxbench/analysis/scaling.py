"""Scaling exponents from records: latency against each swept numeric parameter, per version.

A parameter is *swept* in a family of records (same benchmark, backend, device kind, machine and
every other parameter) when it is a number (not a flag) with at least
:data:`jaxbench.inference.scaling.MIN_POINTS` distinct values there: ``k`` of the forward-mode
strategies, a user workload's ``--param n=...``. Each ``ok`` record gives one point, its median
latency at its value; the fit and its interval are over processes
(:mod:`jaxbench.inference.scaling`).

Live comparisons (:func:`live_exponent_changes`): where the cases of one ``compare
--interleave`` run differ only in one numeric parameter with at least ``MIN_POINTS`` values, each
pair of worker processes timed every value on both sides, so each pair gives a baseline and a
candidate exponent, and the change is judged over the pairs
(:func:`jaxbench.inference.scaling.compare_pair_exponents`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.analysis.frames import laid_out
from jaxbench.inference.scaling import (
    DEFAULT_EXPONENT_THRESHOLD,
    MIN_POINTS,
    compare_exponents,
    compare_pair_exponents,
    fit_exponent,
)
from jaxbench.inference.verdicts import segment_medians
from jaxbench.interleave.verdict import look_level
from jaxbench.store.live import CaseComparison, PairRun

#: Columns that keep families apart besides the parameters.
FAMILY = ("benchmark", "backend", "device_kind", "machine")


def _is_number_type(kind: type) -> bool:
    return issubclass(kind, int | float | np.integer | np.floating) and not issubclass(
        kind, bool | np.bool_
    )


def _is_number(value: object) -> bool:
    return _is_number_type(type(value))


def swept_params(frame: pd.DataFrame) -> list[str]:
    """Names of the numeric parameters with ``MIN_POINTS`` values or more in ``frame``."""
    out = []
    for column in (c for c in frame.columns if c.startswith("param.")):
        values = frame[column].dropna()
        kinds = {type(v) for v in values.tolist()}  # each type once, not each value
        if kinds and all(map(_is_number_type, kinds)) and values.nunique() >= MIN_POINTS:
            out.append(column.removeprefix("param."))
    return out


def swept_points(frame: pd.DataFrame, by: str = "jax") -> pd.DataFrame:
    """One row per ``ok`` record and parameter swept in its family: the value and the latency.

    Args:
        frame: As :func:`exponents_frame`.
        by: As :func:`exponents_frame`; its values go to the ``jax`` column.

    Returns:
        Columns of :data:`FAMILY`, ``params`` (the other parameters, ``k=v`` text),
        ``swept``, ``x`` (the swept value), ``median_s`` (the record's median latency,
        seconds), ``jax`` and ``process``. Empty when nothing is swept. A point that a
        log-log fit cannot take is left out: a record without samples (an asv ``track_*``
        benchmark, a ``time_*`` one without ``--record-samples``), a median of 0, or a swept
        value that is not positive (``offset=0``).
    """
    ok = frame[frame["status"] == "ok"] if len(frame) else frame
    parts = []
    swept_names = swept_params(ok)
    if swept_names:
        ok = ok.assign(_median_s=record_medians(ok["samples_s"]))
    for swept in swept_names:
        column = f"param.{swept}"
        sub = ok[ok[column].notna()]
        x, median = sub[column].astype(float), sub["_median_s"]
        sub = sub[(x > 0) & np.isfinite(x) & (median > 0) & np.isfinite(median)]
        others = [c for c in sub.columns if c.startswith("param.") and c != column]
        labels = _labels(sub, others)
        parts.append(pd.DataFrame({
            **{k: sub[k] for k in FAMILY}, "params": labels, "swept": swept,
            "x": sub[column].astype(float), "median_s": sub["_median_s"],
            "jax": sub[by], "process": sub["process"],
        }))  # fmt: skip
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


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
    points = swept_points(frame, by)
    if points.empty:
        return pd.DataFrame()
    keys = [*FAMILY, "params", "swept", "jax"]
    rows = []
    for key, group in points.groupby(keys, dropna=False, sort=True):
        group = group[group["process"].notna()]  # a row without its process is no process's
        process = group["process"].astype(str).to_numpy()
        order = np.argsort(process, kind="stable")  # by process, each in its rows' order
        names, starts = np.unique(process[order], return_index=True)
        xs = np.split(group["x"].to_numpy(dtype=float)[order], starts[1:])
        ys = np.split(group["median_s"].to_numpy(dtype=float)[order], starts[1:])
        by_process = {
            str(p): (x.tolist(), y.tolist()) for p, x, y in zip(names, xs, ys, strict=True)
        }
        fit = fit_exponent(by_process, alpha)
        if fit is None:
            continue
        rows.append({
            **dict(zip(keys, key, strict=True)), "exponent": fit.exponent,
            "ci_low": fit.ci_low, "ci_high": fit.ci_high, "se": fit.se, "df": fit.df,
            "processes": fit.processes, "points": fit.points, "basis": fit.basis, "fit": fit,
        })  # fmt: skip
    return pd.DataFrame(rows)


def record_medians(samples: pd.Series) -> np.ndarray:
    """Each record's median latency (:func:`~jaxbench.inference.verdicts.median`), all at once.

    Args:
        samples: One list of samples (seconds) a record.

    Returns:
        Shape ``(records,)``, seconds; ``nan`` for a record without samples or with a ``nan``.
    """
    values, record, _ = laid_out(samples.tolist())
    return segment_medians(record, values, len(samples))


def _labels(rows: pd.DataFrame, columns: list[str]) -> pd.Series:
    """Each row's ``k=v`` text of ``columns``, missing values left out.

    The text is made once per distinct combination of values, not once per row.
    """
    names = [c.removeprefix("param.") for c in columns]
    cells = [[None if pd.isna(v) else v for v in rows[c].tolist()] for c in columns]
    combos = list(zip(*cells, strict=True)) if columns else [()] * len(rows)
    made: dict[tuple, str] = {}
    out = []
    for combo in combos:
        if combo not in made:
            made[combo] = " ".join(f"{n}={v}" for n, v in zip(names, combo, strict=True)
                                   if v is not None)  # fmt: skip
        out.append(made[combo])
    return pd.Series(out, index=rows.index, dtype=object)


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


def live_exponent_changes(
    comparisons: Sequence[CaseComparison],
    threshold: float = DEFAULT_EXPONENT_THRESHOLD,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Per swept parameter of one live run: the change of exponent over its process pairs.

    A family is the comparisons of one workload, mode and pair of side labels whose parameters
    are equal but for one numeric parameter (not a flag) with at least
    :data:`~jaxbench.inference.scaling.MIN_POINTS` values among them. **Unit of independence:
    the process pair.** A pair counts when every case of the family has an ``ok`` run with that
    pair index (the same two worker processes timed every value); its baseline process and its
    candidate process each give a slope of the log of the median of all their timed calls on
    the log of the value (each side's own value, after ``--set-a``/``--set-b``), and the change
    is the one-sample t interval of the per-pair differences
    (:func:`~jaxbench.inference.scaling.compare_pair_exponents`). Its level is ``alpha`` split
    at the repeated-CI level of the look the pairs ended at
    (:func:`jaxbench.interleave.verdict.look_level`), as the cases'
    own verdicts are, since the number of pairs was chosen by looking.

    Args:
        comparisons: The comparisons of one live run (each case once), e.g. as
            :func:`jaxbench.interleave.run_pairs` returns them or one
            ``interleave-<id>.jsonl`` holds them.
        threshold: Smallest change of exponent that counts.
        alpha: 1 - the confidence level, before it is split over looks.

    Returns:
        One row per family and swept parameter with at least one counted pair: ``benchmark``,
        ``params`` (the other parameters, ``k=v`` text), ``swept``, ``mode``, ``baseline``,
        ``candidate`` (side labels), ``pairs`` (counted pairs), ``exponent_baseline``,
        ``exponent_candidate`` (means over those pairs' processes), ``difference``,
        ``ci_low``, ``ci_high``, ``verdict``, ``reason``. Empty when nothing is swept.

    Raises:
        ValueError: A case appears twice in a family (comparisons of several runs), or
            ``threshold``/``alpha`` is out of range.
    """
    families: dict[tuple[Any, ...], list[CaseComparison]] = defaultdict(list)
    for c in comparisons:
        for name, value in c.params.items():
            if not _is_number(value):
                continue
            others = tuple(sorted((k, repr(v)) for k, v in c.params.items() if k != name))
            labels = (c.baseline.label if c.baseline else None,
                      c.candidate.label if c.candidate else None)  # fmt: skip
            families[(c.workload, c.mode, labels, name, others)].append(c)
    rows = []
    for (_, mode, (a_label, b_label), swept, _), cases in sorted(
        families.items(), key=lambda item: repr(item[0])
    ):
        values = [c.params[swept] for c in cases]
        if len(set(values)) < MIN_POINTS:
            continue
        if len(set(values)) < len(values):
            raise ValueError(f"{cases[0].label}: a case appears twice with the same {swept}; "
                             "give the comparisons of one live run")  # fmt: skip
        by_case = [{r.index: r for r in c.pair_runs if _usable(r)} for c in cases]
        common = sorted(set.intersection(*(set(runs) for runs in by_case)))
        sides: tuple[dict[str, Any], dict[str, Any]] = ({}, {})
        for index in common:
            for side, out in zip(("baseline", "candidate"), sides, strict=True):
                points = [_point(runs[index], side, swept) for runs in by_case]
                if all(pt is not None for pt in points):
                    out[str(index)] = ([pt[0] for pt in points], [pt[1] for pt in points])
        level = min(look_level(c, max(1, len(common)), alpha) for c in cases)
        change = compare_pair_exponents(*sides, threshold, level)
        if change is None:
            continue
        first = cases[0]
        rows.append({
            "benchmark": first.baseline.benchmark if first.baseline else first.workload,
            "params": " ".join(f"{k}={v}" for k, v in sorted(first.params.items()) if k != swept),
            "swept": swept, "mode": mode, "baseline": a_label, "candidate": b_label,
            "pairs": change.baseline.processes, "exponent_baseline": change.baseline.exponent,
            "exponent_candidate": change.candidate.exponent, "difference": change.difference,
            "ci_low": change.ci_low, "ci_high": change.ci_high, "verdict": change.verdict,
            "reason": change.reason,
        })  # fmt: skip
    return pd.DataFrame(rows)


def _usable(run: PairRun) -> bool:
    return run.status == "ok" and bool(run.rounds) and bool(run.baseline and run.candidate)


def _point(run: PairRun, side: str, swept: str) -> tuple[float, float] | None:
    """``(x, median latency)`` of one side of a pair, ``None`` where ``x`` is not a number."""
    info = getattr(run, side)
    x = info.params.get(swept) if info is not None else None
    samples = [t for r in run.rounds for t in getattr(r, f"{side}_s")]
    if not _is_number(x) or not samples:
        return None
    return float(x), float(np.median(samples))
