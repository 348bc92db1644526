"""Confirmation: live interleaved process pairs for the cases the recorded runs left open.

A recorded verdict of ``same`` is an equivalence shown, and stands. ``slower``, ``faster``,
``inconclusive`` and ``unstable`` are measured again live (``jaxbench compare --interleave``:
pairs of fresh workers, blocks interleaved at random, the interval over pairs), which cancels
the slow drifts of the machine that separate recorded runs. The comparison is saved after each
pair as ``interleave-<id>.jsonl`` in the review's folder; a case whose live comparison there
has completed its first look is not measured again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import pandas as pd

from jaxbench.analysis.compare import STEADY_STATE
from jaxbench.interleave import Schedule, Variant, run_interleaved
from jaxbench.store import CaseComparison, new_run_id, write_jsonl

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

    The latest of several is kept; failed or recompiled ones count as finished (their status
    is the finding).
    """
    out: dict[str, CaseComparison] = {}
    for c in live:
        if c.baseline is None or c.candidate is None:
            continue
        if (c.baseline.jax, c.candidate.jax) != (baseline_jax, candidate_jax):
            continue
        if c.status == "ok" and len(c.pairs) < first_look:
            continue
        out[c.label] = c
    return out


def confirm(
    baseline: Variant,
    candidate: Variant,
    cases: Sequence[tuple[str, dict]],
    backend: str,
    schedule: Schedule,
    folder: Path,
    threshold: float,
    alpha: float,
    on_pair: Callable[[int, Path], None] | None = None,
) -> Path:
    """Compare ``cases`` live, saving ``folder/interleave-<id>.jsonl`` after every pair.

    Returns:
        The file's path.

    Raises:
        jaxbench.interleave.WorkerError: A worker could not start or died (the pairs
            finished before are in the file).
    """
    path = folder / f"interleave-{new_run_id()}.jsonl"
    count = [0]

    def save(done: list[CaseComparison]) -> None:
        write_jsonl(path, done)
        count[0] += 1
        if on_pair is not None:
            on_pair(count[0], path)

    run_interleaved(baseline, candidate, list(cases), backend, schedule, on_pair=save,
                    threshold=threshold, alpha=alpha)  # fmt: skip
    return path
