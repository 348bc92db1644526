"""Compare two versions case by case: steady-state latency and compile time, never mixed.

Each row of a comparison is one case (benchmark and parameters) under one measurement condition
(:mod:`jaxbench.analysis.conditions`) and one metric:

- ``steady_state``: every timed call of the ``ok`` records, seconds per call;
- ``compile``: the XLA compile time of each record (one value per record), seconds.

A case measured for the baseline under one condition and for the candidate under another is not
compared; :attr:`Comparison.unmatched` names it and :attr:`Comparison.kept_apart` says which
fields differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from jaxbench.analysis import stats
from jaxbench.analysis.conditions import CONDITION, DEFAULT_FIELDS, split_series
from jaxbench.analysis.frames import compile_times, steady_state_samples
from jaxbench.analysis.versions import previous_version, version_categorical

STEADY_STATE = "steady_state"
COMPILE = "compile"
DEFAULT_COMPILE_THRESHOLD = 0.10
BASIS_TESTS = "bootstrap CI of the ratio of medians + Mann-Whitney U"
BASIS_THRESHOLD = "threshold only: a single value on one side, no CI or test possible"
BASIS_FEW = "threshold only: too few values for the rank test to reach alpha"
COLUMNS = (
    "metric",
    "case",
    "benchmark",
    CONDITION,
    "n_baseline",
    "n_candidate",
    "baseline_median_s",
    "candidate_median_s",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "verdict",
    "basis",
)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_versions`.

    Attributes:
        baseline: Baseline version (or other ``by`` value).
        candidate: Candidate version.
        table: One row per metric, case and condition; columns :data:`COLUMNS`. ``ratio`` is
            candidate / baseline median (above 1: the candidate is slower), ``ci_low``/``ci_high``
            its bootstrap interval, ``p_value`` the Mann-Whitney U p-value, ``verdict``
            ``faster``/``slower``/``unchanged`` (:func:`jaxbench.analysis.stats.verdict`),
            ``basis`` what the verdict rests on.
        kept_apart: Why rows of one case were not pooled (differing condition fields).
        unmatched: Cases of one side with no counterpart under the same condition.
        threshold: Steady-state threshold used (relative, e.g. 0.02).
        compile_threshold: Compile-time threshold used.
        alpha: Significance level used.
    """

    baseline: str
    candidate: str
    table: pd.DataFrame
    kept_apart: list[str]
    unmatched: list[str]
    threshold: float
    compile_threshold: float
    alpha: float


def _compare_values(
    a: pd.Series,
    b: pd.Series,
    threshold: float,
    alpha: float,
    confidence: float,
    resamples: int,
    seed: int,
) -> dict[str, object]:
    ratio, low, high = stats.median_ratio_ci(a, b, confidence, resamples, seed)
    single = len(a) < 2 or len(b) < 2
    p = math.nan if single else stats.mann_whitney_p(a, b)
    # E.g. two compile times a side: p >= 1/3 whatever they are, so the test could never agree.
    testable = not single and stats.smallest_rank_p(len(a), len(b)) < alpha
    if testable:
        call = stats.verdict(ratio, low, high, p, threshold, alpha)
    else:
        call = stats.verdict(ratio, threshold=threshold, alpha=alpha)
    return {
        "n_baseline": len(a),
        "n_candidate": len(b),
        "baseline_median_s": float(a.median()),
        "candidate_median_s": float(b.median()),
        "ratio": ratio,
        "ci_low": low,
        "ci_high": high,
        "p_value": p,
        "verdict": call,
        "basis": BASIS_TESTS if testable else BASIS_THRESHOLD if single else BASIS_FEW,
    }


def _metric_rows(
    values: pd.DataFrame,
    column: str,
    metric: str,
    by: str,
    sides: tuple[str, str],
    threshold: float,
    opts: tuple[float, float, int, int],
) -> tuple[list[dict[str, object]], list[str]]:
    alpha, confidence, resamples, seed = opts
    rows, unmatched = [], []
    side = values[by].astype(str)
    for case, group in values.groupby("case", sort=True):
        g_side = side[group.index]
        conds = {s: set(group.loc[g_side == s, CONDITION]) for s in sides}
        both = sorted(conds[sides[0]] & conds[sides[1]])
        for cond in both:
            sel = group[CONDITION] == cond
            a = group.loc[sel & (g_side == sides[0]), column].dropna()
            b = group.loc[sel & (g_side == sides[1]), column].dropna()
            if a.empty or b.empty:
                continue
            rows.append(
                {
                    "metric": metric,
                    "case": case,
                    "benchmark": group["benchmark"].iloc[0],
                    CONDITION: cond,
                }
                | _compare_values(a, b, threshold, alpha, confidence, resamples, seed)
            )
        alone = {s: sorted(conds[s] - set(both)) for s in sides}
        for s, other in (sides, sides[::-1]):
            if alone[s] and not conds[other]:
                unmatched.append(f"{metric} {case}: only {s} has it")
            elif alone[s]:
                unmatched.append(
                    f"{metric} {case}: {s} under {', '.join(alone[s])} has no {other} "
                    f"counterpart there ({other} only under {', '.join(sorted(conds[other]))}); "
                    "conditions differ, see kept_apart"
                )
    return rows, unmatched


def compare_versions(
    frame: pd.DataFrame,
    baseline: str,
    candidate: str,
    *,
    by: str = "version",
    threshold: float = stats.DEFAULT_THRESHOLD,
    compile_threshold: float = DEFAULT_COMPILE_THRESHOLD,
    alpha: float = stats.DEFAULT_ALPHA,
    confidence: float = stats.DEFAULT_CONFIDENCE,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = stats.DEFAULT_SEED,
    condition_fields: Sequence[str] = DEFAULT_FIELDS,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` per case and condition, steady state and compile.

    Steady state pools the samples of every ``ok`` record of a case, side and condition (repeated
    runs under one condition are one series). Compile time has one value per record: with enough
    records a side for the rank test to reach ``alpha`` (four a side, or three against five:
    :func:`jaxbench.analysis.stats.smallest_rank_p`) it is compared like the latency (bootstrap
    CI + Mann-Whitney); otherwise the medians are compared against ``compile_threshold`` alone
    and ``basis`` says so (:data:`BASIS_THRESHOLD`, :data:`BASIS_FEW`). Compile times that were
    persistent-cache hits are left out.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.
        baseline: Value of ``by`` for the baseline, e.g. ``"0.4.30"``.
        candidate: Value of ``by`` for the candidate.
        by: Column holding what is compared (``"version"``; ``"commit"`` or ``"run_id"`` work too,
            and are then left out of the condition).
        threshold: Smallest relative steady-state change that counts (0.02 = 2 %).
        compile_threshold: The same for compile time (noisier, so 10 % by default).
        alpha: Significance level of the Mann-Whitney U test.
        confidence: Confidence level of the bootstrap intervals.
        n_resamples: Bootstrap resamples per comparison.
        seed: Seed of every bootstrap (:func:`jaxbench.analysis.stats.median_ratio_ci`).
        condition_fields: Fixed condition fields
            (:func:`jaxbench.analysis.conditions.condition_fields`).

    Returns:
        A :class:`Comparison`; its table is sorted by metric and case.

    Raises:
        ValueError: ``baseline`` or ``candidate`` has no rows in ``frame``.
    """
    present = set(frame[by].dropna().astype(str)) if by in frame else set()
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if str(value) not in present:
            raise ValueError(f"{name} {value!r} has no rows; {by} values: {sorted(present)}")
    sides = (str(baseline), str(candidate))
    sub = frame[frame[by].astype(str).isin(sides)]
    fields = [f for f in condition_fields if f != by]
    split = split_series(sub, fields)
    opts = (alpha, confidence, n_resamples, seed)
    steady, un1 = _metric_rows(
        steady_state_samples(split.frame), "latency_s", STEADY_STATE, by, sides, threshold, opts
    )
    comp, un2 = _metric_rows(
        compile_times(split.frame), "compile_s", COMPILE, by, sides, compile_threshold, opts
    )
    table = pd.DataFrame([*steady, *comp], columns=list(COLUMNS))
    return Comparison(
        baseline=sides[0],
        candidate=sides[1],
        table=table,
        kept_apart=split.reasons,
        unmatched=[*un1, *un2],
        threshold=threshold,
        compile_threshold=compile_threshold,
        alpha=alpha,
    )


def compare_to_previous(frame: pd.DataFrame, version: str, **kwargs: object) -> Comparison:
    """:func:`compare_versions` of ``version`` against the version just before it in ``frame``.

    Args:
        frame: As :func:`compare_versions`.
        version: The candidate JAX version.
        **kwargs: Passed to :func:`compare_versions`.

    Raises:
        ValueError: ``version`` is not in ``frame`` or is its oldest version.
    """
    versions = version_categorical(frame["version"]).categories
    previous = previous_version(versions, version)
    if previous is None:
        raise ValueError(f"{version!r} is the oldest version in the frame: nothing to compare to")
    return compare_versions(frame, previous, version, **kwargs)  # type: ignore[arg-type]
