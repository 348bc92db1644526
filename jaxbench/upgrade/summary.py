"""The review's answer per case: recorded verdict, live verdict where measured, and the final one.

The final verdict is the one that holds (``slower``, ``faster`` or ``same``): the live one where
it holds (its pairs cancel the drifts that separate recorded runs), else the recorded one where
it holds (``inconclusive`` or ``unstable`` claims nothing, so it contradicts nothing), else the
live one, else the recorded one. Two that hold and contradict each other give ``disagree``:
at least one of them is one of the rare false calls, or the two measured different states of
the machine; neither is reported as the answer.

The review's report leads with these final verdicts (:func:`review_sections`): its header
counts the verdicts of :func:`answers`, the very ones the terminal prints, and the counts of
the recorded screen alone follow, labelled as such, after the review's answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import COMPILE, STEADY_STATE
from jaxbench.analysis.programs import traced_op_lines
from jaxbench.analysis.report_context import ReportContext, Section
from jaxbench.analysis.report_explain import side_artifact, side_rows
from jaxbench.analysis.report_live import HOLDING
from jaxbench.analysis.report_tables import (
    header,
    header_section,
    processes_cell,
    recorded_counts,
    summary_counts,
    verdict_sentence,
)
from jaxbench.analysis.review import Review
from jaxbench.analysis.text_table import Column, TextTable
from jaxbench.explain.saved import explain_saved
from jaxbench.inference.verdicts import VERDICTS
from jaxbench.interleave import estimate
from jaxbench.store import ArtifactError, CaseComparison


@dataclass(frozen=True)
class CaseAnswer:
    """One case of a review.

    Attributes:
        case: Its record label.
        recorded: Recorded steady-state verdict, ratio [interval] and processes, as text.
        live: Live verdict, ratio [interval] and pairs, as text; ``""`` when not measured.
        verdict: The final verdict (see the module docstring).
        compile: Recorded compile-time verdict and ratio [interval], as text.
        explanation: For a final ``slower``/``faster``, the headline of each program's
            explanation; for ``disagree``, which verdicts disagree; where only the compile
            time is ``slower``/``faster``, its explanation, first line marked so.
        compile_verdict: The recorded compile-time verdict (one of
            :data:`~jaxbench.inference.verdicts.VERDICTS`), ``""`` where it was not compared.
            A gate counts it as ``compare`` counts a compile row (:meth:`verdicts`).
    """

    case: str
    recorded: str
    live: str
    verdict: str
    compile: str
    explanation: list[str]
    compile_verdict: str = ""

    def verdicts(self) -> list[str]:
        """The verdicts a CI gate reads: the final steady-state one, and compile time's."""
        return [self.verdict, *([self.compile_verdict] if self.compile_verdict else [])]


def answers(
    review: Review, labels: list[str], live: dict[str, CaseComparison], versions: tuple[str, str]
) -> list[CaseAnswer]:
    """One :class:`CaseAnswer` per label, in order.

    Args:
        review: The review of the one pair of versions.
        labels: The selected cases' record labels.
        live: Finished live comparisons by label (:func:`jaxbench.upgrade.confirm.finished`).
        versions: ``(baseline, candidate)`` JAX versions.
    """
    s = review.settings
    results = review.results
    lost = {f.case: f for c in review.comparisons for f in c.failed}
    out = []
    for label in labels:
        rows = results[results["case"] == label]
        steady = rows[rows["metric"] == STEADY_STATE]  # compile rows may stand without it
        recorded, by_records = _recorded(steady)
        if label in lost and steady.empty:  # timed by one version only: say which failed
            recorded = f"not compared: {lost[label]}"
        elif steady.empty:  # neither version timed it: what each recorded instead
            recorded, by_records = _untimed(review.frame, label, versions)
        compile_rows = rows[rows["metric"] == COMPILE]
        compile_text, by_compile = _recorded(compile_rows, processes=False)
        by_compile = by_compile if by_compile in VERDICTS else ""
        text, by_pairs = _live(live[label], s.threshold, s.alpha) if label in live else ("", "")
        verdict = final(by_records, by_pairs)
        if verdict == "disagree":
            explanation = [f"recorded runs: {by_records}, live pairs: {by_pairs}; rerun with "
                           "more processes and pairs"]  # fmt: skip
        elif verdict in ("slower", "faster"):
            explanation = _explain(review.frame, label, versions, verdict)
        else:  # the steady state claims nothing, or no change: the compile time may
            explanation = _explain(review.frame, label, versions, by_compile)
            if explanation:
                explanation[0] = f"compile time {by_compile}: {explanation[0]}"
        out.append(CaseAnswer(label, recorded, text, verdict, compile_text, explanation,
                              by_compile))  # fmt: skip
    return out


def final(recorded: str, live: str) -> str:
    """The final verdict of a case from its recorded and live ones (module docstring).

    Args:
        recorded: The recorded steady-state verdict.
        live: The live verdict, ``""`` when no live comparison ran.
    """
    if live in HOLDING and recorded in HOLDING and live != recorded:
        return "disagree"
    for verdict in (live, recorded):
        if verdict in HOLDING:
            return verdict
    return live or recorded


def _recorded(rows: pd.DataFrame, processes: bool = True) -> tuple[str, str]:
    if rows.empty:
        return "not compared", "failed"
    row = rows.iloc[0]
    ci = md.ratio_ci(row["ratio"], row["ci_low"], row["ci_high"])
    both = processes_cell(row["n_baseline"], row["n_candidate"])
    count = f" ({both} processes)" if processes else ""
    return f"{row['verdict']} {ci}{count}", str(row["verdict"])


def _untimed(frame: pd.DataFrame, label: str, versions: tuple[str, str]) -> tuple[str, str]:
    """A case no version timed: each version's record statuses, and the one status shared.

    The verdict is that status where every record of both versions has it (``recompiled``
    twice is no regression: both ran it so), else ``failed``.
    """
    said, statuses = [], set()
    for version in versions:
        rows = frame[(frame["case"] == label) & (frame["version"] == version)]
        counts = Counter(rows["status"])
        statuses |= set(counts) or {"missing"}
        listed = ", ".join(f"{n} {status}" for status, n in counts.items()) or "no record"
        said.append(f"{version}: {listed}")
    verdict = next(iter(statuses)) if len(statuses) == 1 and "missing" not in statuses else "failed"
    return f"not compared ({'; '.join(said)})", verdict


def _live(comparison: CaseComparison, threshold: float, alpha: float) -> tuple[str, str]:
    if comparison.status != "ok":
        return f"{comparison.status}: {comparison.error}", comparison.status
    try:
        e = estimate(comparison, threshold, alpha)
    except ValueError as exc:
        return f"failed: {exc}", "failed"
    ci = md.ratio_ci(e.ratio, e.ci_low, e.ci_high)
    return f"{e.verdict} {ci} ({len(comparison.pairs)} pairs)", e.verdict


def _explain(frame: pd.DataFrame, label: str, versions: tuple[str, str], verdict: str) -> list[str]:
    if verdict not in ("slower", "faster"):
        return []
    sides = [side_artifact(frame, label, v) for v in versions]
    if sides[0] is None or sides[1] is None:
        return ["no saved programs on one side"]
    try:
        lines = explain_saved(sides[0], sides[1], verdict)
    except (ArtifactError, ValueError) as exc:
        return [f"not explained: {exc}"]
    ops = traced_op_lines(*(side_rows(frame, label, v) for v in versions))
    moved = [line.strip() for line in ops[1:] if " -> " in line][:1]  # the op that moved most
    return [line for line in lines + ops[:1] if not line.startswith(" ")] + moved


def answer_counts(found: Sequence[CaseAnswer]) -> dict[str, int]:
    """How many cases got each final verdict.

    Args:
        found: From :func:`answers`.

    Returns:
        Every verdict of :data:`jaxbench.inference.verdicts.VERDICTS` (zero where none), in
        that order, then any other final verdict present (``disagree``, or a live comparison's
        ``failed`` or ``recompiled``) in the order first found.
    """
    counts = Counter(a.verdict for a in found)
    others = [v for v in dict.fromkeys(a.verdict for a in found) if v not in VERDICTS]
    return {v: counts[v] for v in (*VERDICTS, *others)}


def answer_sentence(found: Sequence[CaseAnswer]) -> str:
    """The final verdicts counted, one sentence: what a review's report leads with.

    Args:
        found: From :func:`answers`.
    """
    counts = answer_counts(found)
    others = "".join(f", {n} {v}" for v, n in counts.items() if v not in VERDICTS)
    return (
        f"The review's answer: {verdict_sentence(counts)}{others}, over {len(found)} case(s): "
        "the final steady-state verdict of each, as the terminal gives it (see The review's "
        "answer; the recorded screen's own counts are under The recorded screen)"
    )


def answers_header(found: Sequence[CaseAnswer]) -> Section:
    """The header of a review's report: the final verdicts counted, not the recorded screen's.

    Args:
        found: From :func:`answers`.

    Returns:
        A report section (:data:`jaxbench.analysis.report_context.Section`).
    """

    def section(ctx: ReportContext) -> str:
        return header(ctx.review, answer_sentence(found))

    return section


def recorded_screen_section(ctx: ReportContext) -> str:
    """The counts of the recorded runs alone, labelled as the screen's (sentence and table)."""
    review = ctx.review
    parts = [
        "## The recorded screen",
        "The verdicts of the recorded runs alone, before any live pairs: every comparison row, "
        "steady state and compile time counted apart. They are not the review's answer (above): "
        "a case the screen left open was compared live, and its final verdict is the one that "
        "holds. The Regressions, Improvements and Inconclusive and unstable sections below list "
        "the recorded runs' rows.",
        f"Recorded screen: {recorded_counts(review)}.",
    ]
    if review.pairs:
        parts += ["Recorded screen, verdicts per pair:", md.table(summary_counts(review))]
    return "\n\n".join(parts)


def review_sections(found: Sequence[CaseAnswer], sections: Sequence[Section]) -> list[Section]:
    """A review's report: its answers first, then ``sections`` without their own header.

    Args:
        found: From :func:`answers`.
        sections: The sections of a report of result sets
            (:data:`jaxbench.analysis.report.DEFAULT_SECTIONS`).

    Returns:
        The header of the final verdicts (:func:`answers_header`), the review's answer
        (:func:`answers_markdown`), the recorded screen (:func:`recorded_screen_section`), then
        ``sections`` less :func:`jaxbench.analysis.report_tables.header_section`.
    """
    found = list(found)
    rest = [s for s in sections if s is not header_section]
    return [
        answers_header(found),
        lambda ctx: answers_markdown(found),
        recorded_screen_section,
        *rest,
    ]


def answers_table(found: Sequence[CaseAnswer], *, compact: bool = False) -> TextTable:
    """A review's answers, one row per case: the one builder for the terminal and the report.

    Args:
        found: From :func:`answers`.
        compact: Leave out ``program change`` (the terminal prints it below the table).

    Returns:
        Columns ``case``, ``verdict``, ``recorded runs``, ``live pairs`` (``-`` where none ran),
        ``compile time (recorded)``, then ``program change`` unless ``compact``.
    """
    cells = {
        Column("case"): [a.case for a in found],
        Column("verdict", verdict=True): [a.verdict for a in found],
        Column("recorded runs"): [a.recorded for a in found],
        Column("live pairs"): [a.live or "-" for a in found],
        Column("compile time (recorded)"): [a.compile for a in found],
    }
    if not compact:
        cells[Column("program change")] = ["; ".join(a.explanation) for a in found]
    return TextTable.of(cells)


def answers_markdown(found: Sequence[CaseAnswer]) -> str:
    """The report section of a review's answers: one row per case, the final verdict first."""
    return "\n\n".join(
        [
            "## The review's answer",
            "One row per case of this `jaxbench review`. The verdict is the one that holds: the "
            "live pairs' where it holds, else the recorded runs' (`inconclusive` and `unstable` "
            "claim nothing); two that hold and contradict each other give `disagree`. The "
            "counts in the header above are of these verdicts; the recorded runs' own counts "
            "are under The recorded screen, and the live comparisons in their own section.",
            md.table(answers_table(found)),
        ]
    )
