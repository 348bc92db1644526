"""Confirmation: live interleaved process pairs for the cases the recorded runs left open.

A recorded verdict of ``same`` is an equivalence shown, and stands. ``slower``, ``faster``,
``inconclusive`` and ``unstable`` are measured again live (``jaxbench compare --interleave``:
pairs of fresh workers, blocks interleaved at random, the interval over pairs), which cancels
the slow drifts of the machine that separate recorded runs. The pairs run through the one live
runner (:func:`jaxbench.interleave.run_live`), saved after each pair as
``interleave-<id>.jsonl`` in the review's folder; a case whose live comparison there has
completed its first look is not measured again (:func:`finished`), and a file cut short in its
first look (:func:`unfinished`) is completed in place (:func:`jaxbench.interleave.resume_live`).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from jaxbench.analysis.compare import STEADY_STATE
from jaxbench.interleave.runner import cut_short_files
from jaxbench.store import CaseComparison

#: Recorded verdicts that a live comparison confirms or settles.
TO_CONFIRM = ("slower", "faster", "inconclusive", "unstable")


def open_cases(results: pd.DataFrame, labels: Iterable[str]) -> list[str]:
    """The labels among ``labels`` whose recorded steady-state verdict is in :data:`TO_CONFIRM`.

    Args:
        results: :attr:`jaxbench.analysis.review.Review.results` of the one pair reviewed.
        labels: The selected cases' record labels.

    A case with several rows (conditions kept apart) is open when any row is.
    """
    rows = results[(results["metric"] == STEADY_STATE) & results["verdict"].isin(TO_CONFIRM)]
    found = set(rows["case"])
    return [label for label in labels if label in found]


def finished(
    live: Iterable[CaseComparison], baseline_jax: str, candidate_jax: str, first_look: int
) -> dict[str, CaseComparison]:
    """Live comparisons of these versions on disk that completed a first look, by case label.

    A comparison's first look is its own schedule's (``first_look`` where it has none). The
    latest of several is kept; failed or recompiled ones count as finished (their status is
    the finding).
    """
    out: dict[str, CaseComparison] = {}
    for c in live:
        if c.baseline is None or c.candidate is None:
            continue
        if (c.baseline.jax, c.candidate.jax) != (baseline_jax, candidate_jax):
            continue
        if c.status == "ok" and len(c.pairs) < int(c.schedule.get("pairs", first_look)):
            continue
        out[c.label] = c
    return out


def unfinished(
    folder: Path, baseline_jax: str, candidate_jax: str, first_look: int
) -> dict[Path, list[CaseComparison]]:
    """The files of these versions' live comparisons that were cut short in their first look.

    Returns:
        Path -> every comparison in it, for files of these versions only where some ``ok``
        comparison has at least one pair and fewer than its schedule's first look
        (``first_look`` where it has none): the files for
        :func:`jaxbench.interleave.resume_live` (:func:`jaxbench.interleave.cut_short_files`).
    """

    def ran(c: CaseComparison) -> bool:
        sides = (c.baseline.jax if c.baseline else None, c.candidate.jax if c.candidate else None)
        return sides == (baseline_jax, candidate_jax)

    return cut_short_files(folder, ran, first_look)
