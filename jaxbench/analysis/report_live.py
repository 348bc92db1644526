"""The report section of live comparisons (``jaxbench compare --interleave`` / ``--back-to-back``).

Live comparisons are measured differently from recorded runs, so the report shows them in a
section of their own, says which design produced each row, and never mixes them into the
version-pair tables.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.live import comparisons_frame
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.report_tables import column, processes_cell
from jaxbench.analysis.text_table import TextTable

#: Verdicts that hold; two of them that differ are a disagreement (:func:`disagree`).
HOLDING = ("slower", "faster", "same")
DESIGNS = {
    "interleaved": (
        "**interleaved**: each pair of fresh worker processes ran both variants at once, "
        "after both were warm; every round timed one block of calls of each, in an order drawn "
        "at random per round. A pair's log ratio is the median of its per-round log ratios "
        "(candidate block median / baseline block median), so slow drifts of the machine cancel "
        "within a round; the interval is the t interval over pairs (the pairs are the "
        "independent units), a repeated confidence interval: alpha is spent over the looks "
        "at the data by O'Brien-Fleming-type error spending, almost none at the first looks."
    ),
    "back_to_back": (
        "**back to back** (sequential): in each pair, all blocks of the baseline in one "
        "process, then all of the candidate in another; compared as recorded runs are, over "
        "independent processes (per-process medians, Welch t interval)."
    ),
}


def disagree(live: object, recorded: object) -> bool:
    """Whether two verdicts contradict each other.

    They do when both hold (``slower``, ``faster`` or ``same``) and differ: one says
    ``slower`` and the other ``faster`` or ``same``, or one ``faster`` and the other ``same``.
    ``inconclusive`` or ``unstable`` against anything is no disagreement: it claims nothing.
    """
    return live in HOLDING and recorded in HOLDING and live != recorded


#: The columns of the terminal's live table (``compact``): the report has them all.
COMPACT = ("case", "baseline", "candidate", "pairs", "rounds x calls", "ratio [CI]",
           "detectable", "verdict")  # fmt: skip


def live_table(
    frame: pd.DataFrame,
    recorded: Sequence[Sequence[tuple[str, float, str]]] | None = None,
    *,
    compact: bool = False,
    title: str = "",
) -> TextTable:
    """Live comparisons as text, one row each: design, case, sides, pairs, ratio [CI], verdict.

    The one builder of the live comparison table: the report renders it as Markdown, ``compare
    --interleave`` (``compact``) with rich.

    Args:
        frame: From :func:`jaxbench.analysis.live.comparisons_frame`.
        recorded: Per row, ``(verdict, ratio, processes)`` of the same case and versions in the
            recorded runs (:func:`review_live_table`); ``None``: no such columns.
        compact: The terminal's columns (:data:`COMPACT`).
        title: The table's title.

    Returns:
        Columns ``design``, ``case``, ``baseline``, ``candidate`` (each with its JAX
        version), ``pairs``, ``rounds x calls`` (per pair),
        ``change``, ``ratio [CI]``, ``p``, ``detectable``, ``verdict``, ``advice``, then with
        ``recorded``: ``recorded runs`` (the sequential verdict of the same case and versions,
        with its processes) and ``disagree`` (``yes`` where the two verdicts contradict each
        other: :func:`disagree`).
    """
    frame = frame.copy()
    for name in ("mode", "case", "baseline", "candidate", "baseline_jax", "candidate_jax",
                 "pairs", "rounds", "calls_per_block", "ratio", "ci_low", "ci_high", "p_value",
                 "detectable", "verdict", "advice"):  # fmt: skip
        if name not in frame:
            frame[name] = None
    cells: dict[str, list[str]] = {
        "design": [str(m).replace("_", " ") for m in frame["mode"]],
        "case": list(frame["case"]),
        "baseline": list(map(_side, frame["baseline"], frame["baseline_jax"])),
        "candidate": list(map(_side, frame["candidate"], frame["candidate_jax"])),
        "pairs": [str(p) for p in frame["pairs"]],
        "rounds x calls": [
            str(r) if c is None or c != c else f"{r} x {int(c)}"
            for r, c in zip(frame["rounds"], frame["calls_per_block"], strict=True)
        ],
        "change": list(frame["ratio"].map(md.change)),
        "ratio [CI]": [
            md.ratio_ci(r, lo, hi)
            for r, lo, hi in zip(frame["ratio"], frame["ci_low"], frame["ci_high"], strict=True)
        ],
        "p": list(frame["p_value"].map(md.p_value)),
        "detectable": list(frame["detectable"].map(md.share)),
        "verdict": list(frame["verdict"]),
        "advice": list(frame["advice"].fillna("")),
    }
    if recorded is not None:
        cells["recorded runs"] = [
            "; ".join(f"{v} {md.change(r)} ({n} processes)" for v, r, n in rows)
            for rows in recorded
        ]
        cells["disagree"] = [
            "yes" if any(disagree(live, v) for v, _, _ in rows) else ""
            for live, rows in zip(frame["verdict"], recorded, strict=True)
        ]
    shown = COMPACT if compact else tuple(cells)
    return TextTable.of({column(h): cells[h] for h in shown}, title=title)


def _side(label: object, jax: object) -> str:
    """``label (jax X)``; the label alone where the version is unknown."""
    if label is None or (isinstance(label, float) and label != label):
        return ""
    if jax is None or (isinstance(jax, float) and jax != jax):
        return str(label)
    return f"{label} (jax {jax})"


def review_live_table(ctx: ReportContext) -> TextTable:
    """The review's live comparisons (:func:`live_table`), each beside its recorded verdict."""
    s = ctx.review.settings
    frame = comparisons_frame(ctx.review.live, s.threshold, s.alpha)
    if frame.empty:
        return live_table(frame, [])
    recorded = [
        _recorded(ctx, case, a, b)
        for case, a, b in zip(
            frame["case"], frame["baseline_jax"], frame["candidate_jax"], strict=True
        )
    ]
    return live_table(frame, recorded)


def _recorded(
    ctx: ReportContext, case: str, baseline: str | None, candidate: str | None
) -> list[tuple[str, float, str]]:
    """``(verdict, ratio, processes)`` of the same case and versions in the recorded runs."""
    from jaxbench.analysis.compare import STEADY_STATE

    results = ctx.review.results
    if results.empty or baseline is None or baseline == candidate:
        return []
    rows = results[
        (results["metric"] == STEADY_STATE)
        & (results["case"] == case)
        & (results["baseline"].astype(str) == str(baseline))
        & (results["candidate"].astype(str) == str(candidate))
    ]
    return [
        (v, r, processes_cell(a, b))
        for v, r, a, b in zip(
            rows["verdict"], rows["ratio"], rows["n_baseline"], rows["n_candidate"], strict=True
        )
    ]


def live_section(ctx: ReportContext) -> str:
    """Live comparisons found in the results, with the design of each; ``""`` when none."""
    table = review_live_table(ctx)
    if not table.rows:
        return ""
    designs = sorted(set(c.mode for c in ctx.review.live))
    s = ctx.review.settings
    n_disagree = table.column("disagree").count("yes")
    return "\n\n".join(
        [
            "## Live comparisons",
            "Measured with `jaxbench compare --interleave` or `--back-to-back`, not from the "
            "recorded runs above; the verdict rule is the same (threshold "
            f"{s.threshold:.1%}, alpha {s.alpha:g}; see Method). `pairs`: the independent "
            "process pairs the interval rests on (one pair gives no interval: `inconclusive`); "
            "`recorded runs`: the sequential verdict of the same case and versions from the "
            "records, with its processes, where they were compared; `disagree`: `yes` where "
            "the live and the recorded verdict contradict each other (one `slower` and the "
            "other `faster` or `same`, or one `faster` and the other `same`; `inconclusive` "
            "contradicts nothing).",
            f"{n_disagree} of {len(table.rows)} live comparison(s) disagree with the recorded "
            "runs. "
            "Two verdicts that hold and contradict each other mean that at least one of them is "
            "one of the rare false calls the error rate allows, or that the two measured "
            "different things (another time, another state of the machine): rerun that case "
            "with more processes before acting on either.",
            md.bullets(DESIGNS[d] for d in designs),
            md.table(table),
        ]
    )
