"""The version-upgrade report: ``report.md`` and its PNG figures, from results of several versions.

It answers which train steps, compiles and forward-mode products got slower or faster between
JAX versions, by how much, and whether the change is real. The report is a list of sections
(:data:`DEFAULT_SECTIONS`), each a function ``(ReportContext) -> str`` returning Markdown, so
another section (e.g. interleaved results, numerical drift from another module) is one more
function in the list::

    from jaxbench.analysis.report import DEFAULT_SECTIONS, write_report

    write_report(["results/versions"], "review")  # -> review/report.md, review/figures/*.png
    write_report(paths, "review", sections=[*DEFAULT_SECTIONS, my_section])

Section order: header (with the count of every verdict), regressions (every ``slower`` row of
every pair), improvements (``faster``), live (interleaved or back-to-back) comparisons when the
results hold any (with the recorded verdict of the same case beside each), inconclusive and
unstable rows (what would settle them, or why the machine is suspect), the full tables per pair
(steady state and compile time apart), versions and environment (with the drift column),
numerical drift, records not timed, figures (latency violins and ECDFs, compile time,
forward-mode crossover), rows kept apart and unmatched cases, problems, method (the unit, the
verdict rule and its error rate).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from jaxbench.analysis import verdicts
from jaxbench.analysis.compare import DEFAULT_COMPILE_THRESHOLD
from jaxbench.analysis.frames import load_results
from jaxbench.analysis.report_context import FIGURES, REPORT_NAME, ReportContext, Section
from jaxbench.analysis.report_figures import FIGURE_SECTIONS
from jaxbench.analysis.report_live import live_section
from jaxbench.analysis.report_method import calibration_section, method_section
from jaxbench.analysis.report_tables import (
    drift_section,
    environment_section,
    header_section,
    improvements_section,
    inconclusive_section,
    kept_apart_section,
    not_timed_section,
    pairs_section,
    problems_section,
    regressions_section,
)
from jaxbench.analysis.review import (
    SEQUENTIAL,
    Mode,
    Review,
    ReviewInputError,
    Settings,
    review_versions,
)
from jaxbench.results import DRIFT_FILE_PREFIX

#: The sections of a report, in order; append to a copy to extend a report.
DEFAULT_SECTIONS: tuple[Section, ...] = (
    header_section,
    regressions_section,
    improvements_section,
    live_section,
    inconclusive_section,
    pairs_section,
    environment_section,
    drift_section,
    not_timed_section,
    *FIGURE_SECTIONS,
    kept_apart_section,
    problems_section,
    calibration_section,
    method_section,
)


def render_report(
    review: Review, out_dir: str | os.PathLike[str], sections: Sequence[Section] | None = None
) -> Path:
    """Write ``out_dir/report.md`` and its figures for a review.

    PNGs already in ``out_dir/figures/`` are removed first, so the folder holds exactly the
    figures the report links.

    Args:
        review: From :func:`jaxbench.analysis.review.review_versions`.
        out_dir: Folder of the report, created if needed.
        sections: Sections in order; :data:`DEFAULT_SECTIONS` when ``None``.

    Returns:
        The path of ``report.md``.

    Raises:
        OSError: ``out_dir`` cannot be created or written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for stale in (out / FIGURES).glob("*.png"):
        stale.unlink()
    ctx = ReportContext(review=review, out_dir=out)
    parts = [text.strip() for section in (sections or DEFAULT_SECTIONS) if (text := section(ctx))]
    path = out / REPORT_NAME
    path.write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    return path


#: Name prefix of live comparison files (:data:`jaxbench.interleave.result.FILE_PREFIX`).
LIVE_FILE_PREFIX = "interleave-"


class Sources(NamedTuple):
    """The paths each loader of :func:`load_review` reads."""

    results: list[Path]
    drift: list[Path]
    live: list[Path]


def sources_by_kind(paths: Iterable[str | os.PathLike[str]]) -> Sources:
    """Which loader reads which path: a folder goes to every loader, a file only to its own.

    A file named explicitly is a drift check when its name starts with ``drift-``, a live
    comparison when it starts with ``interleave-``, and timing records otherwise. Handing it to
    the other loaders too would list a file that loaded as one that did not (a run file is not a
    drift file). A file inside a named folder is left to the folder, so it is read once.

    Args:
        paths: Files or folders, as named.
    """
    out = Sources([], [], [])
    paths = list(map(Path, paths))
    folders = [p.resolve() for p in paths if p.is_dir()]
    for p in paths:
        if p.is_file() and any(f in p.resolve().parents for f in folders):
            continue  # a named folder holds it: read once
        if p.is_dir():
            out.results.append(p)
            out.drift.append(p)
            out.live.append(p)
        elif p.name.startswith(DRIFT_FILE_PREFIX):
            out.drift.append(p)
        elif p.name.startswith(LIVE_FILE_PREFIX):
            out.live.append(p)
        else:  # a missing path too: load_results names it
            out.results.append(p)
    return out


def load_review(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    settings: Settings | None = None,
    mode: Mode = SEQUENTIAL,
    drift: pd.DataFrame | None = None,
) -> Review:
    """Load results and review them (:func:`load_results` then :func:`review_versions`).

    Args:
        paths: Results files or folders.
        baseline: Baseline version, or ``None`` (see :func:`.review.version_pairs`).
        candidate: Candidate version, or ``None``.
        settings: Verdict settings; defaults when ``None``.
        mode: How the records were measured.
        drift: Numerical drift rows; ``None`` loads the drift checks found under ``paths``
            (:func:`jaxbench.drift.load_drift`; none found: not checked).

    Live comparisons found under ``paths`` (``interleave-*.jsonl``) are loaded too; files of
    either kind that do not load join the problems. Each file named explicitly is read by the
    loader of its kind only (:func:`sources_by_kind`).

    Raises:
        FileNotFoundError: A named path does not exist.
        ReviewInputError: No records loaded (the message names the files that failed), an
            unknown version, a bad setting or drift frame.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = list(paths)
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such results file or folder: {p}")
    kinds = sources_by_kind(paths)
    frame, problems = load_results(kinds.results) if kinds.results else (pd.DataFrame(), [])
    if frame.empty:
        failed = "; ".join(str(p) for p in problems[:3]) + ("; ..." if len(problems) > 3 else "")
        where = ", ".join(map(str, paths))
        raise ReviewInputError(
            f"no records loaded from {where}" + (f": {failed}" if failed else ": no result files")
        )
    from jaxbench.drift import load_drift
    from jaxbench.interleave import load_comparisons

    if drift is None and kinds.drift:
        drift, drift_problems = load_drift(kinds.drift)
        problems += drift_problems
        drift = drift if not drift.empty else None
    live, live_problems = load_comparisons(kinds.live)
    problems += live_problems
    return review_versions(
        frame,
        problems,
        live=live,
        baseline=baseline,
        candidate=candidate,
        settings=settings,
        mode=mode,
        drift=drift,
        sources=[str(p) for p in paths],
    )


def write_report(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    compile_threshold: float = DEFAULT_COMPILE_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    drift: pd.DataFrame | None = None,
    mode: Mode = SEQUENTIAL,
    sections: Sequence[Section] | None = None,
) -> Path:
    """Compare JAX versions in results files and write ``out_dir/report.md`` with its figures.

    Without ``baseline`` and ``candidate`` each version is compared with the one before it, in
    version order; with both, just that pair (see :func:`.review.version_pairs`). Files that do
    not load are listed under Problems; the report is built from the rest.

    Args:
        paths: Results files or folders (jaxbench runs, sweep records, asv results).
        out_dir: Folder of the report; figures go to ``out_dir/figures/``.
        baseline: Baseline JAX version, or ``None``.
        candidate: Candidate JAX version, or ``None``.
        threshold: Smallest relative steady-state change that counts (0.02 = 2 %).
        compile_threshold: The same for compile time.
        alpha: ``1 -`` the confidence level of the intervals; a false ``slower`` (or
            ``faster``) has probability at most ``alpha / 2`` per case.
        drift: Numerical drift per version, columns
            :data:`jaxbench.analysis.drift.DRIFT_COLUMNS`; ``None`` when not checked.
        mode: How the records were measured (the Method section states it).
        sections: Sections in order; :data:`DEFAULT_SECTIONS` when ``None``.

    Returns:
        The path of ``report.md``.

    Raises:
        FileNotFoundError: A named path does not exist.
        ReviewInputError: No records loaded, an unknown version, a bad setting or drift frame
            (a :class:`ValueError`; the message names the bad input).
        OSError: ``out_dir`` cannot be written.
    """
    settings = Settings(threshold=threshold, compile_threshold=compile_threshold, alpha=alpha)
    review = load_review(
        paths, baseline=baseline, candidate=candidate, settings=settings, mode=mode, drift=drift
    )
    return render_report(review, out_dir, sections)


__all__ = [
    "DEFAULT_SECTIONS",
    "Mode",
    "ReportContext",
    "ReviewInputError",
    "Section",
    "load_review",
    "render_report",
    "sources_by_kind",
    "write_report",
]
