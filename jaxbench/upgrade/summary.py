"""The review's answer per case: recorded verdict, live verdict where measured, and the final one.

The final verdict is the live one where a live comparison ran (it was run because the recorded
runs did not settle the case, and its pairs cancel the drifts that separate recorded runs), and
the recorded one otherwise (``same``, shown as an equivalence).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import STEADY_STATE
from jaxbench.analysis.report_explain import side_artifact
from jaxbench.analysis.review import Review
from jaxbench.explain.saved import explain_saved
from jaxbench.interleave import estimate
from jaxbench.store import ArtifactError, CaseComparison


@dataclass(frozen=True)
class CaseAnswer:
    """One case of a review.

    Attributes:
        case: Its record label.
        recorded: Recorded steady-state verdict and ratio with its processes, as text.
        live: Live verdict, ratio [interval] and pairs, as text; ``""`` when not measured.
        verdict: The final verdict.
        explanation: For ``slower``/``faster``, the headline of each program's explanation.
    """

    case: str
    recorded: str
    live: str
    verdict: str
    explanation: list[str]


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
    steady = results[results["metric"] == STEADY_STATE]
    out = []
    for label in labels:
        rows = steady[steady["case"] == label]
        recorded, verdict = _recorded(rows)
        text = ""
        if label in live:
            text, verdict = _live(live[label], s.threshold, s.alpha)
        explanation = _explain(review.frame, label, versions, verdict)
        out.append(CaseAnswer(label, recorded, text, verdict, explanation))
    return out


def _recorded(rows: pd.DataFrame) -> tuple[str, str]:
    if rows.empty:
        return "not compared (no records on one side)", "failed"
    row = rows.iloc[0]
    processes = f"{row['n_baseline']}+{row['n_candidate']} processes"
    return f"{row['verdict']} {md.change(row['ratio'])} ({processes})", str(row["verdict"])


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
    return [line for line in lines if not line.startswith(" ")]
