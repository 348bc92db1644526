"""The judge of a bisection: two releases compared live, in pairs of fresh worker processes.

Each comparison is ``jaxbench compare --interleave`` of one release's environment against
another's (:func:`jaxbench.interleave.run_live`: pairs of processes, blocks interleaved in random
order, the interval over pairs) on the cases still in question, saved as
``interleave-<id>.jsonl`` in the output folder after every pair, so an interrupted bisection
keeps every comparison it finished and the pairs of the one it was in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from jaxbench.bisect.search import Judgement
from jaxbench.interleave import Schedule, Variant, estimate, live_path, run_live
from jaxbench.store import CaseComparison


class LiveJudge:
    """Judges ``after`` against ``before`` with live interleaved pairs.

    Args:
        python_of: Release -> the interpreter of its environment (built on first use).
        cases: Case label -> ``(workload, params)``.
        backend: Backend of the workers.
        schedule: Pairs, rounds and blocks of each comparison.
        threshold: The verdicts' threshold.
        alpha: Their level.
        out: Folder of the ``interleave-<id>.jsonl`` files (:attr:`paths`: those finished).
        on_done: Called with each comparison's path and its judgements, once saved.
        on_pair: Called with ``(before, after, pairs so far)`` after each process pair.
    """

    def __init__(
        self,
        python_of: Callable[[str], str],
        cases: dict[str, tuple[str, dict[str, Any]]],
        backend: str,
        schedule: Schedule,
        threshold: float,
        alpha: float,
        out: Path,
        on_done: Callable[[Path, str, str, dict[str, Judgement]], None] | None = None,
        on_pair: Callable[[str, str, int], None] | None = None,
    ) -> None:
        self.python_of = python_of
        self.cases = cases
        self.backend = backend
        self.schedule = schedule
        self.threshold = threshold
        self.alpha = alpha
        self.out = out
        self.on_done = on_done
        self.on_pair = on_pair
        self.paths: list[Path] = []

    def __call__(self, before: str, after: str, labels: Sequence[str]) -> dict[str, Judgement]:
        """``{label: Judgement}`` of ``after`` against ``before`` for each case label.

        Raises:
            jaxbench.interleave.LiveStopped: Interrupted, or a worker could not start or
                died (the pairs finished are in the comparison's file).
        """
        a = Variant(before, self.python_of(before), {})
        b = Variant(after, self.python_of(after), {})
        path = live_path(self.out)

        def saved(pairs: int, path: Path) -> None:
            if self.on_pair is not None:
                self.on_pair(before, after, pairs)

        found = run_live(a, b, [self.cases[label] for label in labels], path, self.backend,
                         self.schedule, threshold=self.threshold, alpha=self.alpha,
                         on_saved=saved).comparisons  # fmt: skip
        self.paths.append(path)
        got = {label: self.judgement(c) for label, c in zip(labels, found, strict=True)}
        if self.on_done is not None:
            self.on_done(path, before, after, got)
        return got

    def judgement(self, comparison: CaseComparison) -> Judgement:
        """The verdict and ratio of one live comparison (``failed`` with its error if none)."""
        try:
            e = estimate(comparison, self.threshold, self.alpha)
        except ValueError as exc:
            return Judgement("failed", note=str(exc))
        return Judgement(e.verdict, e.ratio, e.ci_low, e.ci_high, e.advice)
