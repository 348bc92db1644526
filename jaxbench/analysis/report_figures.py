"""The figure sections of a version-upgrade report: latency, ECDF, compile time, crossover.

One figure per case group and measurement condition, faceted by case (:mod:`.facets`), with
versions in version order. Groups are the train steps (every case, up to :data:`MAX_FACETS`),
the forward-mode cases (the :data:`MAX_FORWARD` whose steady state moved most between versions)
and any other benchmark (e.g. asv's, the :data:`MAX_FORWARD` that moved most). The compile
figure shows the :data:`MAX_FACETS` cases whose compile time moved most. A case moved by
``max |log(ratio)|`` over the compared pairs; cases never compared come last, by name. The
crossover section tables every forward-mode series and draws at most
:data:`MAX_CROSSOVER_FIGURES` of them (one row per version), those whose crossover K differs
between versions first.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from jaxbench.analysis import facets
from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import COMPILE, STEADY_STATE
from jaxbench.analysis.conditions import CONDITION
from jaxbench.analysis.forward import CROSSOVERS, SERIES, crossover_table, forward_series
from jaxbench.analysis.frames import compile_times, drawn_samples
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.review import Review
from jaxbench.store.record import case_sort_key

MAX_FACETS = 12  # cases in one figure
MAX_FORWARD = 6  # forward-mode (or other) cases in the latency figures
MAX_CROSSOVER_FIGURES = 4  # forward-mode series drawn (all are in the table)
#: Calls of one version of a case that its latency figures draw (:func:`drawn_samples`): the
#: ECDF of that many order statistics is off by at most 1 / 999 of the axes' height, under a
#: pixel of a 3.4-inch facet at the report's 100 dpi.
DRAWN_CALLS = 1000


def case_group(benchmark: str) -> str:
    """``"train step"``, ``"forward mode"`` or ``"other"`` for a benchmark name."""
    name = str(benchmark).lower()
    if "train_step" in name or "trainstep" in name:
        return "train step"
    if name.startswith("forward/") or "forward" in name:
        return "forward mode"
    return "other"


def movement(review: Review, metric: str) -> pd.Series:
    """Per case: ``max |log(ratio)|`` of ``metric`` over the compared pairs (NaN ratios ignored)."""
    rows = review.results[review.results["metric"] == metric]
    ratio = pd.to_numeric(rows["ratio"], errors="coerce")
    moved = np.abs(np.log(ratio.where(ratio > 0)))
    return moved.groupby(rows["case"]).max().dropna()


def ranked_cases(cases: list[str], moved: pd.Series, limit: int) -> list[str]:
    """``cases`` that moved most first (by ``moved``), then the rest in sweep order; <= ``limit``.

    Sweep order: numbers in the labels by value (:func:`jaxbench.store.record.case_sort_key`).
    """
    ranked = sorted(set(cases), key=lambda c: (-moved.get(c, -math.inf), case_sort_key(c)))
    return ranked[:limit]


def _conditions(rows: pd.DataFrame) -> list[str]:
    counts = rows[CONDITION].value_counts()
    return sorted(counts.index, key=lambda c: (-counts[c], c))


def _omitted(shown: int, total: int) -> str:
    return f" ({total - shown} more case(s) in the tables only.)" if total > shown else ""


def _picks(review: Review, samples: pd.DataFrame) -> list[tuple[str, list[str], int]]:
    """``(group, cases to draw, cases in the group)`` for the latency figures of one condition."""
    moved = movement(review, STEADY_STATE)
    benchmarks = samples["benchmark"]
    groups = benchmarks.map({b: case_group(b) for b in benchmarks.unique()})  # once a benchmark
    out = []
    for group, limit in (("train step", MAX_FACETS), ("forward mode", MAX_FORWARD)):
        cases = sorted(samples.loc[groups == group, "case"].unique())
        if cases:
            out.append((group, ranked_cases(cases, moved, limit), len(cases)))
    others = sorted(samples.loc[groups == "other", "case"].unique())  # per case, not per call
    if others:
        out.append(("other", ranked_cases(others, moved, MAX_FORWARD), len(others)))
    return out


def latency_section(ctx: ReportContext) -> str:
    """Violins (log space) per group and condition, then one ECDF figure per condition."""
    review = ctx.review
    by = [c for c in (CONDITION, "case", "benchmark", "version") if c in review.frame]
    samples = drawn_samples(review.frame, by, DRAWN_CALLS)
    parts = [
        "## Latency distributions",
        "Steady-state latency per call for each version, log scale (violin densities estimated "
        "in log space). Train steps: every case; forward mode and others: the cases whose "
        "median moved most between versions. Each version of a case is drawn from at most "
        f"{DRAWN_CALLS:,} of its calls, evenly spaced in rank from the fastest to the slowest.",
    ]
    if samples.empty:
        parts.append("No steady-state samples.")
        return "\n\n".join(parts)
    for i, condition in enumerate(_conditions(samples)):
        rows = samples[samples[CONDITION] == condition]
        picks = _picks(review, rows)
        parts.append(f"### Condition {condition}")
        drawn: list[str] = []
        for group, cases, total in picks:
            fig = facets.latency_grid(rows, cases)
            path = ctx.save_figure(fig, f"latency-{group}-{i}-{condition}")
            parts.append(
                md.image(path, f"latency {group} {condition}") + _omitted(len(cases), total)
            )
            drawn.extend(cases)
        path = ctx.save_figure(facets.ecdf_grid(rows, drawn), f"ecdf-{i}-{condition}")
        parts.append("ECDF of the same cases:\n\n" + md.image(path, f"ECDF {condition}"))
    return "\n\n".join(parts)


def compile_section(ctx: ReportContext) -> str:
    """Compile-time bars per version, one figure per condition, the cases that moved most."""
    review = ctx.review
    compiles = compile_times(review.frame)
    parts = [
        "## Compile time",
        "XLA compile time per version: bar at the median, one dot per record; the cases whose "
        "compile time moved most between versions.",
    ]
    if compiles.empty:
        parts.append("No compile times.")
        return "\n\n".join(parts)
    moved = movement(review, COMPILE)
    for i, condition in enumerate(_conditions(compiles)):
        rows = compiles[compiles[CONDITION] == condition]
        cases = sorted(set(rows["case"]))
        chosen = ranked_cases(cases, moved, MAX_FACETS)
        path = ctx.save_figure(facets.compile_grid(rows, chosen), f"compile-{i}-{condition}")
        parts.append(
            f"### Condition {condition}\n\n"
            + md.image(path, f"compile time {condition}")
            + _omitted(len(chosen), len(cases))
        )
    return "\n\n".join(parts)


def _k(value: float, k_max: int) -> str:
    if math.isinf(value):
        return f"none up to K = {k_max}"
    return "not measured" if math.isnan(value) else f"{value:.3g}"


def crossover_display(table: pd.DataFrame) -> pd.DataFrame:
    """:func:`jaxbench.analysis.forward.crossover_table` rows as text, for a report or notebook."""
    names = {
        "k_linearize_vs_vmap_jvp": "linearize < vmap(jvp) from K",
        "k_linearize_vs_jvp_loop": "linearize < jvp loop from K",
    }
    out = table.rename(
        columns={"param.size": "size", "param.dtype": "dtype", "param.wrt": "wrt"}
    ).copy()
    for column in CROSSOVERS:
        out[column] = [_k(v, k) for v, k in zip(table[column], table["k_max"], strict=True)]
    return out.rename(columns=names)


def crossover_section(ctx: ReportContext) -> str:
    """Forward-mode crossover K per series and version, and one figure per series."""
    review = ctx.review
    table = crossover_table(review.frame)
    parts = [
        "## Forward mode: crossover",
        "K from which linearize (linearize + K applications) takes less time per call than "
        "vmap(jvp) and than a loop of K jvps (log-log interpolation between measured Ks). "
        "Figures: median time per call of each strategy and the memory it holds between calls, "
        "against K, one row per version, crossover of linearize and vmap(jvp) dashed.",
    ]
    if table.empty:
        parts.append("No forward-mode records.")
        return "\n\n".join(parts)
    parts.append(md.table(crossover_display(table)))
    # Series whose crossover K differs between versions are drawn first.
    changed = table.groupby(list(SERIES), observed=True)[list(CROSSOVERS)].nunique(dropna=False)
    changed = (changed.max(axis=1) > 1).rename(index=str)
    series = forward_series(review.frame)
    order = sorted(series, key=lambda item: (not changed.get(item[0], False), item[0]))
    for i, ((size, dtype, wrt, condition), rows) in enumerate(order[:MAX_CROSSOVER_FIGURES]):
        fig = facets.crossover_grid(rows, review.versions)
        path = ctx.save_figure(fig, f"crossover-{i}-{size}-{dtype}-{wrt}-{condition}")
        parts.append(
            f"### {size} {dtype} wrt={wrt}, {condition}\n\n"
            + md.image(path, f"forward crossover {size} {dtype} {wrt}")
        )
    if len(order) > MAX_CROSSOVER_FIGURES:
        parts.append(f"{len(order) - MAX_CROSSOVER_FIGURES} more series in the table only.")
    return "\n\n".join(parts)


#: Figure sections in report order.
FIGURE_SECTIONS: tuple[Callable[[ReportContext], str], ...] = (
    latency_section,
    compile_section,
    crossover_section,
)
