"""The report's Explanations: what changed in the compiled program of each verdict that holds.

For every ``slower`` or ``faster`` verdict (recorded runs, either metric, and live
comparisons), the records of each version name their case's program artifact
(``Record.programs``: :mod:`jaxbench.store.programs`); the two are compared with
:func:`jaxbench.explain.saved.explain_saved`, as ``jaxbench explain`` does. Identical programs
under a timing verdict are said to point below HLO, never at it. Where the records hold
profiler traces, the op diff over their processes follows
(:func:`jaxbench.analysis.programs.traced_op_lines`). An artifact that is missing or corrupt is
named in the section, and the report goes on.
"""

from __future__ import annotations

import pandas as pd

from jaxbench.analysis.live import comparisons_frame
from jaxbench.analysis.programs import artifact_of, traced_op_lines
from jaxbench.analysis.report_context import ReportContext
from jaxbench.explain.saved import SavedSide, explain_saved
from jaxbench.store import ArtifactError

#: Verdicts whose programs are explained.
EXPLAINED = ("slower", "faster")
#: Most lines of one case's explanation in the report (the rest: ``jaxbench explain``).
MAX_LINES = 40


def holding_changes(ctx: ReportContext) -> pd.DataFrame:
    """``case``, ``baseline``, ``candidate`` (JAX versions), ``verdict``, ``basis`` per change.

    ``basis`` names where the verdict came from: ``recorded <metric>`` or ``live``. One row per
    case, pair and verdict, recorded rows first.
    """
    review, s = ctx.review, ctx.review.settings
    rows = []
    results = review.results
    for row in results[results["verdict"].isin(EXPLAINED)].itertuples():
        rows.append((row.case, str(row.baseline), str(row.candidate), row.verdict,
                     f"recorded {row.metric.replace('_', ' ')}"))  # fmt: skip
    live = comparisons_frame(review.live, s.threshold, s.alpha)
    if not live.empty:
        for row in live[live["verdict"].isin(EXPLAINED)].itertuples():
            rows.append((row.case, str(row.baseline_jax), str(row.candidate_jax), row.verdict,
                         "live"))  # fmt: skip
    frame = pd.DataFrame(rows, columns=["case", "baseline", "candidate", "verdict", "basis"])
    return frame.groupby(["case", "baseline", "candidate", "verdict"], sort=False, as_index=False)[
        "basis"
    ].agg(", ".join)


def side_rows(frame: pd.DataFrame, case: str, version: str) -> pd.DataFrame:
    """The ``ok`` rows of ``case`` under JAX ``version``."""
    chosen = (frame["case"] == case) & (frame["jax"].astype(str) == version)
    return frame[chosen & (frame["status"] == "ok")]


def side_artifact(frame: pd.DataFrame, case: str, version: str) -> SavedSide | None:
    """The artifact most ``ok`` records of ``case`` under JAX ``version`` name, if any."""
    if "programs" not in frame:
        return None
    return artifact_of(side_rows(frame, case, version))


def explanations_section(ctx: ReportContext) -> str:
    """One explanation per verdict that holds; ``""`` when none holds or nothing was saved.

    Nothing saved: no record names a program artifact or holds a trace.
    """
    frame = ctx.review.frame
    saved = [c for c in ("programs", "trace") if c in frame and frame[c].notna().any()]
    if not saved:
        return ""
    changes = holding_changes(ctx)
    if changes.empty:
        return ""
    parts = [
        "## Explanations",
        "What changed in the compiled program of each case called `slower` or `faster`, read "
        "from the program artifacts the records saved (`programs/<sha256>.json.gz` beside each "
        "run): which levels are identical (jaxpr, StableHLO, optimized HLO; names and metadata "
        "set aside), the first that differs and what that points at, the counts and XLA "
        "figures that changed, and each side's compile phases (the median over its records). "
        "Identical "
        "programs under a timing verdict mean the cause is below HLO. Where the records hold "
        "profiler traces (`run --trace`, `review --trace`), the time per op is compared over "
        "their processes too: which ops' time moved, with an interval, and what share of the "
        "change each explains. Diffs are cut at "
        f"{MAX_LINES} lines here; `jaxbench explain BASE_RESULTS CAND_RESULTS` prints 60 of "
        "each diff, and `jaxbench explain BASE CAND -o DIR` with two versions saves both "
        "sides' programs whole.",
    ]
    for row in changes.itertuples():
        versions = (row.baseline, row.candidate)
        parts.append(f"### {row.case}: {row.baseline} -> {row.candidate}, {row.verdict} "
                     f"({row.basis})")  # fmt: skip
        ops = traced_op_lines(*(side_rows(frame, row.case, v) for v in versions))
        sides = [side_artifact(frame, row.case, v) for v in versions]
        lines: list[str] = []
        if any(side is None for side in sides):
            missing = " and ".join(v for v, side in zip(versions, sides, strict=True)
                                   if side is None)  # fmt: skip
            parts.append(f"No saved programs for JAX {missing} (records without artifacts).")
        else:
            try:
                lines = explain_saved(*sides, verdict=row.verdict)
            except (ArtifactError, ValueError) as exc:
                parts.append(f"Not explained: {exc}.")
            else:
                files = ", ".join(f"`{side.path}`" for side in sides if side is not None)
                parts.append(f"Programs (baseline, candidate): {files}.")
        cut = len(lines) - MAX_LINES  # the program diff is cut; the op diff is bounded itself
        kept = lines[:MAX_LINES] + ([f"... {cut} more lines"] if cut > 0 else []) + ops
        if kept:
            parts.append("```\n" + "\n".join(kept) + "\n```")
    return "\n\n".join(parts)
