"""Confirmation: live interleaved process pairs for the cases the recorded runs left open.

A recorded verdict of ``same`` is an equivalence shown, and stands. ``slower``, ``faster``,
``inconclusive`` and ``unstable`` are measured again live (``jaxbench compare --interleave``:
pairs of fresh workers, blocks interleaved at random, the interval over pairs), which cancels
the slow drifts of the machine that separate recorded runs. The comparison is saved after each
pair as ``interleave-<id>.jsonl`` in the review's folder; a case whose live comparison there
has completed its first look is not measured again, and one cut short in its first look is
completed in its own file (:func:`complete`).
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


def unfinished(
    folder: Path, baseline_jax: str, candidate_jax: str, first_look: int
) -> dict[Path, list[CaseComparison]]:
    """The files of these versions' live comparisons that were cut short in their first look.

    Returns:
        Path -> every comparison in it, for files where some ``ok`` comparison of these
        versions has at least one pair and fewer than ``first_look``.
    """
    from jaxbench.store import load

    by_file: dict[Path, list[CaseComparison]] = {}
    for item in load([folder], kinds={"live-comparison"}).of("live-comparison"):
        by_file.setdefault(Path(item.path), []).append(item.model)
    return {
        path: found
        for path, found in by_file.items()
        if any(_cut_short(c, baseline_jax, candidate_jax, first_look) for c in found)
    }


def _cut_short(c: CaseComparison, baseline_jax: str, candidate_jax: str, first_look: int) -> bool:
    sides = (c.baseline.jax if c.baseline else None, c.candidate.jax if c.candidate else None)
    own = int(c.schedule.get("pairs", first_look))
    return sides == (baseline_jax, candidate_jax) and c.status == "ok" and 0 < len(c.pairs) < own


def complete(
    path: Path,
    comparisons: list[CaseComparison],
    baseline: Variant,
    candidate: Variant,
    backend: str,
    threshold: float,
    alpha: float,
    on_pair: Callable[[int, Path], None] | None = None,
) -> list[str]:
    """Finish the first look of the comparisons cut short in ``path``, in that file.

    The pairs still missing from the first look run with the comparisons' own saved design
    (rounds, blocks, warm-up; the seed moved on by the pairs done), whatever the command asks
    now, and each is added to its comparison: what was measured before the interruption is kept
    and pooled, the pairs being independent whenever they ran. A resumed comparison stops at
    its first look. The file is rewritten after every pair.

    Args:
        path: The file.
        comparisons: Every comparison in it (:func:`unfinished`); the others are kept as read.
        baseline: Side A, as it ran (the same versions).
        candidate: Side B.
        backend: Backend of the workers.
        threshold: The verdicts' threshold.
        alpha: Their level.
        on_pair: Called with the pair's number in the comparison (from 1) and the path.

    Returns:
        The labels of the comparisons completed.
    """
    short = [c for c in comparisons if c.status == "ok"
             and 0 < len(c.pairs) < int(c.schedule.get("pairs", 0))]  # fmt: skip
    done = min(len(c.pairs) for c in short)
    saved = short[0].schedule
    fields = ("pairs_step", "rounds", "calls_per_block", "warmup_rounds", "warmup_calls")
    rest = Schedule(pairs=saved["pairs"] - done, max_pairs=saved["pairs"] - done,
                    seed=int(saved.get("seed", 0)) + done,
                    **{f: int(saved[f]) for f in fields if f in saved})  # fmt: skip
    count = [done]

    def save(new: list[CaseComparison]) -> None:
        merged = {id(old): _pooled(old, add) for old, add in zip(short, new, strict=True)}
        write_jsonl(path, [merged.get(id(c), c) for c in comparisons])
        count[0] += 1
        if on_pair is not None:
            on_pair(count[0], path)

    run_interleaved(baseline, candidate, [(c.workload, dict(c.params)) for c in short], backend,
                    rest, on_pair=save, threshold=threshold, alpha=alpha)  # fmt: skip
    return [c.label for c in short]


def _pooled(old: CaseComparison, new: CaseComparison) -> CaseComparison:
    """``old`` with the pairs of ``new`` after its own, numbered on."""
    for pair in new.pairs:
        old = old.with_pair(pair.model_copy(update={"index": len(old.pairs)}))
    if new.status != "ok" and old.status == "ok":
        old = old.model_copy(update={"status": new.status, "error": new.error})
    return old
