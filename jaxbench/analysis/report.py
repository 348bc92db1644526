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
results hold any (with the recorded verdict of the same case beside each), explanations
(what changed in the compiled program of each verdict that holds, from the saved artifacts),
inconclusive and unstable rows (what would settle them, or why the machine is suspect), the
full tables per pair (steady state and compile time apart), versions and environment (with the
drift column), numerical drift, records not timed, figures (latency violins and ECDFs, compile time,
forward-mode crossover), rows kept apart and unmatched cases, problems, method (the unit, the
verdict rule and its error rate).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from jaxbench.analysis.compare import DEFAULT_COMPILE_THRESHOLD
from jaxbench.analysis.drift import drift_frame
from jaxbench.analysis.frames import needed_problems, records_frame
from jaxbench.analysis.programs import artifact_problems
from jaxbench.analysis.report_context import (
    FIGURES,
    REPORT_HTML,
    REPORT_NAME,
    ReportContext,
    Section,
)
from jaxbench.analysis.report_explain import explanations_section
from jaxbench.analysis.report_figures import FIGURE_SECTIONS
from jaxbench.analysis.report_html import report_html
from jaxbench.analysis.report_live import live_section
from jaxbench.analysis.report_method import calibration_section, method_section
from jaxbench.analysis.report_scaling import scaling_section
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
    Design,
    Review,
    ReviewInputError,
    Settings,
    review_versions,
)
from jaxbench.inference import verdicts
from jaxbench.store import load

#: The sections of a report, in order; append to a copy to extend a report.
DEFAULT_SECTIONS: tuple[Section, ...] = (
    header_section,
    regressions_section,
    improvements_section,
    live_section,
    explanations_section,
    inconclusive_section,
    scaling_section,
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


#: Name prefix of the folder a report is built in, inside its output folder, before the swap.
STAGING_PREFIX = ".report-tmp-"
#: The previous ``figures/``, set aside in the staging folder while the new one is swapped in.
OLD_FIGURES = "old-figures"
#: Where the swap sets the previous ``report.html`` aside, inside the staging folder.
OLD_HTML = "old-report.html"


def render_report(
    review: Review, out_dir: str | os.PathLike[str], sections: Sequence[Section] | None = None
) -> Path:
    """Write ``out_dir/report.md`` and its figures for a review, replacing the previous report.

    ``report.html`` beside it is the same report as one page, figures inlined and tables
    sortable (:func:`jaxbench.analysis.report_html.report_html`).

    The report is built whole in a staging folder inside ``out_dir`` (``.report-tmp-*``, see
    :data:`STAGING_PREFIX`), then swapped in: the old ``figures/`` is set aside, the new one
    renamed into place, and ``report.md`` replaced in one atomic rename, the commit point.
    Until then the previous report (``report.md`` and every figure) is untouched; an exception
    or a ``KeyboardInterrupt`` undoes what was done and removes the staging folder. A run
    killed outright leaves its staging folder behind; the next run (or :func:`recover_report`)
    puts the previous report back from it where the kill fell inside the swap, then removes it.

    Only ``report.md``, ``report.html`` and ``figures/`` are the report's: nothing else in
    ``out_dir`` is touched, and entries of ``figures/`` that are not PNGs are carried over into
    the new one. The previous ``report.html`` is set aside like the figures, so it too is
    replaced only with the commit.
    The new ``figures/`` holds exactly the figures the report links (none: no ``figures/``).
    Two runs writing to one folder at once are not supported.

    Args:
        review: From :func:`jaxbench.analysis.review.review_versions`.
        out_dir: Folder of the report, created if needed.
        sections: Sections in order; :data:`DEFAULT_SECTIONS` when ``None``.

    Returns:
        The path of ``report.md``.

    Raises:
        OSError: ``out_dir`` cannot be created or written, or ``out_dir/figures`` is not a
            folder (the previous report is kept).
    """
    import shutil
    import tempfile

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    recover_report(out)
    if os.path.lexists(out / FIGURES) and not (out / FIGURES).is_dir():
        raise NotADirectoryError(f"{out / FIGURES} is in the way of the report's figures folder")
    staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out))
    try:
        (staging / FIGURES).mkdir()
        ctx = ReportContext(review=review, out_dir=staging)
        chosen = sections or DEFAULT_SECTIONS
        parts = [text.strip() for section in chosen if (text := section(ctx))]
        _carry_over(out / FIGURES, staging / FIGURES)
        text = "\n\n".join(parts) + "\n"
        title = next((line[2:] for line in text.splitlines() if line.startswith("# ")), "review")
        (staging / REPORT_HTML).write_text(report_html(text, staging, title), encoding="utf-8")
        (staging / REPORT_NAME).write_text(text, encoding="utf-8")
        _swap(staging, out)
    except BaseException:
        _undo(staging, out)
        raise
    shutil.rmtree(staging, ignore_errors=True)
    return out / REPORT_NAME


def _carry_over(old: Path, new: Path) -> None:
    """Copy the entries of the previous ``figures/`` that are not PNGs (not the report's)."""
    import shutil

    if not old.is_dir():
        return
    for entry in old.iterdir():
        if entry.name.endswith(".png") or (new / entry.name).exists():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, new / entry.name, symlinks=True)
        else:
            shutil.copy2(entry, new / entry.name, follow_symlinks=False)


def _swap(staging: Path, out: Path) -> None:
    """Put the report built in ``staging`` in place; ``report.md`` last (the commit point)."""
    figures = out / FIGURES
    if os.path.lexists(figures):
        figures.rename(staging / OLD_FIGURES)
    if any((staging / FIGURES).iterdir()):
        (staging / FIGURES).rename(figures)
    page = out / REPORT_HTML
    if os.path.lexists(page):
        page.rename(staging / OLD_HTML)
    (staging / REPORT_HTML).rename(page)
    os.replace(staging / REPORT_NAME, out / REPORT_NAME)


def _undo(staging: Path, out: Path) -> None:
    """Undo a swap that did not reach its commit point, then remove ``staging``; never raises.

    ``staging/report.md`` still there means ``out/report.md`` is the previous one: the previous
    figures are put back (from ``staging/old-figures``) and new ones moved out of the way. Gone,
    the build never finished (nothing of ``out`` was moved) or the swap did (the new report is
    whole): ``staging`` only is removed. Where a step fails, ``staging`` is left for the next run.
    """
    import shutil

    try:
        if (staging / REPORT_NAME).exists():
            figures = out / FIGURES
            if not (staging / FIGURES).exists() and os.path.lexists(figures):
                figures.rename(staging / FIGURES)  # the new figures had been moved in
            if os.path.lexists(staging / OLD_FIGURES):
                (staging / OLD_FIGURES).rename(figures)
            page = out / REPORT_HTML
            if not (staging / REPORT_HTML).exists() and os.path.lexists(page):
                page.rename(staging / REPORT_HTML)  # the new page had been moved in
            if os.path.lexists(staging / OLD_HTML):
                (staging / OLD_HTML).rename(page)
    except OSError:
        return
    shutil.rmtree(staging, ignore_errors=True)


def recover_report(out_dir: str | os.PathLike[str]) -> None:
    """Clean up after report runs killed in ``out_dir``: the previous report back in place.

    Each staging folder (``out_dir/.report-tmp-*``) left by a killed :func:`render_report` is
    undone where the kill fell inside the swap, and removed. :func:`render_report` calls it
    first; a missing ``out_dir`` holds nothing to recover.

    Args:
        out_dir: Folder of the report.
    """
    out = Path(out_dir)
    if not out.is_dir():
        return
    for staging in sorted(out.glob(f"{STAGING_PREFIX}*")):
        if staging.is_dir() and not staging.is_symlink():
            _undo(staging, out)


def load_review(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    baseline: str | None = None,
    candidate: str | None = None,
    settings: Settings | None = None,
    design: Design = SEQUENTIAL,
    drift: pd.DataFrame | None = None,
) -> Review:
    """Load results and review them (:func:`jaxbench.store.load`, then :func:`review_versions`).

    Args:
        paths: Results files or folders.
        baseline: Baseline version, or ``None`` (see :func:`.review.version_pairs`).
        candidate: Candidate version, or ``None``.
        settings: Verdict settings; defaults when ``None``.
        design: How the records were measured.
        drift: Numerical drift rows; ``None`` loads the drift checks found under ``paths``
            (:func:`jaxbench.analysis.drift.load_drift`; none found: not checked).

    Everything is read once, by the store's loader (:func:`jaxbench.store.load`): records, and
    the live comparisons and drift checks among them. Lines and files that do not load join the
    problems, named with file and line; the rest is reviewed.

    Raises:
        FileNotFoundError: A named path does not exist.
        ReviewInputError: No records loaded (the message names the files that failed), an
            unknown version, a bad setting or drift frame.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    paths = list(paths)
    loaded = load(paths)
    items = loaded.of("record")
    frame = records_frame(items)
    problems = [*loaded.problems, *needed_problems(items), *artifact_problems(frame)]
    if frame.empty:
        failed = "; ".join(str(p) for p in problems[:3]) + ("; ..." if len(problems) > 3 else "")
        where = ", ".join(map(str, paths))
        raise ReviewInputError(
            f"no records loaded from {where}" + (f": {failed}" if failed else ": no result files")
        )
    if drift is None:
        found = drift_frame(loaded.of("jaxbench-drift"))
        drift = found if not found.empty else None
    live = loaded.models("live-comparison")
    return review_versions(
        frame,
        problems,
        live=live,
        baseline=baseline,
        candidate=candidate,
        settings=settings,
        design=design,
        drift=drift,
        sources=[str(p) for p in paths],
        calibrations=loaded.models("calibration"),
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
    design: Design = SEQUENTIAL,
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
        design: How the records were measured (the Method section states it).
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
        paths, baseline=baseline, candidate=candidate, settings=settings, design=design, drift=drift
    )
    return render_report(review, out_dir, sections)


__all__ = [
    "DEFAULT_SECTIONS",
    "Design",
    "ReportContext",
    "ReviewInputError",
    "Section",
    "load_review",
    "recover_report",
    "render_report",
    "write_report",
]
