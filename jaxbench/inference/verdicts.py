"""Verdicts that hold: the process is the unit, and a verdict can say "don't know".

Calls of one process are not independent draws: they share the process's memory layout, thread
placement, clocks and neighbours, so two processes of the very same build differ by a few
percent for their whole lives. Every interval here is therefore taken over **processes**, with
the calls nested inside them (Kalibera and Jones, "Rigorous benchmarking in reasonable time",
ISMM 2013, sec. 4: the variation that matters is the one at the highest level that is repeated).

Two designs, one rule:

- **independent processes** (recorded runs, sweeps, asv results): each process is summarised by
  the median of its calls, on the log scale; the two sides' means of those log medians are
  compared with Welch's t interval (its degrees of freedom as :func:`scipy.stats.ttest_ind`
  takes them with ``equal_var=False``), its standard error never below the pooled one (see
  :func:`estimate_log_medians`); Student's pooled interval when one side has a single process,
  which assumes that side spreads as the other does (one process cannot show its own spread).
  This is the two-stage ("summary statistics") estimate of a random-effects model with the
  process as random effect: the spread of the per-process medians contains both the
  between-process variance and the within-process noise of each median, which is what the
  interval needs, and the t quantile keeps the interval honest with a handful of processes,
  where a percentile bootstrap over so few units is known to be too narrow (its variance is
  ``(n-1)/n`` of the truth and it has no t correction; Efron and Tibshirani, *An Introduction
  to the Bootstrap*, 1993, sec. 13.3);
- **process pairs** (live interleaving): each pair of fresh worker processes gives one log ratio
  (the median of its per-round log ratios, which cancels drift within the pair); the pairs are
  the units of a one-sample t interval (:func:`scipy.stats.ttest_1samp`).

The ratio is ``exp`` of the mean log difference: the geometric mean over processes of the
candidate / baseline ratio (above 1: the candidate is slower). One process a side (or one pair)
gives no interval for a between-process difference at all: the verdict is then
``inconclusive``.

Verdict rule (:func:`decide`), with ``t`` the threshold (the smallest change that matters),
``[lo, hi]`` the interval of the ratio and ``r`` its estimate (the interval's geometric
midpoint), after asv's ``compare`` (a test says the sides differ and the ratio passes
``--factor``) and Chromium's Pinpoint (DIFFERENT / SAME / UNKNOWN):

- ``slower`` when ``lo > 1`` (a change is shown) and ``r >= 1 + t`` (it is at least the
  threshold); ``faster`` when ``hi < 1`` and ``r <= 1 / (1 + t)``;
- ``same`` when ``1 / (1 + t) < lo`` and ``hi < 1 + t`` (equivalence shown, two one-sided tests;
  Schuirmann, *J. Pharmacokin. Biopharm.* 15, 1987);
- ``inconclusive`` otherwise, with the smallest change this design could detect
  (:attr:`Estimate.detectable`) and how many more processes would settle it
  (:attr:`Estimate.advice`);
- ``unstable`` is set by the caller when the noise indicators show a disturbance that could
  explain the verdict (:mod:`jaxbench.inference.stability`, :meth:`Estimate.disturbed`).

``strict=True`` is the minimum-effect reading instead: ``slower`` only when ``lo > 1 + t`` (the
whole interval beyond the threshold), ``faster`` when ``hi < 1 / (1 + t)``. It never calls a
change smaller than the threshold, at the price of far more units (:func:`units_needed`: about
six to seven times the pairs to call 3 % at ``t`` = 2 %, whatever the pair spread).

Error rate: with no change at all, ``slower`` is called with probability at most ``alpha / 2``
(the lower end of a ``1 - alpha`` interval exceeds the truth that often), and likewise
``faster``; ``same`` is wrong (a true change beyond ``t``) at most ``alpha / 2`` of the time.
A true change between 0 and ``t`` may be called ``slower`` when its estimate reaches ``t``
(by default; never with ``strict``). This holds per case, for the independent design when the
sides' process spreads differ by no more than about a factor of two (Welch's interval is
approximate; the seeded simulations of ``tests/test_verdicts.py`` check it with as few as 2
processes on a side against 20 on the other). A live comparison that adds pairs
looks again: its intervals are repeated confidence intervals
(:mod:`jaxbench.inference.sequential`), so these rates hold over all the looks together.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Literal

import numpy as np

Verdict = Literal["slower", "faster", "same", "inconclusive", "unstable"]
#: Verdicts in report order: the ones that hold first.
VERDICTS: tuple[Verdict, ...] = ("slower", "faster", "same", "inconclusive", "unstable")
DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.05
#: Power at which :attr:`Estimate.detectable` is stated (and the alternative in the docs).
POWERS = (0.80, 0.95)
#: More units than this to settle a verdict is reported as "not within reach".
MAX_ADVICE_UNITS = 1000


@dataclass(frozen=True)
class Estimate:
    """A ratio with its process-level interval and verdict.

    Attributes:
        ratio: Candidate / baseline (geometric mean over processes; above 1: slower).
        ci_low: Lower end of the ``1 - alpha`` interval of ``ratio`` (``nan`` without one).
        ci_high: Upper end.
        p_value: Two-sided p-value of "no change" (t test on the log scale; ``nan`` without an
            interval).
        units_baseline: Independent units of the baseline: processes (paired: pairs).
        units_candidate: The candidate's (paired: pairs, the same number).
        calls_baseline: Timed values nested in the baseline's units (calls, or compiles).
        calls_candidate: The candidate's.
        se_log: Standard error of the log ratio (``nan`` without an interval).
        df: Degrees of freedom of the t interval.
        sd_log: Spread of one unit's log value (per process, or per pair), used for planning.
        design: ``independent`` or ``paired``.
        alpha: ``1 - `` the confidence level used.
        threshold: Threshold of the verdict.
        verdict: See the module docstring.
        detectable: Smallest slowdown (relative, 0.03 = 3 %) this design calls ``slower`` with
            80 % power (``nan`` without an interval).
        detectable_95: The same at 95 % power.
        advice: What would settle an ``inconclusive`` verdict, e.g. ``"run about 6 more
            process pairs"``; why a verdict is ``unstable``; empty otherwise.
        strict: Decided by the minimum-effect rule (:func:`decide`).
    """

    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    units_baseline: int
    units_candidate: int
    calls_baseline: int
    calls_candidate: int
    se_log: float
    df: float
    sd_log: float
    design: Literal["independent", "paired"]
    alpha: float
    threshold: float
    verdict: Verdict
    detectable: float
    detectable_95: float
    advice: str
    strict: bool = False

    def unstable(self, reasons: Sequence[str]) -> Estimate:
        """A copy marked ``unstable`` (when ``reasons`` is not empty), reasons as its advice."""
        if not reasons:
            return self
        return replace(self, verdict="unstable", advice="; ".join(reasons))

    def with_note(self, note: str) -> Estimate:
        """A copy with ``note`` added to its advice (e.g. disturbances that did not veto)."""
        return replace(self, advice="; ".join(x for x in (self.advice, note) if x))

    def row(self) -> dict[str, object]:
        """The figures of a table row.

        Keys: ``ratio``, ``ci_low``, ``ci_high``, ``p_value``, ``verdict``, ``units`` (text),
        ``n_baseline``/``n_candidate`` (units), ``calls_baseline``/``calls_candidate``,
        ``detectable`` (80 % power), ``sd_log`` (spread of one unit) and ``advice``.
        """
        return {
            "ratio": self.ratio,
            "ci_low": self.ci_low,
            "ci_high": self.ci_high,
            "p_value": self.p_value,
            "verdict": self.verdict,
            "units": self.units,
            "n_baseline": self.units_baseline,
            "n_candidate": self.units_candidate,
            "calls_baseline": self.calls_baseline,
            "calls_candidate": self.calls_candidate,
            "detectable": self.detectable,
            "sd_log": self.sd_log,
            "advice": self.advice,
        }

    @property
    def units(self) -> str:
        """``"3+3 processes"`` or ``"12 pairs"``: what the interval rests on."""
        if self.design == "paired":
            return f"{self.units_baseline} pairs"
        return f"{self.units_baseline}+{self.units_candidate} processes"


def check_rule(threshold: float, alpha: float) -> None:
    """Raise ``ValueError`` naming the bad setting of the verdict rule.

    Raises:
        ValueError: ``threshold`` is not a finite number >= 0 or ``alpha`` is not in (0, 1).
    """
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a number >= 0, got {threshold}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def decide(
    ci_low: float, ci_high: float, threshold: float = DEFAULT_THRESHOLD, strict: bool = False
) -> Verdict:
    """``slower``, ``faster``, ``same`` or ``inconclusive`` from an interval of the ratio.

    See the module docstring for the rule; the estimate is the interval's geometric midpoint
    (every interval here is symmetric on the log scale). Swapping baseline and candidate
    inverts the interval and swaps ``slower`` and ``faster`` exactly.

    Args:
        ci_low: Lower end of the interval of candidate / baseline.
        ci_high: Upper end.
        threshold: Smallest relative change that matters (0.02 = 2 %).
        strict: The minimum-effect reading (the whole interval beyond the threshold).

    Raises:
        ValueError: ``threshold`` is negative.
    """
    check_rule(threshold, DEFAULT_ALPHA)
    if math.isnan(ci_low) or math.isnan(ci_high):
        return "inconclusive"
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    mid = math.sqrt(ci_low * ci_high)
    if ci_low > (upper if strict else 1.0) and mid >= upper:
        return "slower"
    if ci_high < (lower if strict else 1.0) and mid <= lower:
        return "faster"
    if ci_low > lower and ci_high < upper:
        return "same"
    return "inconclusive"


def median(values: Sequence[float] | np.ndarray) -> float:
    """The median of a series, as ``numpy.median`` gives it (``nan`` if empty or any is nan).

    By one sort: ``numpy.median`` spends most of its time on a short series handling its
    arguments, and a comparison of many recorded processes takes hundreds of thousands.
    """
    x = np.sort(np.asarray(values, dtype=float).ravel())  # nan sorts last
    n = x.size
    if n == 0 or math.isnan(x[-1]):
        return math.nan
    m = n // 2
    return float(x[m]) if n % 2 else float((x[m - 1] + x[m]) / 2)


def segment_medians(segment: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """The :func:`median` of each of ``n`` series laid end to end, by one sort of them all.

    Args:
        segment: Shape ``(m,)``, integers in ``[0, n)``: the series each value belongs to.
        values: Shape ``(m,)``, the values (any order).
        n: The number of series.

    Returns:
        Shape ``(n,)``: each series' median, as :func:`median` takes it (``nan`` for a series
        that is empty or holds a ``nan``).
    """
    values = np.asarray(values, dtype=float)
    counts = np.bincount(segment, minlength=n)
    if values.size == 0:
        return np.full(n, np.nan)
    if counts.min() == counts.max() and np.all(segment[1:] >= segment[:-1]):
        # series of one length laid end to end (a history's records, its processes): by rows
        x = np.sort(values.reshape(n, -1), axis=1).ravel()
    else:
        x = values[np.lexsort((values, segment))]  # by series, then value (nan last)
    ends = np.cumsum(counts)
    middle = np.minimum(ends - counts + counts // 2, x.size - 1)
    upper, lower = x[middle], x[np.maximum(middle - 1, 0)]
    with np.errstate(invalid="ignore", over="ignore"):  # -inf + inf across series: not used
        out = np.where(counts % 2 == 1, upper, (lower + upper) / 2)
    return np.where((counts == 0) | np.isnan(x[np.maximum(ends - 1, 0)]), np.nan, out)


def log_medians(groups: Sequence[Sequence[float] | np.ndarray]) -> tuple[np.ndarray, int]:
    """Each group's log median, as :func:`estimate_independent` takes them.

    Args:
        groups: One sequence of values (seconds) per process; non-finite and non-positive
            values are dropped, and a group left empty is left out.

    Returns:
        ``(logs, calls)``: shape ``(groups kept,)``, the natural log of each kept group's
        median, and the number of values behind them.
    """
    logs, calls = [], 0
    for g in groups:
        x = np.asarray(g, dtype=float).ravel()
        x = x[np.isfinite(x) & (x > 0)]
        if x.size:
            logs.append(math.log(median(x)))
            calls += int(x.size)
    return np.asarray(logs, dtype=float), calls


@lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """Student's t quantile (:func:`scipy.stats.t.ppf`), cached.

    The looks of a live schedule ask for the same few levels and degrees of freedom again and
    again.
    """
    from scipy import stats as sps  # not at the top: a live worker never needs it

    return float(sps.t.ppf(q, df))


def _shift(q: float, df: float, power: float) -> float:
    """The shift, in standard errors, at which a t statistic passes ``q`` with ``power``.

    That is the noncentrality of :data:`scipy.stats.nct` (``df`` degrees of freedom) at which
    the statistic exceeds ``q`` with probability ``power``.

    For ``df`` >= 3 this is ``q + t_power`` to within 1 %, the usual approximation, used there;
    below it the approximation is too small (by 14 % at ``df`` = 1 and 80 % power), and the
    noncentral t is solved (``df`` rounded down to a tenth, so the solutions are cached).
    """
    if df >= 3 or q > 100:  # beyond 100: an early look's tiny level; no design reaches it
        return q + t_quantile(power, df)
    return _nct_shift(q, math.floor(df * 10) / 10, power)


@lru_cache(maxsize=1024)
def _nct_shift(q: float, df: float, power: float) -> float:
    from scipy import optimize
    from scipy import stats as sps

    def missing(shift: float) -> float:
        return float(sps.nct.sf(q, df, shift)) - power

    high = q + t_quantile(power, df)  # too small for df < 3: widen until it holds
    while missing(high) < 0:
        high *= 2
    return float(optimize.brentq(missing, 0.0, high, xtol=1e-6))


def detectable(
    se: float, df: float, alpha: float, threshold: float, power: float, strict: bool = False
) -> float:
    """Smallest slowdown (relative: 0.03 = 3 %) called ``slower`` with probability ``power``.

    By default ``slower`` needs the interval's lower end above 1 and the estimate at least
    ``log(1 + threshold)``; with a true log ratio ``mu`` each holds with probability about
    ``power`` when ``mu >= max(d_q se, log(1 + threshold) + d_0 se)``, where ``d_q`` is the
    noncentrality at which a t statistic of ``df`` degrees of freedom exceeds the interval's
    quantile ``t_{1-alpha/2}`` with probability ``power`` (:data:`scipy.stats.nct`; about
    ``t_{1-alpha/2} + t_power`` from 3 degrees of freedom on, the usual normal-theory
    sample-size relation with t quantiles). With ``strict`` the lower end must clear the
    threshold: ``mu >= log(1 + threshold) + d_q se``. The standard error is taken as known:
    with few units its estimate varies, and the power reached is somewhat lower.

    Args:
        se: Standard error of the log ratio (e.g. ``sd / sqrt(pairs)``).
        df: Degrees of freedom of the t interval (e.g. ``pairs - 1``).
        alpha: ``1 -`` the confidence level of the interval (at this look).
        threshold: Threshold of the verdict.
        power: Wanted probability of calling the slowdown ``slower``, e.g. 0.8.
        strict: The minimum-effect rule.

    Returns:
        The relative slowdown, or ``nan`` without a finite ``se`` or with ``df`` <= 0.
    """
    if not (math.isfinite(se) and df > 0):
        return math.nan
    shift = _shift(t_quantile(1 - alpha / 2, df), df, power)
    bound = math.log1p(threshold)
    mu = bound + shift * se if strict else max(shift * se, bound + _shift(0.0, df, power) * se)
    return math.expm1(mu) if mu < 700 else math.inf


def units_needed(
    effect: float, sd: float, alpha: float, threshold: float, paired: bool, strict: bool = False
) -> float:
    """Processes a side (``paired``: pairs) to call a slowdown of ``effect`` with 80 % power.

    The fewest units ``n`` whose design has :func:`detectable` at most ``effect``: the standard
    error of ``n`` units is ``sd / sqrt(n)`` for pairs and ``sd * sqrt(2 / n)`` for two sides of
    ``n`` independent processes, with ``n - 1`` degrees of freedom (pairs: exact; independent
    sides: the fewest that Welch's interval can have, Hsu's conservative choice, so the number
    errs high by a process or two from about 8 a side).

    Args:
        effect: Relative slowdown to detect (0.05 = 5 %).
        sd: Spread of one unit's log value (a pair's log ratio, or one process's log median).
        alpha: Two-sided level of the interval.
        threshold: Threshold of the verdict.
        paired: Pairs rather than independent processes.
        strict: The minimum-effect rule.

    Returns:
        Units (at least 2), or ``inf`` when the effect does not clear the threshold, ``sd`` is
        not finite, or more than :data:`MAX_ADVICE_UNITS` would be needed.
    """
    mu, bound = math.log1p(effect), math.log1p(threshold)
    if mu < bound or not math.isfinite(sd):
        return math.inf
    if strict:  # the lower end must clear the threshold
        return _units_for(mu - bound, sd, alpha, paired)
    # the lower end must clear 1, and the estimate the threshold (power alone)
    return max(_units_for(mu, sd, alpha, paired), _units_for(mu - bound, sd, 1.0, paired))


def _units_for(gap: float, sd: float, alpha: float, paired: bool) -> float:
    """Fewest units (2 to :data:`MAX_ADVICE_UNITS`) to clear ``gap`` with 80 % power.

    The interval at level ``alpha`` must clear ``gap`` (log scale); ``inf`` when no number
    does. Found by bisection, as the needed shift shrinks with every unit added.
    """
    if not (gap > 0 and math.isfinite(sd)):
        return math.inf
    if sd <= 0:
        return 2.0

    def enough(n: int) -> bool:
        se = sd / math.sqrt(n) if paired else sd * math.sqrt(2 / n)
        return _shift(t_quantile(1 - alpha / 2, n - 1), n - 1, POWERS[0]) * se <= gap

    low, high = 2, MAX_ADVICE_UNITS
    if not enough(high):
        return math.inf
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if enough(mid) else (mid + 1, high)
    return float(low)


def _advice(
    verdict: Verdict,
    log_ratio: float,
    sd: float,
    n: int,
    alpha: float,
    threshold: float,
    paired: bool,
    strict: bool,
) -> str:
    what = "process pairs" if paired else "processes a side"
    if n < 2:
        if paired:
            return "one pair gives no interval for a between-process difference: run more pairs"
        if verdict == "inconclusive":
            return ("one process on a side gives no interval for a between-process difference: "
                    "run at least 2 processes a side (each run is one)")  # fmt: skip
        return ("one process on a side: the interval assumes that side spreads as the other "
                "does; run at least 2 processes a side to measure it")  # fmt: skip
    if verdict != "inconclusive":
        return ""
    bound = math.log1p(threshold)
    effect = abs(log_ratio)
    # By default a change is settled once the interval excludes 1 (gap: the effect itself),
    # "same" once it fits inside the threshold (gap: threshold - effect); strict needs the
    # interval clear of the threshold on either side.
    gap = abs(effect - bound) if strict else effect if effect >= bound else bound - effect
    needed = _units_for(gap, sd, alpha, paired)
    if not math.isfinite(needed) and not math.isfinite(_units_for(bound, sd, alpha, paired)):
        # Even a change of twice the threshold, or none, would not be settled: the spread is
        # the cause, not where the estimate sits.
        units = "pairs" if paired else "processes"
        return (f"the spread between {units} (sd {sd:.3f} in log) is too wide for fewer than "
                f"{MAX_ADVICE_UNITS} {what} to settle it: find what disturbs the {units} "
                "before running more")  # fmt: skip
    if not math.isfinite(needed):
        return (f"the estimate sits at the threshold ({math.expm1(abs(log_ratio)):.1%} against "
                f"{threshold:.1%}): more {what} will not settle it soon")  # fmt: skip
    more = max(1, math.ceil(needed) - n)
    if more == 1:
        what = "process pair" if paired else "process a side"
    return f"run about {more} more {what}"


def _finish(
    log_ratio: float,
    se: float,
    df: float,
    p: float,
    sd: float,
    units: tuple[int, int],
    calls: tuple[int, int],
    design: Literal["independent", "paired"],
    alpha: float,
    threshold: float,
    strict: bool,
) -> Estimate:

    if math.isfinite(se) and df > 0:
        q = t_quantile(1 - alpha / 2, df)
        # An early look's level can be tiny, its t quantile huge: an interval of (0, inf).
        low = math.exp(max(-700.0, log_ratio - q * se))
        high = math.exp(min(700.0, log_ratio + q * se))
    else:
        low = high = p = math.nan
    verdict = decide(low, high, threshold, strict)
    n = units[0] if design == "paired" else min(units)
    return Estimate(
        ratio=math.exp(log_ratio) if math.isfinite(log_ratio) else math.nan,
        ci_low=low,
        ci_high=high,
        p_value=p,
        units_baseline=units[0],
        units_candidate=units[1],
        calls_baseline=calls[0],
        calls_candidate=calls[1],
        se_log=se,
        df=df,
        sd_log=sd,
        design=design,
        alpha=alpha,
        threshold=threshold,
        verdict=verdict,
        detectable=detectable(se, df, alpha, threshold, POWERS[0], strict),
        detectable_95=detectable(se, df, alpha, threshold, POWERS[1], strict),
        advice=_advice(verdict, log_ratio, sd, n, alpha, threshold, design == "paired", strict),
        strict=strict,
    )


def estimate_independent(
    baseline: Sequence[Sequence[float] | np.ndarray],
    candidate: Sequence[Sequence[float] | np.ndarray],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    strict: bool = False,
) -> Estimate:
    """Compare two sides made of independent processes, calls nested in each process.

    Args:
        baseline: One sequence per baseline process: its timed values in seconds (calls of a
            steady state, or a single compile time). Non-finite and non-positive values are
            dropped; a process left empty is dropped.
        candidate: The candidate's processes, same unit.
        threshold: Smallest relative change that matters.
        alpha: ``1 -`` the confidence level of the interval.
        strict: The minimum-effect rule (:func:`decide`).

    Returns:
        An :class:`Estimate` (design ``independent``): Welch's interval of the difference of
        mean log medians (its standard error at least the pooled one), Student's pooled
        interval when one side has a single process, no interval (``inconclusive``) with one
        process a side.

    Raises:
        ValueError: A bad ``threshold`` or ``alpha``, or a side without any value.
    """
    a, calls_a = log_medians(baseline)
    b, calls_b = log_medians(candidate)
    return estimate_log_medians(a, b, (calls_a, calls_b), threshold, alpha, strict)


def estimate_log_medians(
    a: np.ndarray,
    b: np.ndarray,
    calls: tuple[int, int],
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    strict: bool = False,
) -> Estimate:
    """:func:`estimate_independent` from each process's log median, already taken.

    For a caller that takes the medians of many processes at once (a recorded comparison of a
    long history, :mod:`jaxbench.analysis.compare`).

    Args:
        a: Shape ``(processes,)``: the natural log of each baseline process's median of its
            finite, positive values (seconds); processes without such values left out.
        b: The candidate's, the same way.
        calls: The values behind ``a`` and ``b`` (finite, positive), for the estimate's
            ``calls``.
        threshold: As :func:`estimate_independent`.
        alpha: As :func:`estimate_independent`.
        strict: As :func:`estimate_independent`.

    Raises:
        ValueError: As :func:`estimate_independent`.
    """
    from scipy import stats as sps  # not at the top: a live worker never needs it

    check_rule(threshold, alpha)
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError(f"each side needs a value: {a.size} and {b.size} processes with data")
    diff = float(b.mean() - a.mean())
    se, df, p = math.nan, 0.0, math.nan
    sd = _pooled_sd(a, b)
    if a.size >= 2 and b.size >= 2:
        va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
        if va + vb > 0:
            # Welch-Satterthwaite degrees of freedom (Welch, Biometrika 34, 1947), as ttest_ind's
            df = float((va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1)))
            # Welch's standard error, never below the pooled one: a side of 2 or 3 processes
            # whose spread comes out small by chance makes Welch's interval too narrow against
            # a side of many (false "slower" 5 % of the time at 2 against 10, not 2.5 %); the
            # pooled error rests on both sides' spread. Equal sides: the two are the same.
            se = max(math.sqrt(va + vb), sd * math.sqrt(1 / a.size + 1 / b.size))
            p = float(2 * sps.t.sf(abs(diff) / se, df))
        else:  # every process alike on both sides: the interval is the point
            se, df, p = 0.0, float(a.size + b.size - 2), float(diff == 0)
    elif a.size + b.size >= 3 and sd > 0:  # one side has one process: assume equal spread
        se = sd * math.sqrt(1 / a.size + 1 / b.size)
        df = float(a.size + b.size - 2)
        p = float(2 * sps.t.sf(abs(diff) / se, df))
    return _finish(diff, se, df, p, sd, (int(a.size), int(b.size)), calls,
                   "independent", alpha, threshold, strict)  # fmt: skip


def _pooled_sd(a: np.ndarray, b: np.ndarray) -> float:
    dof = a.size + b.size - 2
    if dof < 1:
        return math.nan
    ss = ((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()
    return math.sqrt(ss / dof)


def estimate_paired(
    pair_log_ratios: Sequence[float] | np.ndarray,
    calls: tuple[int, int] = (0, 0),
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
    strict: bool = False,
) -> Estimate:
    """Compare over independent process pairs: one log ratio (candidate / baseline) per pair.

    Args:
        pair_log_ratios: Shape ``(pairs,)``: each pair's log ratio, e.g. the median of its
            per-round log ratios (:func:`jaxbench.inference.paired.pair_log_ratio`).
        calls: Timed calls of the baseline and the candidate over all pairs (for the record).
        threshold: Smallest relative change that matters.
        alpha: ``1 -`` the confidence level of the interval (at this look: a live comparison's
            :func:`jaxbench.inference.sequential.nominal_level`).
        strict: The minimum-effect rule (:func:`decide`).

    Returns:
        An :class:`Estimate` (design ``paired``): the one-sample t interval of the mean log
        ratio over pairs; none (``inconclusive``) with a single pair.

    Raises:
        ValueError: A bad ``threshold`` or ``alpha``, no pair, or a non-finite log ratio.
    """
    from scipy import stats as sps  # not at the top: a live worker never needs it

    check_rule(threshold, alpha)
    d = np.asarray(pair_log_ratios, dtype=float).ravel()
    if d.size == 0:
        raise ValueError("no process pair to compare")
    if not np.isfinite(d).all():
        raise ValueError("every pair's log ratio must be finite")
    mean = float(d.mean())
    se, df, p, sd = math.nan, 0.0, math.nan, math.nan
    if d.size >= 2:
        sd = float(d.std(ddof=1))
        df = float(d.size - 1)
        se = sd / math.sqrt(d.size)
        if sd > 0:  # the one-sample t test of scipy.stats.ttest_1samp, without its checks
            from scipy import stats as sps  # not at the top: a live worker never needs it

            p = float(2 * sps.t.sf(abs(mean) / se, df))
        else:
            p = float(mean == 0)
    n = int(d.size)
    return _finish(mean, se, df, p, sd, (n, n), calls, "paired", alpha, threshold, strict)
