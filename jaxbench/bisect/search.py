"""Where in a sequence of releases did each case's time step, and which release was first slow.

The releases ``r_0`` (GOOD) to ``r_n`` (BAD) are ordered. A *judge* compares two releases on a
list of cases and gives each case a :class:`Judgement`: ``r_b``'s time over ``r_a``'s with its
interval over processes and its verdict (the trust issue's: ``slower``, ``faster``, ``same``,
``inconclusive``, ``unstable``; or ``failed``). Two strategies:

- ``sweep`` (every release): each ``r_i`` is judged against GOOD. A *boundary* is a pair of
  neighbours whose verdicts against GOOD differ, or that are both ``slower`` (or both
  ``faster``) with ratios more than the threshold apart, or whose verdict is not ``same``,
  ``slower`` or ``faster`` (so that an unsettled release cannot hide a step). Each boundary's
  neighbours are then judged against each other: ``slower`` or ``faster`` there is a *step*;
  anything else is kept as an unconfirmed boundary (a change that crept in over several
  releases, each below the threshold, or one the data could not settle). A step that is later
  undone (a recovery) is found, as is a second step in the same direction.
- ``binary``: the interval ``[r_0, r_n]`` is judged end to end; where a case is not ``same``
  it is split in two and each half judged, down to neighbours, which are steps or unconfirmed
  boundaries as above. Every step whose effect does not cancel within an interval is found in
  about ``k log2 n`` comparisons for ``k`` steps; a step later undone inside the same interval
  reads ``same`` end to end and is missed (the JAX docs warn of this: "Investigating a
  regression"), which is why ``sweep`` is the default for short ranges.

The first slow release of a case is the later release of its earliest ``slower`` step.
Nothing here times anything: the judge does (:mod:`jaxbench.bisect.live`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

STRATEGIES = ("sweep", "binary")
#: Verdicts that name a change.
CHANGED = ("slower", "faster")


@dataclass(frozen=True)
class Judgement:
    """One case, one release against another.

    Attributes:
        verdict: ``slower``, ``faster``, ``same``, ``inconclusive``, ``unstable`` or ``failed``.
        ratio: Time of the later release over the earlier one's (``nan`` when failed).
        ci_low: Lower end of its interval over processes (``nan`` without one).
        ci_high: Upper end.
        note: Why it failed, or what would settle it; may be empty.
    """

    verdict: str
    ratio: float = math.nan
    ci_low: float = math.nan
    ci_high: float = math.nan
    note: str = ""

    def text(self) -> str:
        """``slower 1.21 [1.12, 1.31]``, or the verdict alone without a ratio."""
        if math.isnan(self.ratio):
            return self.verdict
        return f"{self.verdict} {self.ratio:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}]"


#: ``judge(baseline release, candidate release, cases) -> {case: Judgement}``.
Judge = Callable[[str, str, Sequence[str]], dict[str, Judgement]]


@dataclass(frozen=True)
class Boundary:
    """Two neighbouring releases judged against each other for one case.

    Attributes:
        case: The case's label.
        before: The earlier release.
        after: The later one.
        judgement: ``after`` against ``before``.
    """

    case: str
    before: str
    after: str
    judgement: Judgement

    @property
    def is_step(self) -> bool:
        """The time moved between these neighbours: ``slower`` or ``faster``."""
        return self.judgement.verdict in CHANGED


@dataclass
class Bisection:
    """What a search found.

    Attributes:
        strategy: ``sweep`` or ``binary``.
        releases: ``r_0`` (GOOD) to ``r_n`` (BAD).
        cases: Case labels.
        against_good: ``{release: {case: Judgement}}`` against GOOD (every release for
            ``sweep``; the releases that were judged against GOOD for ``binary``).
        comparisons: Every comparison made, ``(before, after, case, Judgement)``, in order.
        boundaries: Every pair of neighbours judged: the steps and the unconfirmed ones.
    """

    strategy: str
    releases: list[str]
    cases: list[str]
    against_good: dict[str, dict[str, Judgement]] = field(default_factory=dict)
    comparisons: list[tuple[str, str, str, Judgement]] = field(default_factory=list)
    boundaries: list[Boundary] = field(default_factory=list)

    @property
    def steps(self) -> list[Boundary]:
        """The boundaries where the time moved, in release order."""
        order = {r: i for i, r in enumerate(self.releases)}
        found = [b for b in self.boundaries if b.is_step]
        return sorted(found, key=lambda b: (b.case, order[b.after]))

    def first_slow(self, case: str) -> str | None:
        """The first release of ``case`` after which it is slower, or ``None``."""
        slower = [b.after for b in self.steps if b.case == case and b.judgement.verdict == "slower"]
        return slower[0] if slower else None


class _Memo:
    """A judge that asks each (before, after, case) once and records every answer."""

    def __init__(self, judge: Judge, result: Bisection) -> None:
        self.judge = judge
        self.result = result
        self.seen: dict[tuple[str, str, str], Judgement] = {}

    def __call__(self, before: str, after: str, cases: Sequence[str]) -> dict[str, Judgement]:
        todo = [c for c in cases if (before, after, c) not in self.seen]
        if todo:
            answer = self.judge(before, after, todo)
            for case in todo:
                got = answer.get(case, Judgement("failed", note="the judge gave no answer"))
                self.seen[(before, after, case)] = got
                self.result.comparisons.append((before, after, case, got))
        return {c: self.seen[(before, after, c)] for c in cases}


def _log(ratio: float) -> float:
    return math.log(ratio) if ratio > 0 and math.isfinite(ratio) else math.nan


def _needs_a_look(left: Judgement, right: Judgement, threshold: float) -> bool:
    """Whether neighbours with these verdicts against GOOD may have a step between them."""
    if left.verdict != right.verdict:
        return True
    if left.verdict not in ("same", *CHANGED):
        return True  # unsettled on both sides: only a direct comparison can tell
    if left.verdict == "same":
        return False
    gap = abs(_log(right.ratio) - _log(left.ratio))
    return not gap <= math.log1p(threshold)  # nan (no ratio) looks too


def sweep(releases: Sequence[str], cases: Sequence[str], judge: Judge,
          threshold: float) -> Bisection:  # fmt: skip
    """Judge every release against GOOD, then the neighbours of each boundary.

    Args:
        releases: ``r_0`` (GOOD) to ``r_n`` (BAD), at least two.
        cases: Case labels.
        judge: See :data:`Judge`.
        threshold: The verdicts' threshold (0.02 = 2 %): neighbours both ``slower`` with
            ratios further apart than this are judged against each other.

    Raises:
        ValueError: Fewer than two releases.
    """
    result = _start("sweep", releases, cases)
    ask = _Memo(judge, result)
    good = releases[0]
    level = {good: dict.fromkeys(cases, Judgement("same", 1.0, 1.0, 1.0))}
    for release in releases[1:]:
        level[release] = ask(good, release, cases)
        result.against_good[release] = level[release]
    for before, after in itertools.pairwise(releases):
        look = [c for c in cases if _needs_a_look(level[before][c], level[after][c], threshold)]
        if look:
            for case, got in ask(before, after, look).items():
                result.boundaries.append(Boundary(case, before, after, got))
    return result


def binary(releases: Sequence[str], cases: Sequence[str], judge: Judge) -> Bisection:
    """Split each interval whose ends differ until the steps are between neighbours.

    Args:
        releases: ``r_0`` (GOOD) to ``r_n`` (BAD), at least two.
        cases: Case labels.
        judge: See :data:`Judge`.

    Raises:
        ValueError: Fewer than two releases.
    """
    result = _start("binary", releases, cases)
    ask = _Memo(judge, result)

    def split(lo: int, hi: int, active: Sequence[str]) -> None:
        got = ask(releases[lo], releases[hi], active)
        if lo == 0:
            result.against_good.setdefault(releases[hi], {}).update(got)
        moved = [c for c in active if got[c].verdict != "same"]
        if hi == lo + 1:
            for case in moved:
                result.boundaries.append(Boundary(case, releases[lo], releases[hi], got[case]))
            return
        explore = [c for c in moved if got[c].verdict != "failed"]
        if explore:
            mid = (lo + hi) // 2
            split(lo, mid, explore)
            split(mid, hi, explore)

    split(0, len(releases) - 1, list(cases))
    return result


def search(strategy: str, releases: Sequence[str], cases: Sequence[str], judge: Judge,
           threshold: float) -> Bisection:  # fmt: skip
    """:func:`sweep` or :func:`binary` by name.

    Raises:
        ValueError: An unknown strategy, or fewer than two releases.
    """
    if strategy == "sweep":
        return sweep(releases, cases, judge, threshold)
    if strategy == "binary":
        return binary(releases, cases, judge)
    raise ValueError(f"--strategy {strategy!r}: expected {' or '.join(STRATEGIES)}")


def _start(strategy: str, releases: Sequence[str], cases: Sequence[str]) -> Bisection:
    if len(releases) < 2:
        raise ValueError(f"a search needs at least two releases, got {list(releases)}")
    return Bisection(strategy, list(releases), list(cases))
