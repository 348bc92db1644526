"""Paired statistics of an interleaved comparison: one candidate/baseline ratio per round.

In an interleaved comparison (:mod:`jaxbench.interleave`) each round times one block of calls of
the baseline and one of the candidate, back to back in random order. Whatever drifts slowly on
the machine (clock, other load, thermal state) affects both blocks of a round alike, so the
per-round ratio ``median(candidate block) / median(baseline block)`` cancels it; the rounds'
ratios are then nearly independent draws, unlike the calls of one process.

- the estimate is the median of the per-round ratios;
- its confidence interval is a percentile bootstrap over rounds
  (:func:`scipy.stats.bootstrap`, as :func:`jaxbench.analysis.stats.median_ci`);
- the test is the two-sided Wilcoxon signed-rank test of the log ratios against 0
  (:func:`scipy.stats.wilcoxon`; Wilcoxon, *Biometrics Bulletin* 1, 1945), the paired
  counterpart of the Mann-Whitney U test used for independent samples;
- the verdict is :func:`jaxbench.analysis.stats.verdict` on those three figures.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from jaxbench.analysis import stats

#: The exact two-sided signed-rank p-value of n rounds is at least 2 / 2**n: 0.0625 for 5
#: rounds, so fewer than 6 could never reach alpha = 0.05.
MIN_ROUNDS = 6


@dataclass(frozen=True)
class PairedResult:
    """Paired figures of an interleaved comparison.

    Attributes:
        rounds: Rounds used.
        ratio: Median per-round ratio (candidate / baseline; above 1: the candidate is slower).
        ci_low: Lower end of its bootstrap confidence interval.
        ci_high: Upper end.
        p_value: Two-sided Wilcoxon signed-rank p-value of the log ratios.
        verdict: ``faster``, ``slower`` or ``unchanged``.
    """

    rounds: int
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    verdict: stats.Verdict


def round_ratios(
    baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]]
) -> np.ndarray:
    """``median(candidate block) / median(baseline block)`` for each round.

    Args:
        baseline_blocks: One sequence of latencies (seconds) per round.
        candidate_blocks: The candidate's, same number of rounds.

    Returns:
        Shape ``(rounds,)``, float64.

    Raises:
        ValueError: The round counts differ, or a block is empty or not positive.
    """
    if len(baseline_blocks) != len(candidate_blocks):
        raise ValueError(
            f"baseline has {len(baseline_blocks)} rounds, candidate {len(candidate_blocks)}"
        )
    out = []
    for i, (a, b) in enumerate(zip(baseline_blocks, candidate_blocks, strict=True)):
        if not (len(a) and len(b)):
            raise ValueError(f"round {i}: a block is empty")
        ma, mb = np.median(np.asarray(a, float)), np.median(np.asarray(b, float))
        if not (ma > 0 and mb > 0):
            raise ValueError(f"round {i}: block medians must be positive, got {ma} and {mb}")
        out.append(mb / ma)
    return np.asarray(out, dtype=float)


def paired_comparison(
    ratios: Sequence[float] | np.ndarray,
    threshold: float = stats.DEFAULT_THRESHOLD,
    alpha: float = stats.DEFAULT_ALPHA,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
) -> PairedResult:
    """Median per-round ratio, its bootstrap CI, the signed-rank p-value and the verdict.

    Args:
        ratios: Shape ``(rounds,)``, from :func:`round_ratios`.
        threshold: As :func:`jaxbench.analysis.stats.verdict`.
        alpha: Significance level of the signed-rank test.
        confidence: Confidence level of the interval.
        n_resamples: Bootstrap resamples.
        seed: Bootstrap seed (results repeat exactly).

    Raises:
        ValueError: Fewer than :data:`MIN_ROUNDS` rounds, or a ratio that is not positive.
    """
    r = np.asarray(ratios, dtype=float)
    if r.size < MIN_ROUNDS:
        raise ValueError(f"need at least {MIN_ROUNDS} rounds for paired statistics, got {r.size}")
    if not (np.isfinite(r).all() and (r > 0).all()):
        raise ValueError("every per-round ratio must be a finite positive number")
    low, high = stats.median_ci(r, confidence, n_resamples, seed)
    logs = np.log(r)
    p = 1.0 if np.all(logs == 0) else float(sps.wilcoxon(logs, alternative="two-sided").pvalue)
    ratio = float(np.median(r))
    return PairedResult(
        rounds=int(r.size),
        ratio=ratio,
        ci_low=low,
        ci_high=high,
        p_value=p if math.isfinite(p) else 1.0,
        verdict=stats.verdict(ratio, low, high, p, threshold, alpha),
    )
