"""Change points of a case's latency over a series of commits, by asv's own step detection.

A series is one case under one measurement condition (:mod:`jaxbench.analysis.conditions`),
its points the commits in order. Each commit's value is the median, over the processes that
timed the case at that commit, of each process's median call: the process is the unit, as
everywhere in jaxbench (an asv result file is one process). The values, weighted by their
number of processes, go to ``asv.step_detect.detect_steps`` (asv's Potts-model segmentation,
the one ``asv publish`` uses for its regression list), which splits the series into
piecewise-constant segments. Each boundary between two segments is a change point: it happened
after the last commit of the segment before and at or before the first commit of the one after,
and its size is the ratio of the two segments' values. Boundaries smaller than ``min_change``
are not reported.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from jaxbench.analysis.conditions import CONDITION
from jaxbench.analysis.frames import samples_frame

DEFAULT_MIN_CHANGE = 0.05


@dataclass(frozen=True)
class ChangePoint:
    """A step in one series.

    Attributes:
        case: Benchmark and parameters.
        condition: The measurement condition of the series.
        last_before: The last commit of the segment before the step.
        first_after: The first commit of the segment after it: the change is in
            ``last_before..first_after`` (``git log last_before..first_after``).
        before_s: The segment's value before the step (seconds, the median latency).
        after_s: The value after it.
        commits_before: Commits in the segment before.
        commits_after: Commits in the segment after.
    """

    case: str
    condition: str
    last_before: str
    first_after: str
    before_s: float
    after_s: float
    commits_before: int
    commits_after: int

    @property
    def ratio(self) -> float:
        """``after_s / before_s``: above 1 is slower."""
        return self.after_s / self.before_s


def first_parent_order(repo: Path | str = ".") -> list[str]:
    """The commits of ``repo``'s ``HEAD``, oldest first, along its first parents.

    The order ``asv publish`` plots a branch in (``git rev-list --first-parent``).

    Raises:
        ValueError: ``repo`` is not a git repository.
    """
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--reverse", "HEAD"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise ValueError(f"{repo}: not a git repository ({proc.stderr.strip()})")
    return proc.stdout.split()


def commit_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Per case, condition and commit: the median of its processes' median calls.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` with ``commit``.

    Returns:
        Columns ``case``, ``condition``, ``commit``, ``value_s`` (seconds) and ``processes``.
    """
    timed = frame[(frame["status"] == "ok") & frame["commit"].notna()]
    samples = samples_frame(timed) if not timed.empty else pd.DataFrame()
    if samples.empty:
        return pd.DataFrame(columns=["case", CONDITION, "commit", "value_s", "processes"])
    keys = ["case", CONDITION, "commit"]
    per_process = samples.groupby([*keys, "process"])["latency_s"].median().reset_index()
    return (
        per_process.groupby(keys)["latency_s"].agg(value_s="median", processes="size").reset_index()
    )


def placed_values(frame: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """:func:`commit_values` of the commits in ``order``, each with its place, oldest first.

    Args:
        frame: As :func:`change_points`.
        order: As :func:`change_points`.

    Returns:
        The columns of :func:`commit_values` and ``position`` (the commit's index in
        ``order``); rows of commits not in ``order`` are left out.
    """
    values = commit_values(frame)
    position: dict[str, int] = {}
    for i, commit in enumerate(order):
        position.setdefault(commit, i)
    values["position"] = [_position(c, position, order) for c in values["commit"]]
    return values.dropna(subset=["position"]).sort_values("position")


def change_points(
    frame: pd.DataFrame, order: Sequence[str], min_change: float = DEFAULT_MIN_CHANGE
) -> list[ChangePoint]:
    """The change points of every series in ``frame``, biggest first.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` with ``commit``.
        order: Commits oldest first (e.g. :func:`first_parent_order`); a commit may be given by
            a prefix of its hash. Rows of commits not in it are left out.
        min_change: Smallest relative change reported (0.05: 5 %).

    Returns:
        One :class:`ChangePoint` per reported step, by ``|log ratio|``, largest first.

    Raises:
        ImportError: asv is not installed (``asv`` extra).
        ValueError: ``min_change`` is negative.
    """
    from asv.step_detect import detect_steps

    if min_change < 0:
        raise ValueError(f"min_change must be >= 0, got {min_change!r}")
    values = placed_values(frame, order)
    found = []
    for (case, condition), series in values.groupby(["case", CONDITION], sort=True):
        if len(series) < 2:
            continue
        y = series["value_s"].to_numpy(float)
        commits = series["commit"].tolist()
        steps = detect_steps(list(y), list(series["processes"].to_numpy(float)))
        for left, right in itertools.pairwise(steps):
            before, after = float(left[2]), float(right[2])
            if abs(after / before - 1) < min_change:
                continue
            found.append(
                ChangePoint(
                    case,
                    condition,
                    commits[left[1] - 1],
                    commits[right[0]],
                    before,
                    after,
                    left[1] - left[0],
                    right[1] - right[0],
                )
            )
    return sorted(found, key=lambda c: -abs(np.log(c.ratio)))


def _position(commit: str, position: dict[str, int], order: Sequence[str]) -> float:
    if commit in position:
        return position[commit]
    matches = [i for i, c in enumerate(order) if c.startswith(commit) or commit.startswith(c)]
    return matches[0] if matches else np.nan
