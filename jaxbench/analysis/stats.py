"""Statistics of latency samples: summaries, median confidence intervals, version verdicts.

Everything here works on plain arrays of seconds and uses SciPy for the statistics:

- percentiles are numpy's linear interpolation (``p50``, ``p95``; ``IQR = p75 - p25``), as in
  :func:`jaxbench.summary.summarize`;
- ``MAD`` is the raw median absolute deviation, ``median(|x - median(x)|)``
  (:func:`scipy.stats.median_abs_deviation` with ``scale=1.0``; multiply by 1.4826 for a normal
  sigma);
- confidence intervals are nonparametric percentile bootstrap intervals
  (:func:`scipy.stats.bootstrap`, ``method="percentile"``; Efron & Tibshirani, *An Introduction
  to the Bootstrap*, 1993, ch. 13). The percentile method is used rather than BCa because the
  median is not smooth: BCa's jackknife acceleration is unreliable for it. Resampling uses a
  seeded :class:`numpy.random.Generator`, so results repeat exactly;
- the rank test is the two-sided Mann-Whitney U test (:func:`scipy.stats.mannwhitneyu`).

The bootstrap treats samples as independent draws. Successive calls of one process are not
quite independent (clock, caches, thermal state), and samples pooled from several runs ignore
run-to-run variation, so intervals are somewhat narrower than the truth: a reason for the
practical threshold in :func:`verdict`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
import pandas as pd
from scipy import stats

Verdict = Literal["faster", "slower", "unchanged"]
DEFAULT_THRESHOLD = 0.02
DEFAULT_ALPHA = 0.05
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0
_BATCH_ELEMENTS = 2_000_000  # resampled values held at once by the bootstrap


def _array(samples: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    return x[np.isfinite(x)]


def _batch(*sizes: int) -> int:
    return max(1, _BATCH_ELEMENTS // max(1, *sizes))


def median_ci(
    samples: Sequence[float] | np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of the median.

    Args:
        samples: Shape ``(n,)``, e.g. latencies in seconds; non-finite values are dropped.
        confidence: Confidence level, e.g. 0.95.
        n_resamples: Bootstrap resamples.
        seed: Seed of the :class:`numpy.random.Generator` used for resampling.

    Returns:
        ``(low, high)`` in the unit of ``samples``; ``(nan, nan)`` with fewer than 2 values.
    """
    x = _array(samples)
    if x.size < 2:
        return (math.nan, math.nan)
    res = stats.bootstrap(
        (x,),
        np.median,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        batch=_batch(x.size),
        rng=np.random.default_rng(seed),
    )
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def summarize_samples(
    samples: Sequence[float] | np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, float | int]:
    """``n``, ``p50``, ``p95``, ``iqr``, ``mad`` and the median's ``ci_low``/``ci_high``.

    Args:
        samples: Shape ``(n,)``, in seconds (the result is in the same unit).
        confidence: As :func:`median_ci`.
        n_resamples: As :func:`median_ci`.
        seed: As :func:`median_ci`.

    Returns:
        A dict; every figure but ``n`` is ``nan`` without samples.
    """
    x = _array(samples)
    if x.size == 0:
        nan = math.nan
        return {
            "n": 0,
            "p50": nan,
            "p95": nan,
            "iqr": nan,
            "mad": nan,
            "ci_low": nan,
            "ci_high": nan,
        }
    p25, p50, p75, p95 = np.percentile(x, [25, 50, 75, 95])
    low, high = median_ci(x, confidence, n_resamples, seed)
    return {
        "n": int(x.size),
        "p50": float(p50),
        "p95": float(p95),
        "iqr": float(p75 - p25),
        "mad": float(stats.median_abs_deviation(x, scale=1.0)),
        "ci_low": low,
        "ci_high": high,
    }


def _median_ratio(baseline: np.ndarray, candidate: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(candidate, axis=axis) / np.median(baseline, axis=axis)


def median_ratio_ci(
    baseline: Sequence[float] | np.ndarray,
    candidate: Sequence[float] | np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float, float]:
    """Ratio of medians ``median(candidate) / median(baseline)`` and its bootstrap interval.

    Both samples are resampled independently (:func:`scipy.stats.bootstrap` with two samples and
    ``paired=False``) and the ratio is taken per resample; the interval is the percentile
    interval of those ratios. A ratio above 1 means the candidate takes longer.

    Args:
        baseline: Shape ``(n,)``, seconds (any positive unit, the same for both).
        candidate: Shape ``(m,)``, same unit.
        confidence: As :func:`median_ci`.
        n_resamples: As :func:`median_ci`.
        seed: As :func:`median_ci`.

    Returns:
        ``(ratio, low, high)``; ``low``/``high`` are ``nan`` when either side has fewer than 2
        values, and everything is ``nan`` when either side is empty.

    Raises:
        ValueError: The baseline median is not positive (a ratio would be meaningless).
    """
    a, b = _array(baseline), _array(candidate)
    if a.size == 0 or b.size == 0:
        return (math.nan, math.nan, math.nan)
    if np.median(a) <= 0:
        raise ValueError(f"baseline median is {np.median(a)}: a ratio needs a positive baseline")
    ratio = float(_median_ratio(a, b))
    if a.size < 2 or b.size < 2:
        return (ratio, math.nan, math.nan)
    res = stats.bootstrap(
        (a, b),
        _median_ratio,
        paired=False,
        confidence_level=confidence,
        n_resamples=n_resamples,
        method="percentile",
        vectorized=True,
        batch=_batch(a.size, b.size),
        rng=np.random.default_rng(seed),
    )
    return (ratio, float(res.confidence_interval.low), float(res.confidence_interval.high))


def mann_whitney_p(
    baseline: Sequence[float] | np.ndarray, candidate: Sequence[float] | np.ndarray
) -> float:
    """Two-sided Mann-Whitney U p-value (:func:`scipy.stats.mannwhitneyu`, ``method="auto"``).

    Returns:
        The p-value, ``nan`` when either side is empty.
    """
    a, b = _array(baseline), _array(candidate)
    if a.size == 0 or b.size == 0:
        return math.nan
    return float(stats.mannwhitneyu(a, b, alternative="two-sided").pvalue)


def smallest_rank_p(n_baseline: int, n_candidate: int) -> float:
    """The smallest two-sided Mann-Whitney U p-value that samples of these sizes can give.

    It is ``2 / C(n1 + n2, n1)`` (the exact null distribution puts probability ``1 / C`` on
    each extreme ordering; Mann & Whitney, *Ann. Math. Statist.* 18, 1947): 1/3 for two values
    a side, 0.1 for three, 0.029 for four. When it is not below ``alpha`` the test cannot call
    anything, whatever the data.
    """
    if n_baseline < 1 or n_candidate < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_baseline + n_candidate, n_baseline))


def verdict(
    ratio: float,
    ci_low: float = math.nan,
    ci_high: float = math.nan,
    p_value: float = math.nan,
    threshold: float = DEFAULT_THRESHOLD,
    alpha: float = DEFAULT_ALPHA,
) -> Verdict:
    """Call a candidate ``faster``, ``slower`` or ``unchanged`` against a baseline.

    Rule, with ``r`` the ratio of medians (candidate / baseline) and ``t`` the threshold:

    - ``slower`` if the whole confidence interval lies above 1 (``ci_low > 1``), and
      ``r > 1 + t``, and the Mann-Whitney ``p_value < alpha``;
    - ``faster`` if ``ci_high < 1``, and ``r < 1 / (1 + t)``, and ``p_value < alpha``;
    - ``unchanged`` otherwise (no change shown, or one smaller than the threshold).

    Each condition guards against a different mistake: the interval excludes 1 (the shift of
    the median is not noise), the point ratio passes the threshold (the shift matters in
    practice, and covers the dependence between successive samples that the bootstrap ignores),
    and the rank test agrees (the whole distribution moved, not just its middle). The bounds
    ``1 + t`` and ``1 / (1 + t)`` are symmetric in log space, so swapping baseline and candidate
    swaps ``faster`` and ``slower`` exactly.

    Without an interval or p-value (``nan``, e.g. one compile time per side), the verdict rests
    on the threshold alone: ``slower`` if ``r > 1 + t``, ``faster`` if ``r < 1 / (1 + t)``.

    Args:
        ratio: Candidate / baseline, e.g. of medians.
        ci_low: Lower end of the confidence interval of ``ratio``.
        ci_high: Upper end of it.
        p_value: Two-sided Mann-Whitney U p-value.
        threshold: Smallest relative change that counts, e.g. 0.02 for 2 %.
        alpha: Significance level of the rank test.

    Raises:
        ValueError: ``threshold`` is negative or ``alpha`` is not in (0, 1).
    """
    if threshold < 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if math.isnan(ratio):
        return "unchanged"
    upper, lower = 1 + threshold, 1 / (1 + threshold)
    if math.isnan(ci_low) or math.isnan(ci_high) or math.isnan(p_value):
        return "slower" if ratio > upper else "faster" if ratio < lower else "unchanged"
    if ci_low > 1 and ratio > upper and p_value < alpha:
        return "slower"
    if ci_high < 1 and ratio < lower and p_value < alpha:
        return "faster"
    return "unchanged"


def case_summary(
    samples: pd.DataFrame,
    by: Sequence[str] = ("case", "condition", "version"),
    value: str = "latency_s",
    confidence: float = DEFAULT_CONFIDENCE,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> pd.DataFrame:
    """Per group (by default case, condition and version): :func:`summarize_samples` figures.

    Args:
        samples: One row per value, e.g. :func:`jaxbench.analysis.steady_state_samples`
            (``value="latency_s"``) or :func:`jaxbench.analysis.compile_times`
            (``value="compile_s"``).
        by: Grouping columns; groups never mix conditions unless ``by`` leaves ``condition`` out.
        value: Column of values, seconds.
        confidence: As :func:`median_ci`.
        n_resamples: As :func:`median_ci`.
        seed: As :func:`median_ci`.

    Returns:
        One row per group: the ``by`` columns, then ``n``, ``p50``, ``p95``, ``iqr``, ``mad``,
        ``ci_low``, ``ci_high`` (seconds), sorted with versions in version order.

    Raises:
        KeyError: A column of ``by`` or ``value`` is missing.
    """
    by = list(by)
    rows = [
        dict(zip(by, key, strict=True))
        | summarize_samples(group[value], confidence, n_resamples, seed)
        for key, group in samples.groupby(by, observed=True, sort=False)
    ]
    out = pd.DataFrame(rows, columns=[*by, "n", "p50", "p95", "iqr", "mad", "ci_low", "ci_high"])
    if "version" in by and isinstance(samples["version"].dtype, pd.CategoricalDtype):
        out["version"] = out["version"].astype(samples["version"].dtype)
    return out.sort_values(by, ignore_index=True)
