"""``jaxbench report``: the version-upgrade review of saved results, as Markdown with figures."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from jaxbench.cli.options import (
    Alpha,
    CompileThreshold,
    Threshold,
    check_rule_options,
    console,
    fail,
    given_path,
    say,
    writable_folder,
)


def report_cmd(
    paths: Annotated[
        list[Path],
        typer.Argument(
            parser=given_path, help="Results files or folders (runs, sweep records, asv results)."
        ),
    ],
    out: Annotated[str, typer.Option("--out", "-o", help="Folder of report.md and figures/.")],
    baseline: Annotated[
        str | None,
        typer.Option(
            help="Baseline JAX version (default: each version's predecessor; with --candidate "
            "alone, the version before it)."
        ),
    ] = None,
    candidate: Annotated[
        str | None,
        typer.Option(
            help="Candidate JAX version (default: every version but the oldest, each against "
            "its predecessor; with --baseline alone, the newest only)."
        ),
    ] = None,
    threshold: Threshold = 0.02,
    compile_threshold: CompileThreshold = 0.10,
    alpha: Alpha = 0.05,
) -> None:
    """Compare JAX versions in saved results: regressions first, compile apart; exit 2 on bad input.

    Without --baseline/--candidate each version is compared with the one before it. Intervals
    are taken over processes: a case run in one process per version is inconclusive. The report
    replaces the previous one in --out whole, at the end: Ctrl-C (exit 130) leaves it unchanged.
    One report (or review) writes into a folder at a time: a second one exits 2 naming the first.
    """
    try:  # the analysis takes seconds to import: Ctrl-C then is an interruption too
        from jaxbench.analysis.report import ReviewInputError, load_review, render_report
        from jaxbench.analysis.report_context import REPORT_NAME
        from jaxbench.analysis.review import Settings
        from jaxbench.folders import FolderBusy, remove_if_only_lock, sole_writer
        from jaxbench.store import collector_paused
    except KeyboardInterrupt:
        message = f"report interrupted while starting; nothing in {out} changed"
        raise fail(message, code=130) from None

    try:
        check_rule_options(alpha, {"--threshold": threshold,
                                   "--compile-threshold": compile_threshold})  # fmt: skip
    except ValueError as exc:
        raise fail(str(exc)) from None
    previous = Path(out) / REPORT_NAME
    before = _identity(previous)
    made = not Path(out).exists()
    try:
        settings = Settings(threshold=threshold, compile_threshold=compile_threshold, alpha=alpha)
        # a long history: see jaxbench.store.collector_paused (not while drawing: figures
        # hold reference cycles that only the collector frees)
        with collector_paused():
            review = load_review(paths, baseline=baseline, candidate=candidate,
                                 settings=settings)  # fmt: skip
        out_dir = writable_folder(out)
        with sole_writer(out_dir, "--out"):
            path = render_report(review, out_dir)
    except (FileNotFoundError, ReviewInputError, FolderBusy) as exc:
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail(_interrupted(previous, before), code=130) from None
    except OSError as exc:
        raise fail(f"cannot write the report in {out}: {exc.strerror or exc}") from None
    finally:
        if made:
            remove_if_only_lock(Path(out))  # a report that made --out and wrote nothing
    for problem in review.problems:
        say("problem:", str(problem))
    counts = review.verdict_counts()
    pairs = ", ".join(f"{a} -> {b}" for a, b in review.pairs) or "none (one version)"
    console.print(f"compared: {pairs}", highlight=False)
    console.print(
        f"regressions: {counts['slower']}, improvements: {counts['faster']}, "
        f"same: {counts['same']}, inconclusive: {counts['inconclusive']}, "
        f"unstable: {counts['unstable']}, comparisons: {len(review.results)}",
        highlight=False,
    )
    console.print(f"report: {path}", highlight=False)


def _identity(path: Path) -> tuple[int, int, int] | None:
    """``(device, inode, mtime)`` of a file, ``None`` when missing: whether it was replaced."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_mtime_ns


def _interrupted(previous: Path, before: tuple[int, int, int] | None) -> str:
    """The one line for Ctrl-C: what is at ``previous`` now."""
    if _identity(previous) != before:  # interrupted after the swap, while cleaning up
        return f"report interrupted after it was written; the new report is at {previous}"
    if before is None:
        return f"report interrupted; no report was written to {previous.parent}"
    return f"report interrupted; the previous report at {previous} is unchanged"


def register(app: typer.Typer) -> None:
    """Add ``report`` to the ``jaxbench`` command."""
    app.command("report")(report_cmd)
