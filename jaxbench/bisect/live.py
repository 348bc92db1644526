"""The judge of a bisection: two releases compared live, in pairs of fresh worker processes.

Each comparison is ``jaxbench compare --interleave`` of one release's environment against
another's (:func:`jaxbench.interleave.run_live`: pairs of processes, blocks interleaved in random
order, the interval over pairs) on the cases still in question, saved as
``interleave-<id>.jsonl`` in the output folder after every pair, so an interrupted bisection
keeps every comparison it finished and the pairs of the one it was in. Run again into the same
folder, it reuses each comparison there that finished with the same releases, case, design
(:class:`~jaxbench.interleave.Schedule`) and backend, and measures the rest.
"""

from __future__ import annotations

import dataclasses
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
        self._on_disk: list[tuple[Path, CaseComparison]] | None = None

    def __call__(self, before: str, after: str, labels: Sequence[str]) -> dict[str, Judgement]:
        """``{label: Judgement}`` of ``after`` against ``before`` for each case label.

        Raises:
            jaxbench.interleave.LiveStopped: Interrupted, or a worker could not start or
                died (the pairs finished are in the comparison's file).
        """
        got: dict[str, Judgement] = {}
        for path, c in self._finished(before, after, labels):
            if path not in self.paths:
                self.paths.append(path)
            got[c.label] = self.judgement(c)
            if self.on_done is not None:
                self.on_done(path, before, after, {c.label: got[c.label]})
        todo = [label for label in labels if label not in got]
        if todo:
            a = Variant(before, self.python_of(before), {})
            b = Variant(after, self.python_of(after), {})
            path = live_path(self.out)

            def saved(pairs: int, path: Path) -> None:
                if self.on_pair is not None:
                    self.on_pair(before, after, pairs)

            found = run_live(a, b, [self.cases[label] for label in todo], path, self.backend,
                             self.schedule, threshold=self.threshold, alpha=self.alpha,
                             on_saved=saved).comparisons  # fmt: skip
            self.paths.append(path)
            new = {label: self.judgement(c) for label, c in zip(todo, found, strict=True)}
            got |= new
            if self.on_done is not None:
                self.on_done(path, before, after, new)
        return {label: got[label] for label in labels}

    def _finished(
        self, before: str, after: str, labels: Sequence[str]
    ) -> list[tuple[Path, CaseComparison]]:
        """The comparisons already in :attr:`out` to reuse, with their files: one a label.

        A comparison counts where it finished its first look (or failed: its status is the
        finding), of ``after`` against ``before`` by their labels, under this design and
        backend; the latest of several. Files are read once, at the first call.
        """
        from jaxbench.store import load

        if self._on_disk is None:
            found = load([self.out], kinds={"live-comparison"}) if self.out.is_dir() else None
            self._on_disk = [(Path(i.path), i.model) for i in found.items] if found else []
        design = dataclasses.asdict(self.schedule)
        out: dict[str, tuple[Path, CaseComparison]] = {}
        for path, c in self._on_disk:
            sides = (c.baseline.label, c.candidate.label) if c.baseline and c.candidate else ()
            if (c.label not in labels or sides != (before, after) or c.schedule != design
                    or c.mode != "interleaved" or not _finished_first_look(c)
                    or self.backend not in ("default", c.baseline.backend)):  # fmt: skip
                continue
            out[c.label] = (path, c)
        return list(out.values())

    def judgement(self, comparison: CaseComparison) -> Judgement:
        """The verdict and ratio of one live comparison (``failed`` with its error if none)."""
        try:
            e = estimate(comparison, self.threshold, self.alpha)
        except ValueError as exc:
            return Judgement("failed", note=str(exc))
        return Judgement(e.verdict, e.ratio, e.ci_low, e.ci_high, e.advice)


def _finished_first_look(c: CaseComparison) -> bool:
    """Whether a comparison has every pair of its first look, or failed (its finding)."""
    return c.status != "ok" or len(c.pairs) >= int(c.schedule.get("pairs", 0)) > 0
