"""The report section of live comparisons (``jaxbench compare --interleave`` / ``--back-to-back``).

Live comparisons are measured differently from recorded runs, so the report shows them in a
section of their own, says which design produced each row, and never mixes them into the
version-pair tables.
"""

from __future__ import annotations

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.report_context import ReportContext

DESIGNS = {
    "interleaved": (
        "**interleaved**: both variants ran at once as two persistent worker processes, after "
        "both were warm; every round timed one block of calls of each, in an order drawn at "
        "random per round. The ratio is the median of the per-round ratios "
        "(candidate block median / baseline block median), with a bootstrap interval over "
        "rounds and the Wilcoxon signed-rank p-value: slow drifts of the machine cancel "
        "within a round."
    ),
    "back_to_back": (
        "**back to back** (sequential): all blocks of the baseline in one process, then all of "
        "the candidate in another; compared as independent samples (ratio of medians, "
        "bootstrap interval, Mann-Whitney U), like recorded runs."
    ),
}


def live_table(ctx: ReportContext) -> pd.DataFrame:
    """One row per live comparison, as text: design, case, sides, rounds, ratio [CI], p, verdict.

    Returns:
        An empty frame when the review has no live comparisons.
    """
    from jaxbench.interleave import comparisons_frame

    s = ctx.review.settings
    frame = comparisons_frame(ctx.review.live, s.threshold, s.alpha)
    if frame.empty:
        return frame
    out = pd.DataFrame(index=frame.index)
    out["design"] = frame["mode"].str.replace("_", " ")
    out["case"] = frame["case"]
    out["baseline"] = [
        f"{b} (jax {j})" for b, j in zip(frame["baseline"], frame["baseline_jax"], strict=True)
    ]
    out["candidate"] = [
        f"{c} (jax {j})" for c, j in zip(frame["candidate"], frame["candidate_jax"], strict=True)
    ]
    out["rounds x calls"] = [
        f"{r} x {c}" for r, c in zip(frame["rounds"], frame["calls_per_block"], strict=True)
    ]
    if "ratio" in frame:
        out["change"] = frame["ratio"].map(md.change)
        out["ratio [CI]"] = [
            md.ratio_ci(r, lo, hi)
            for r, lo, hi in zip(frame["ratio"], frame["ci_low"], frame["ci_high"], strict=True)
        ]
        out["p"] = frame["p_value"].map(md.number)
    out["verdict"] = frame["verdict"]
    out["recorded runs"] = [
        _recorded(ctx, case, a, b)
        for case, a, b in zip(
            frame["case"], frame["baseline_jax"], frame["candidate_jax"], strict=True
        )
    ]
    return out  # fmt: skip


def _recorded(ctx: ReportContext, case: str, baseline: str | None, candidate: str | None) -> str:
    """The sequential verdict of the same case and versions in the recorded runs, if compared."""
    from jaxbench.analysis.compare import STEADY_STATE

    results = ctx.review.results
    if results.empty or baseline == candidate:
        return ""
    rows = results[
        (results["metric"] == STEADY_STATE)
        & (results["case"] == case)
        & (results["baseline"].astype(str) == str(baseline))
        & (results["candidate"].astype(str) == str(candidate))
    ]
    return "; ".join(
        f"{v} {md.change(r)}" for v, r in zip(rows["verdict"], rows["ratio"], strict=True)
    )


def live_section(ctx: ReportContext) -> str:
    """Live comparisons found in the results, with the design of each; ``""`` when none."""
    table = live_table(ctx)
    if table.empty:
        return ""
    designs = sorted(set(c.mode for c in ctx.review.live))
    s = ctx.review.settings
    return "\n\n".join(
        [
            "## Live comparisons",
            "Measured with `jaxbench compare --interleave` or `--back-to-back`, not from the "
            "recorded runs above; the verdict rule is the same (threshold "
            f"{s.threshold:.1%}, alpha {s.alpha:g}). `recorded runs`: the sequential verdict of "
            "the same case and versions from the records, where they were compared. Where the "
            "two disagree, trust the live one: separate processes move by several percent on "
            "their own (docs/review.md, section 5).",
            md.bullets(DESIGNS[d] for d in designs),
            md.table(table),
        ]
    )
