"""The version-upgrade review: which versions are compared, the comparisons, and their verdicts.

A :class:`Review` holds everything a report says, as frames: the loaded records of the versions
under review, the files that failed to load, one :class:`~jaxbench.analysis.compare.Comparison`
per pair of versions, the settings of the verdict rule, how the records were measured
(:class:`Design`) and, optionally, numerical drift (:mod:`jaxbench.analysis.drift`).
:func:`review_versions` builds one; :mod:`jaxbench.analysis.report` writes it as Markdown.

Pairs: without a baseline or candidate, each version is compared with the one before it
(consecutive pairs, in version order); with both, just that pair; with a candidate alone, the
candidate and the version before it; with a baseline alone, the baseline and the newest version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import pairwise
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.analysis.compare import (
    COLUMNS,
    COMPILE,
    DEFAULT_COMPILE_THRESHOLD,
    STEADY_STATE,
    Comparison,
    compare_versions,
)
from jaxbench.analysis.drift import validate_drift_frame
from jaxbench.analysis.frames import Problem, case_sort_key
from jaxbench.analysis.versions import previous_version, sort_versions, version_categorical
from jaxbench.inference import verdicts

METRIC_ORDER = (STEADY_STATE, COMPILE)


class ReviewInputError(ValueError):
    """Input a review cannot use: no records, an unknown version, a bad setting or drift frame.

    The message names the bad input.
    """


@dataclass(frozen=True)
class Design:
    """How the compared records were measured, as the report's Method section states it.

    One design has one name everywhere: ``sequential`` (the versions ran in separate,
    independent processes one after another; recorded runs are measured so, and a live
    comparison run ``--back-to-back`` too). A live comparison's design is stored as its
    ``mode`` (:data:`jaxbench.store.live.Mode`: ``interleaved`` or ``back_to_back``).

    Attributes:
        name: Short name, e.g. ``"sequential"``.
        description: One paragraph of Markdown: how the versions ran and what that means for the
            comparison.
    """

    name: str
    description: str


SEQUENTIAL = Design(
    "sequential",
    "Each JAX version ran in separate processes, one version after another (one `jaxbench run` "
    "or `jaxbench submit --jax` environment per version, each run a process of its own). The "
    "records of two versions are compared over those processes: a process is summarised by the "
    "median of its calls, and the difference between the versions is judged against the "
    "spread between processes of the same version; with a single process a side there is no "
    "spread to judge by, and the verdict is `inconclusive`. Drift of the machine between runs "
    "(other load, clock, thermal state) widens that spread when the runs of the versions "
    "alternate in time (A, B, A, B, ...); a change of the machine between all runs of one "
    "version and all runs of the other is not separated from the effect of the version.",
)


@dataclass(frozen=True)
class Settings:
    """The verdict rule's settings (:func:`jaxbench.inference.verdicts.decide`).

    Attributes:
        threshold: Smallest relative steady-state change that counts (0.02 = 2 %).
        compile_threshold: The same for compile time.
        alpha: ``1 -`` the confidence level of the intervals (0.05: 95 % intervals). A
            ``slower`` call on a case that did not change has probability at most
            ``alpha / 2``, and so has a ``faster`` one (the rule:
            :func:`jaxbench.inference.verdicts.decide`, not strict).

    Raises:
        ReviewInputError: A threshold is negative or not finite, or ``alpha`` is not in (0, 1)
            (the message names the setting).
    """

    threshold: float = verdicts.DEFAULT_THRESHOLD
    compile_threshold: float = DEFAULT_COMPILE_THRESHOLD
    alpha: float = verdicts.DEFAULT_ALPHA

    def __post_init__(self) -> None:
        for name in ("threshold", "compile_threshold"):
            value = getattr(self, name)
            if not 0 <= value < float("inf"):
                raise ReviewInputError(f"{name} must be a finite number >= 0, got {value}")
        if not 0 < self.alpha < 1:
            raise ReviewInputError(f"alpha must be in (0, 1), got {self.alpha}")

    @property
    def confidence(self) -> float:
        """The confidence level of the intervals, ``1 - alpha``."""
        return 1 - self.alpha


@dataclass(frozen=True)
class Review:
    """A version-upgrade review (:func:`review_versions`).

    Attributes:
        frame: Rows of :func:`jaxbench.analysis.load_results` for the versions under review.
        problems: Files (or parts of files) that did not load.
        versions: Versions under review, oldest first (version order).
        comparisons: One per pair, in the order of :func:`version_pairs`.
        settings: Verdict settings used.
        design: How the records were measured.
        drift: Numerical drift rows (:mod:`jaxbench.analysis.drift`), or ``None`` when not
            checked.
        live: Live comparisons (:class:`jaxbench.store.CaseComparison`), or ``()``.
        sources: The results files and folders read, as given.
        calibrations: Calibration records (:class:`jaxbench.store.Calibration`) found with
            the results, or ``()``.
    """

    frame: pd.DataFrame
    problems: list[Problem]
    versions: list[str]
    comparisons: list[Comparison]
    settings: Settings
    design: Design = SEQUENTIAL
    drift: pd.DataFrame | None = None
    live: tuple[Any, ...] = field(default=())
    sources: tuple[str, ...] = field(default=())
    calibrations: tuple[Any, ...] = field(default=())

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """``(baseline, candidate)`` of each comparison."""
        return [(c.baseline, c.candidate) for c in self.comparisons]

    @cached_property
    def results(self) -> pd.DataFrame:
        """Every comparison row: ``baseline``, ``candidate``, then :data:`compare.COLUMNS`.

        In pair order, then steady state before compile time, then by case.
        """
        tables = [
            c.table.assign(baseline=c.baseline, candidate=c.candidate, pair=i)
            for i, c in enumerate(self.comparisons)
        ]
        columns = ["baseline", "candidate", *COLUMNS]
        if not tables:
            return pd.DataFrame(columns=columns)
        out = pd.concat(tables, ignore_index=True)
        out = out.assign(metric_order=out["metric"].map(METRIC_ORDER.index))
        out = out.sort_values(
            ["pair", "metric_order", "case", "condition"], ignore_index=True, key=_by_case
        )
        return out[columns]

    def verdict_rows(self, verdict: str, worst_first: bool = True) -> pd.DataFrame:
        """Rows of :attr:`results` with ``verdict``: steady state first, then by ratio.

        Args:
            verdict: One of :data:`jaxbench.inference.verdicts.VERDICTS`.
            worst_first: Largest ratio first (else smallest first).
        """
        rows = self.results[self.results["verdict"] == verdict]
        order = rows["metric"].map(METRIC_ORDER.index)
        return (
            rows.assign(metric_order=order)
            .sort_values(["metric_order", "ratio"], ascending=[True, not worst_first])
            .drop(columns="metric_order")
            .reset_index(drop=True)
        )

    @property
    def regressions(self) -> pd.DataFrame:
        """Rows of :attr:`results` called ``slower``: steady state first, largest ratio first."""
        return self.verdict_rows("slower", worst_first=True)

    @property
    def improvements(self) -> pd.DataFrame:
        """Rows called ``faster``: steady state first, smallest ratio first."""
        return self.verdict_rows("faster", worst_first=False)

    @property
    def inconclusive(self) -> pd.DataFrame:
        """Rows called ``inconclusive``, steady state first, the largest apparent change first.

        Their ``advice`` says what would settle them.
        """
        rows = self.results[self.results["verdict"] == "inconclusive"]
        moved = -np.abs(np.log(pd.to_numeric(rows["ratio"], errors="coerce")))
        return (
            rows.assign(metric_order=rows["metric"].map(METRIC_ORDER.index), moved=moved)
            .sort_values(["metric_order", "moved", "case"], na_position="last", key=_by_case)
            .drop(columns=["metric_order", "moved"])
            .reset_index(drop=True)
        )

    @property
    def unstable(self) -> pd.DataFrame:
        """Rows called ``unstable`` (the machine changed under them; ``advice`` says how)."""
        return self.verdict_rows("unstable", worst_first=True)

    def verdict_counts(self) -> dict[str, int]:
        """How many rows of :attr:`results` got each verdict, in :data:`VERDICTS` order."""
        counts = self.results["verdict"].value_counts()
        return {v: int(counts.get(v, 0)) for v in verdicts.VERDICTS}

    @property
    def not_timed(self) -> pd.DataFrame:
        """Records that give no steady state: ``version``, ``case``, ``status``, ``error``.

        Statuses ``failed``, ``skipped`` and ``recompiled``, oldest version first.
        """
        rows = self.frame[self.frame["status"] != "ok"]
        cols = ["version", "case", "status", "error"]
        return rows[cols].sort_values(["version", "case"], ignore_index=True, key=_by_case)


def _by_case(column: pd.Series) -> pd.Series:
    """``sort_values`` key: case labels with their numbers as numbers; other columns as they are."""
    return case_sort_key(column) if column.name == "case" else column


def version_pairs(
    versions: Sequence[str], baseline: str | None = None, candidate: str | None = None
) -> list[tuple[str, str]]:
    """The ``(baseline, candidate)`` pairs of a review (rules in the module docstring).

    Args:
        versions: Versions present, any order.
        baseline: The baseline, or ``None``.
        candidate: The candidate, or ``None``.

    Returns:
        The pairs; consecutive pairs are oldest first, and none when only one version is present.

    Raises:
        ReviewInputError: ``baseline`` or ``candidate`` is not among ``versions`` (the message
            names it and the versions present), they are equal, a baseline alone is the newest
            version, or a candidate alone is the oldest.
    """
    ordered = sort_versions(versions)
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if value is not None and str(value) not in ordered:
            raise ReviewInputError(
                f"unknown {name} version {str(value)!r}; versions in the results: "
                + ", ".join(ordered)
            )
    if baseline is None and candidate is None:
        return list(pairwise(ordered))
    if baseline is not None and candidate is not None:
        if str(baseline) == str(candidate):
            raise ReviewInputError(f"baseline and candidate are both {str(baseline)!r}")
        return [(str(baseline), str(candidate))]
    if candidate is not None:
        before = previous_version(ordered, str(candidate))
        if before is None:
            raise ReviewInputError(
                f"candidate {str(candidate)!r} is the oldest version: nothing to compare it with"
            )
        return [(before, str(candidate))]
    if str(baseline) == ordered[-1]:
        raise ReviewInputError(
            f"baseline {str(baseline)!r} is the newest version: nothing to compare it with"
        )
    return [(str(baseline), ordered[-1])]


def review_versions(
    frame: pd.DataFrame,
    problems: Sequence[Problem] = (),
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    settings: Settings | None = None,
    design: Design = SEQUENTIAL,
    drift: pd.DataFrame | None = None,
    live: Sequence[Any] = (),
    sources: Sequence[str] = (),
    calibrations: Sequence[Any] = (),
) -> Review:
    """Compare the versions of ``frame`` pair by pair (:func:`version_pairs`).

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.
        problems: Its problems, carried into the review.
        baseline: Baseline version, or ``None``.
        candidate: Candidate version, or ``None``.
        settings: Verdict settings; defaults when ``None``.
        design: How the records were measured.
        drift: Numerical drift rows (:data:`jaxbench.analysis.drift.DRIFT_COLUMNS`), or ``None``.
        live: Live comparisons (:class:`jaxbench.store.CaseComparison`), reported apart.
        sources: The results files and folders read, for the report's header.
        calibrations: Calibration records read with the results (the report cites them).

    Returns:
        The :class:`Review`; with a single version it has no comparisons.

    Raises:
        ReviewInputError: No records with a version, an unknown version (see
            :func:`version_pairs`), or a drift frame without the needed columns.
    """
    if frame.empty or "version" not in frame or frame["version"].isna().all():
        raise ReviewInputError("no records with a JAX version to review")
    settings = settings or Settings()
    if drift is not None:
        try:
            drift = validate_drift_frame(drift)
        except ValueError as exc:
            raise ReviewInputError(str(exc)) from None
    pairs = version_pairs(frame["version"], baseline, candidate)
    comparisons = [
        compare_versions(
            frame,
            a,
            b,
            threshold=settings.threshold,
            compile_threshold=settings.compile_threshold,
            alpha=settings.alpha,
        )
        for a, b in pairs
    ]
    versions = sort_versions([v for pair in pairs for v in pair] or frame["version"])
    rows = frame[frame["version"].astype(str).isin(versions)].copy()
    rows["version"] = version_categorical(rows["version"].astype(str))
    return Review(
        frame=rows,
        problems=list(problems),
        versions=versions,
        comparisons=comparisons,
        settings=settings,
        design=design,
        drift=drift,
        live=tuple(live),
        sources=tuple(map(str, sources)),
        calibrations=tuple(calibrations),
    )
