"""Scaling exponents: how latency grows with a swept parameter, with intervals over processes.

Model: ``log t = a + b log x`` for one family of cases at one JAX version, where ``x`` is the
swept parameter (K tangents, a loop's trip count, a size factor) and ``t`` a record's median
latency at ``x``. The exponent ``b`` is 1 for linear growth and 2 for quadratic; a change of it
between versions is a finding even where each single ``x`` looks alike.

**Unit of independence: the process.** Every process that timed at least :data:`MIN_POINTS`
distinct ``x`` gives one slope (least squares of its log medians on ``log x``). A process-wide
speed factor (the between-process noise of :mod:`jaxbench.inference.verdicts`) moves only that
process's intercept, never its slope. The exponent is the mean of the processes' slopes, its
interval Student's t over them (``df = processes - 1``): the two-stage estimate of a model with
the process as a random effect on intercept and slope (the same argument as for latencies,
Kalibera and Jones, ISMM 2013). With a single process, the interval is the least-squares one of
its points (:func:`scipy.stats.linregress`, ``df = points - 2``), which takes the points'
errors as independent within the process; its ``basis`` says so, and a comparison built on it
is never more than ``inconclusive``.

Comparison (:func:`compare_exponents`): the difference of two exponents with Welch's interval
(Welch-Satterthwaite degrees of freedom), and the verdict rule of
:func:`jaxbench.inference.verdicts.decide` on the additive scale: ``changed`` when the interval
excludes 0 and the estimate is at least ``threshold`` away from it, ``same`` when it lies wholly
within ``± threshold``, ``inconclusive``
otherwise.

Live pairs (:func:`compare_pair_exponents`): where both sides ran every ``x`` in each of several
pairs of worker processes (``compare --interleave``), the two processes of one pair give one
slope each, and the change is judged on the per-pair differences ``d = b_candidate -
b_baseline``. **Unit of independence: the process pair.** The interval is the one-sample Student
t interval of the mean of ``d`` over pairs (``df = pairs - 1``), the paired-difference form of
the two-stage estimate above (Kalibera and Jones, ISMM 2013, the pair taking the process's
place); the verdict rule is the same as for recorded exponents.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy import stats as sps

#: Fewest distinct values of the swept parameter a process needs for a slope.
MIN_POINTS = 3
#: Smallest change of exponent that counts (0.1: linear becoming ``x**1.1``).
DEFAULT_EXPONENT_THRESHOLD = 0.1

Basis = Literal["processes", "points of one process"]
ExponentVerdict = Literal["changed", "same", "inconclusive"]


@dataclass(frozen=True)
class Exponent:
    """A fitted scaling exponent.

    Attributes:
        exponent: ``b`` of ``t ∝ x**b`` (dimensionless).
        se: Its standard error (``nan`` when there is none).
        df: Degrees of freedom of the interval.
        ci_low: Lower end of the ``1 - alpha`` interval.
        ci_high: Upper end.
        processes: Processes that gave a slope.
        points: Distinct ``x`` values, over all those processes.
        basis: ``processes`` (the interval is over processes) or ``points of one process``.
        alpha: 1 - the confidence level.
    """

    exponent: float
    se: float
    df: float
    ci_low: float
    ci_high: float
    processes: int
    points: int
    basis: Basis
    alpha: float


def _slope(x: np.ndarray, log_t: np.ndarray) -> float:
    return float(np.polyfit(np.log(x), log_t, 1)[0])


def fit_exponent(
    by_process: Mapping[str, tuple[Sequence[float], Sequence[float]]], alpha: float = 0.05
) -> Exponent | None:
    """The exponent of latency against ``x``, over processes.

    Args:
        by_process: Process id -> ``(x values, median latencies in seconds)``, one pair per
            record; ``x`` and latencies must be positive. Processes with fewer than
            :data:`MIN_POINTS` distinct ``x`` are left out.
        alpha: 1 - the confidence level of the interval.

    Returns:
        The :class:`Exponent`, or ``None`` when no process has :data:`MIN_POINTS` distinct
        ``x``.

    Raises:
        ValueError: An ``x`` or a latency is not positive and finite.
    """
    slopes: list[float] = []
    fits: list[tuple[np.ndarray, np.ndarray]] = []
    xs: set[float] = set()
    basis: Basis
    for process, (x, t) in by_process.items():
        x_arr, t_arr = np.asarray(x, dtype=float), np.asarray(t, dtype=float)
        if x_arr.shape != t_arr.shape:
            raise ValueError(f"process {process}: {x_arr.size} x values, {t_arr.size} latencies")
        both = np.concatenate([x_arr, t_arr])
        if not (np.isfinite(both).all() and (both > 0).all()):
            raise ValueError(f"process {process}: x and latencies must be positive and finite")
        if np.unique(x_arr).size < MIN_POINTS:
            continue
        slopes.append(_slope(x_arr, np.log(t_arr)))
        fits.append((x_arr, t_arr))
        xs.update(x_arr.tolist())
    if not slopes:
        return None
    if len(slopes) == 1:
        x_arr, t_arr = fits[0]
        fit = sps.linregress(np.log(x_arr), np.log(t_arr))
        se, df, basis = float(fit.stderr), float(x_arr.size - 2), "points of one process"
        b = float(fit.slope)
    else:
        values = np.asarray(slopes)
        b = float(values.mean())
        se = float(values.std(ddof=1) / math.sqrt(values.size))
        df, basis = values.size - 1.0, "processes"
    half = float(sps.t.ppf(1 - alpha / 2, df)) * se if df > 0 and math.isfinite(se) else math.inf
    return Exponent(b, se, df, b - half, b + half, len(slopes), len(xs), basis, alpha)


@dataclass(frozen=True)
class ExponentChange:
    """Candidate exponent minus baseline exponent, with an interval and a verdict.

    Attributes:
        baseline: The baseline's :class:`Exponent`.
        candidate: The candidate's.
        difference: ``candidate.exponent - baseline.exponent``.
        ci_low: Lower end of the ``1 - alpha`` interval of the difference: Welch's for
            recorded exponents (:func:`compare_exponents`), the one-sample t over pairs for
            live ones (:func:`compare_pair_exponents`).
        ci_high: Upper end.
        threshold: Smallest change of exponent that counts.
        verdict: ``changed``, ``same`` or ``inconclusive``.
        reason: Why it is ``inconclusive`` when the interval alone does not say (a side has a
            single process, or there is a single pair); empty otherwise.
    """

    baseline: Exponent
    candidate: Exponent
    difference: float
    ci_low: float
    ci_high: float
    threshold: float
    verdict: ExponentVerdict
    reason: str = ""


def _check(threshold: float, alpha: float) -> None:
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0, got {threshold!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def exponent_verdict(ci_low: float, ci_high: float, threshold: float) -> ExponentVerdict:
    """The verdict on a change of exponent from its interval (the rule of the module docstring).

    Args:
        ci_low: Lower end of the interval of candidate minus baseline exponent.
        ci_high: Upper end.
        threshold: Smallest change of exponent that counts.

    Returns:
        ``changed`` when the interval excludes 0 and its midpoint (the estimate) is at least
        ``threshold`` from 0, ``same`` when it lies wholly within ``± threshold``,
        ``inconclusive`` otherwise (an infinite or ``nan`` end included).
    """
    if not (math.isfinite(ci_low) and math.isfinite(ci_high)):
        return "inconclusive"
    mid = (ci_low + ci_high) / 2
    if (ci_low > 0 and mid >= threshold) or (ci_high < 0 and mid <= -threshold):
        return "changed"
    if -threshold < ci_low and ci_high < threshold:
        return "same"
    return "inconclusive"


def compare_exponents(
    baseline: Exponent,
    candidate: Exponent,
    threshold: float = DEFAULT_EXPONENT_THRESHOLD,
    alpha: float = 0.05,
) -> ExponentChange:
    """The change of exponent from ``baseline`` to ``candidate``.

    Raises:
        ValueError: ``threshold`` is not positive, or ``alpha`` not in (0, 1).
    """
    _check(threshold, alpha)
    diff = candidate.exponent - baseline.exponent
    va, vb = baseline.se**2, candidate.se**2
    se = math.sqrt(va + vb)
    finite = math.isfinite(se) and baseline.df > 0 and candidate.df > 0
    if finite and se > 0:
        df = (va + vb) ** 2 / (va**2 / baseline.df + vb**2 / candidate.df)
        half = float(sps.t.ppf(1 - alpha / 2, df)) * se
    else:
        half = 0.0 if finite else math.inf
    lo, hi = diff - half, diff + half
    verdict = exponent_verdict(lo, hi, threshold)
    reason = ""
    if "points of one process" in (baseline.basis, candidate.basis):
        reason = "a side has one process: time each version in at least 2 processes"
        verdict = "inconclusive"
    return ExponentChange(baseline, candidate, diff, lo, hi, threshold, verdict, reason)


def compare_pair_exponents(
    baseline: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    candidate: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    threshold: float = DEFAULT_EXPONENT_THRESHOLD,
    alpha: float = 0.05,
) -> ExponentChange | None:
    """The change of exponent over live process pairs: a one-sample t interval of paired slopes.

    **Unit of independence: the process pair.** Pair ``i``'s baseline process and its candidate
    process each give a slope (least squares of log median latency on ``log x``, as in
    :func:`fit_exponent`); ``d_i = b_candidate,i - b_baseline,i``. The change is the mean of
    ``d`` and its interval ``mean ± t(1 - alpha/2, n - 1) * sd(d) / sqrt(n)`` over the ``n``
    pairs (Student's one-sample t; :data:`scipy.stats.t`): a speed factor shared by the two
    processes of a pair, or by all the points of one process, cancels from ``d``. The verdict is
    :func:`exponent_verdict`. Each side's :class:`Exponent` (:func:`fit_exponent` over the same
    pairs' processes) is kept for display.

    Args:
        baseline: Pair id -> ``(x values, median latencies in seconds)`` of its baseline
            process.
        candidate: The same for each pair's candidate process (same ids).
        threshold: Smallest change of exponent that counts.
        alpha: 1 - the confidence level of the interval.

    Returns:
        The :class:`ExponentChange` over the pairs in which both processes timed
        :data:`MIN_POINTS` distinct ``x`` or more, or ``None`` when no pair did. With a single
        such pair the interval is unbounded and the verdict ``inconclusive``, with a reason.

    Raises:
        ValueError: ``threshold`` is not positive, ``alpha`` not in (0, 1), or an ``x`` or a
            latency is not positive and finite.
    """
    _check(threshold, alpha)
    ids = [i for i in baseline if i in candidate]
    base = {i: baseline[i] for i in ids}
    cand = {i: candidate[i] for i in ids}
    for side in (base, cand):  # validates both sides, as fit_exponent does
        fit_exponent(side, alpha)
    kept = [
        i
        for i in ids
        if np.unique(np.asarray(base[i][0], dtype=float)).size >= MIN_POINTS
        and np.unique(np.asarray(cand[i][0], dtype=float)).size >= MIN_POINTS
    ]
    if not kept:
        return None
    b_fit = fit_exponent({i: base[i] for i in kept}, alpha)
    c_fit = fit_exponent({i: cand[i] for i in kept}, alpha)
    assert b_fit is not None and c_fit is not None
    d = np.asarray([_slope_of(cand[i]) - _slope_of(base[i]) for i in kept])
    diff = float(d.mean())
    reason = ""
    if d.size < 2:
        lo, hi = -math.inf, math.inf
        reason = "one process pair: run at least 2 pairs"
    else:
        se = float(d.std(ddof=1) / math.sqrt(d.size))
        half = float(sps.t.ppf(1 - alpha / 2, d.size - 1)) * se
        lo, hi = diff - half, diff + half
    verdict = exponent_verdict(lo, hi, threshold)
    return ExponentChange(b_fit, c_fit, diff, lo, hi, threshold, verdict, reason)


def _slope_of(points: tuple[Sequence[float], Sequence[float]]) -> float:
    x, t = points
    return _slope(np.asarray(x, dtype=float), np.log(np.asarray(t, dtype=float)))
