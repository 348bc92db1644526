"""``jaxbench steps``: change points of each case over the commits of saved results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from jaxbench.cli.options import console, fail, given_path, say


def steps_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            parser=given_path,
            help="Results files or folders over commits (asv results, runs, sweeps).",
        ),
    ],
    repo: Annotated[
        Path, typer.Option(help="Git checkout whose first-parent history orders the commits.")
    ] = Path("."),
    min_change: Annotated[
        float, typer.Option(help="Smallest change reported (0.05 = 5 %).")
    ] = 0.05,
) -> None:
    """Find where each case's latency stepped, by asv's step detection; print the commit range.

    Each commit's value is the median over the processes that timed it (an asv result file is
    one process); commits are in the order of `git rev-list --first-parent HEAD` of --repo.
    """
    from jaxbench.analysis import load_results
    from jaxbench.analysis.conditions import CONDITION
    from jaxbench.analysis.steps import change_points, first_parent_order, placed_values
    from jaxbench.units import fmt_seconds

    if not 0 <= min_change < 10:
        raise fail(f"--min-change {min_change}: expected a fraction >= 0 (0.05 = 5 %)")
    try:  # the paths first: a typo in them is the likelier mistake
        frame, problems = load_results(paths)
    except (ValueError, FileNotFoundError) as exc:
        raise fail(str(exc)) from None
    try:
        order = first_parent_order(repo)
    except ValueError as exc:
        raise fail(f"--repo {exc}") from None
    for problem in problems:
        say("skipped:", f"{problem.path}: {problem.reason}")
    if frame.empty or "commit" not in frame or frame["commit"].isna().all():
        raise fail("no records with a commit in " + ", ".join(map(str, paths)))
    found = change_points(frame, order, min_change)
    if not found:
        placed = placed_values(frame, order)
        lengths = placed.groupby(["case", CONDITION]).size()
        longest = int(lengths.max()) if len(lengths) else 0
        left_out = set(frame["commit"].dropna()) - set(placed["commit"])
        said = (f"no change of {min_change:.0%} or more in any case: {len(lengths)} series "
                f"(a case under one condition) examined, the longest over {longest} commit(s) "
                f"of --repo's first-parent history")  # fmt: skip
        if longest < 2:
            said += "; a step needs at least 2 commits"
        if left_out:
            said += (f"; {len(left_out)} recorded commit(s) are not in that history, left out "
                     f"(e.g. {min(left_out)})")  # fmt: skip
        console.print(said, highlight=False, soft_wrap=True)
        return
    table = Table(title=f"change points ({min_change:.0%} or more), largest first")
    for col in ("case", "condition", "commits", "before", "after", "change"):
        table.add_column(col, justify="right" if col in ("before", "after", "change") else "left")
    for c in found:
        table.add_row(
            c.case, c.condition, f"{c.last_before[:8]}..{c.first_after[:8]}",
            fmt_seconds(c.before_s), fmt_seconds(c.after_s), f"{c.ratio - 1:+.1%}",
        )  # fmt: skip
    console.print(table)


def register(app: typer.Typer) -> None:
    """Add ``steps`` to the ``jaxbench`` command."""
    app.command("steps")(steps_cmd)
