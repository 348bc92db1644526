"""The report section of scaling exponents: latency against each swept parameter, per version."""

from __future__ import annotations

import pandas as pd

from jaxbench.analysis import facets
from jaxbench.analysis import markdown as md
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.scaling import exponent_changes, exponents_frame, swept_points
from jaxbench.inference.scaling import DEFAULT_EXPONENT_THRESHOLD, MIN_POINTS
from jaxbench.store.record import case_sort_key


def _interval(low: float, high: float, value: float) -> str:
    return f"{value:.2f} [{low:.2f}, {high:.2f}]"


def scaling_section(ctx: ReportContext) -> str:
    """Exponents of latency against each swept parameter, and their changes between versions.

    Returns ``""`` (no section) when no parameter is swept.
    """
    review = ctx.review
    alpha = review.settings.alpha
    exponents = exponents_frame(review.frame, alpha)
    if exponents.empty:
        return ""
    parts = [
        "## Scaling exponents",
        f"How latency grows with each swept parameter: `b` of latency ∝ x^b over the swept "
        f"range (1: linear, 2: quadratic), fitted per process on the log medians of its "
        f"records (a process with fewer than {MIN_POINTS} swept values gives no slope); the "
        f"interval ({1 - alpha:.0%}) is Student's t over processes, or with a single process "
        f"the least-squares one of its points (`points`). A change of "
        f"exponent is `changed` when its Welch interval lies wholly beyond "
        f"±{DEFAULT_EXPONENT_THRESHOLD}, `same` when wholly within, else `inconclusive` "
        f"(always so when a version has a single process).",
    ]
    table = pd.DataFrame({
        "benchmark": exponents["benchmark"], "params": exponents["params"],
        "swept": exponents["swept"], "jax": exponents["jax"],
        "exponent [CI]": [_interval(r.ci_low, r.ci_high, r.exponent)
                          for r in exponents.itertuples()],
        "processes": exponents["processes"], "points": exponents["points"],
    })  # fmt: skip
    parts.append(md.table(table))
    changes = exponent_changes(exponents, review.pairs, alpha=alpha)
    if not changes.empty:
        shown = pd.DataFrame({
            "benchmark": changes["benchmark"], "params": changes["params"],
            "swept": changes["swept"],
            "versions": changes["baseline"] + " → " + changes["candidate"],
            "exponents": [f"{r.exponent_baseline:.2f} → {r.exponent_candidate:.2f}"
                          for r in changes.itertuples()],
            "change [CI]": [_interval(r.ci_low, r.ci_high, r.difference)
                            for r in changes.itertuples()],
            "verdict": changes["verdict"], "reason": changes["reason"],
        })  # fmt: skip
        changed = int((changes["verdict"] == "changed").sum())
        parts.append(
            f"Changes of exponent between versions: {changed} `changed` of {len(changes)}.\n\n"
            + md.table(shown)
        )
    parts.append(_figure(ctx, changes))
    return "\n\n".join(parts)


#: At most this many families in the figure of latency against the swept parameters.
MAX_SWEEP_FACETS = 9


def _figure(ctx: ReportContext, changes: pd.DataFrame) -> str:
    """The latency-against-parameter figure: families whose exponent changed first."""
    points = swept_points(ctx.review.frame)
    keys = list(facets.SWEEP_KEYS)
    families = sorted(
        {tuple(map(str, k)) for k in points[keys].itertuples(index=False)},
        key=lambda k: case_sort_key(" ".join(map(str, k))),
    )
    changed = set()
    if not changes.empty:
        moved = changes[changes["verdict"] == "changed"]
        changed = {tuple(map(str, k)) for k in moved[keys].itertuples(index=False)}
    families.sort(key=lambda k: k not in changed)  # stable: the changed ones first
    chosen = families[:MAX_SWEEP_FACETS]
    path = ctx.save_figure(facets.sweep_grid(points, chosen), "latency-against-parameters")
    more = len(families) - len(chosen)
    tail = f" ({more} more in the table only.)" if more else ""
    return ("Median latency against each swept parameter (log-log; a dot per record, the line "
            "through the median at each value; families whose exponent changed first):\n\n"
            + md.image(path, "latency against swept parameters") + tail)  # fmt: skip
