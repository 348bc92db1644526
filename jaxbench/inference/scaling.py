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
lies wholly beyond ``± threshold``, ``same`` when it lies wholly within, ``inconclusive``
otherwise.
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
        ci_low: Lower end of the ``1 - alpha`` Welch interval of the difference.
        ci_high: Upper end.
        threshold: Smallest change of exponent that counts.
        verdict: ``changed``, ``same`` or ``inconclusive``.
        reason: Why it is ``inconclusive`` when the interval alone does not say (a side has a
            single process); empty otherwise.
    """

    baseline: Exponent
    candidate: Exponent
    difference: float
    ci_low: float
    ci_high: float
    threshold: float
    verdict: ExponentVerdict
    reason: str = ""


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
    if not threshold > 0:
        raise ValueError(f"threshold must be > 0, got {threshold!r}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
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
    if lo > threshold or hi < -threshold:
        verdict: ExponentVerdict = "changed"
    elif -threshold < lo and hi < threshold:
        verdict = "same"
    else:
        verdict = "inconclusive"
    reason = ""
    if "points of one process" in (baseline.basis, candidate.basis):
        reason = "a side has one process: time each version in at least 2 processes"
        verdict = "inconclusive"
    return ExponentChange(baseline, candidate, diff, lo, hi, threshold, verdict, reason)
