"""The text sections of a version-upgrade report: verdict tables, environment, drift, problems.

Each ``*_section`` function is a :data:`~jaxbench.analysis.report_context.Section`. The
``*_table`` functions give the same tables for notebooks: :func:`comparison_table` as the one
table model (:class:`~jaxbench.analysis.text_table.TextTable`) that the terminal renders too,
the others as display frames (text cells).
"""

from __future__ import annotations

import math

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import COMPILE, STEADY_STATE
from jaxbench.analysis.conditions import split_series
from jaxbench.analysis.drift import drift_by_version, sorted_findings
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.review import Review
from jaxbench.analysis.text_table import Column, TextTable
from jaxbench.analysis.versions import version_key
from jaxbench.inference.verdicts import VERDICTS
from jaxbench.store import Env

METRIC_NAMES = {STEADY_STATE: "steady state", COMPILE: "compile time"}
ARROW = "→"


def pair_label(baseline: str, candidate: str) -> str:
    """``0.4.9 → 0.4.10``."""
    return f"{baseline} {ARROW} {candidate}"


def processes_cell(n_baseline: object, n_candidate: object) -> str:
    """``4+4``: the processes of each side that an interval rests on."""
    return f"{_count(n_baseline)}+{_count(n_candidate)}"


def _count(value: object) -> str:
    return md.NOT_AVAILABLE if value is None or _nan(value) else str(int(value))  # type: ignore[call-overload]


#: The columns of the terminal's comparison table (``compact``): the report has them all.
COMPACT = ("metric", "case", "condition", "processes", "baseline median", "candidate median",
           "ratio [CI]", "detectable", "verdict")  # fmt: skip
#: Cells that are figures: right-aligned in the terminal and in the report.
FIGURES = ("baseline median", "candidate median", "change", "ratio [CI]", "p", "processes",
           "calls", "detectable", "pairs", "rounds x calls")  # fmt: skip
TWO_CONDITIONS = "a case under two conditions is two rows, never pooled: see kept apart"


def column(header: str) -> Column:
    """The :class:`Column` of ``header`` in a comparison table: figures right, verdicts marked."""
    return Column(header, "right" if header in FIGURES else "left", verdict=header == "verdict")


def comparison_table(
    rows: pd.DataFrame,
    *,
    versions: bool = True,
    verdict: bool = False,
    advice: bool = False,
    compact: bool = False,
    title: str = "",
) -> TextTable:
    """Rows of :attr:`Review.results` as text: medians, change, ratio with interval, processes.

    The one builder of the recorded comparison table: the report renders it as Markdown, the
    ``compare`` command (``compact``) with rich, a notebook as a frame (:meth:`TextTable.frame`).

    Args:
        rows: Rows of :attr:`jaxbench.analysis.review.Review.results` (or of a
            :attr:`Comparison.table`, which has no ``baseline`` and ``candidate`` columns:
            then ``versions=False``).
        versions: Include the ``metric`` and ``versions`` (``baseline → candidate``) columns.
        verdict: Include the ``verdict`` column.
        advice: Include the ``advice`` column: what would settle an ``inconclusive`` row, why
            a row is ``unstable``.
        compact: The terminal's columns (:data:`COMPACT`; the flags above are then ignored),
            with ``condition`` only where a case was measured under more than one condition
            (then a note says its rows are never pooled).
        title: The table's title.

    Returns:
        Columns (``metric``,) ``case``, ``condition``, (``versions``,) ``baseline median``,
        ``candidate median``, ``change``, ``ratio [CI]``, ``p``, ``processes`` (baseline +
        candidate), ``calls`` (baseline / candidate), ``detectable`` (smallest slowdown found
        with 80 % power), (``verdict``,) (``advice``); one row per input row, in order.
    """
    cells: dict[str, list[str]] = {}
    if versions or compact:
        cells["metric"] = [METRIC_NAMES.get(m, m) for m in rows["metric"]]
    cells["case"] = list(rows["case"])
    cells["condition"] = list(rows["condition"])
    if versions and not compact:
        cells["versions"] = [
            pair_label(a, b) for a, b in zip(rows["baseline"], rows["candidate"], strict=True)
        ]
    cells["baseline median"] = list(rows["baseline_median_s"].map(md.seconds))
    cells["candidate median"] = list(rows["candidate_median_s"].map(md.seconds))
    cells["change"] = list(rows["ratio"].map(md.change))
    cells["ratio [CI]"] = [
        md.ratio_ci(r, lo, hi)
        for r, lo, hi in zip(rows["ratio"], rows["ci_low"], rows["ci_high"], strict=True)
    ]
    cells["p"] = list(rows["p_value"].map(md.p_value))
    cells["processes"] = [
        processes_cell(a, b) for a, b in zip(rows["n_baseline"], rows["n_candidate"], strict=True)
    ]
    cells["calls"] = [
        f"{_count(a)} / {_count(b)}"
        for a, b in zip(rows["calls_baseline"], rows["calls_candidate"], strict=True)
    ]
    cells["detectable"] = list(rows["detectable"].map(md.share))
    cells["verdict"] = list(rows["verdict"])
    cells["advice"] = list(rows["advice"].fillna(""))
    notes: list[str] = []
    if compact:
        shown = list(COMPACT)
        per_case = rows.groupby(["metric", "case"])["condition"].nunique()
        several = not rows.empty and bool((per_case > 1).any())
        if several:
            notes.append(TWO_CONDITIONS)
        else:
            shown.remove("condition")
    else:
        shown = [h for h in cells if (h != "verdict" or verdict) and (h != "advice" or advice)]
    return TextTable.of({column(h): cells[h] for h in shown}, title=title, notes=notes)


def verdict_counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows per metric and verdict: ``metric`` then one column per verdict, then ``total``."""
    counts = pd.crosstab(rows["metric"], rows["verdict"]).reindex(
        index=list(METRIC_NAMES), columns=list(VERDICTS), fill_value=0
    )
    counts = counts.fillna(0).astype(int)
    counts["total"] = counts.sum(axis=1)
    counts.index = counts.index.map(METRIC_NAMES)
    return counts.rename_axis("metric").reset_index().rename_axis(None, axis=1)


def summary_counts(review: Review) -> pd.DataFrame:
    """Per pair and metric: ``versions``, ``metric``, one column per verdict, ``total``."""
    parts = []
    results = review.results
    for a, b in review.pairs:
        rows = results[(results["baseline"] == a) & (results["candidate"] == b)]
        parts.append(verdict_counts(rows).assign(versions=pair_label(a, b)))
    columns = ["versions", "metric", *VERDICTS, "total"]
    if not parts:
        return pd.DataFrame(columns=columns)
    return pd.concat(parts, ignore_index=True)[columns]


def environment_table(review: Review) -> pd.DataFrame:
    """Per version: JAX/jaxlib, Python, backend, device kind, host CPU, record counts, drift.

    Several values of one version (e.g. two machines) are joined with ``, ``.
    """
    frame = review.frame
    drift = drift_by_version(review.drift, review.versions)
    rows = []
    for version in review.versions:
        sub = frame[frame["version"].astype(str) == version]
        env = sub["env"].map(lambda e: e if isinstance(e, Env) else Env())
        cpus = [
            f"{e.host.cpu_model} ×{e.host.cpu_count}" if e.host.cpu_count else e.host.cpu_model
            for e in env
        ]
        statuses = sub["status"].value_counts()
        other = ", ".join(f"{s} {n}" for s, n in statuses.items() if s != "ok")
        rows.append(
            {
                "version": version,
                "jax": _values(sub["jax"]),
                "jaxlib": _values(sub["jaxlib"]),
                "python": _values(env.map(lambda e: e.python)),
                "backend": _values(sub["backend"]),
                "device kind": _values(sub["device_kind"]),
                "host CPU": _values(cpus),
                "records": len(sub),
                "ok": int(statuses.get("ok", 0)),
                "not ok": other or "0",
                "drift": drift[version],
            }
        )
    return pd.DataFrame(rows)


def _values(values: object) -> str:
    distinct = sorted({str(v) for v in values if v is not None and not _nan(v)})
    return ", ".join(distinct) or md.NOT_AVAILABLE


def _nan(value: object) -> bool:
    return isinstance(value, float) and math.isnan(value)


# -- sections ----------------------------------------------------------------------------------


def verdict_sentence(counts: dict[str, int]) -> str:
    """``**2 slower**, **1 faster**, 5 same (verdicts that hold); 30 inconclusive, 0 unstable``."""

    def n(verdict: str) -> str:
        return f"{counts.get(verdict, 0)} {verdict}"

    return (
        f"**{n('slower')}**, **{n('faster')}**, {n('same')} (verdicts that hold); "
        f"{n('inconclusive')}, {n('unstable')}"
    )


def header_section(ctx: ReportContext) -> str:
    """Title, the versions and pairs, the design, and the verdict counts (sentence and table)."""
    review = ctx.review
    text = header(review, recorded_counts(review))
    if review.pairs:
        text += "\n\nVerdicts per pair:\n\n" + md.table(summary_counts(review))
    return text


def header(review: Review, counts: str) -> str:
    """The report's title, sources, versions, pairs and design, then ``counts`` as a bullet.

    Args:
        review: The review reported.
        counts: The counts the report leads with, one line of Markdown without the bullet
            (:func:`recorded_counts` for a report of result sets).

    Returns:
        Markdown; a line on problems with results files follows the counts where there are any.
    """
    lines = [
        f"# JAX version review: {f' {ARROW} '.join(review.versions)}",
        "",
        "Which train steps, compiles and forward-mode products got slower or faster between JAX "
        "versions, by how much, and whether the change is real (rule under Method).",
        "",
    ]
    if review.sources:
        lines.append("- Results: " + ", ".join(f"`{s}`" for s in review.sources))
    lines.append(f"- Versions (version order): {', '.join(review.versions)}")
    if review.pairs:
        lines.append("- Compared: " + "; ".join(pair_label(a, b) for a, b in review.pairs))
    lines.append(f"- Comparison design: **{review.design.name}** (see Method)")
    lines.append(f"- {counts}")
    if review.problems:
        lines.append(
            f"- {len(review.problems)} problem(s) with results files (not loaded, or loaded "
            "with a caveat): see Problems"
        )
    return "\n".join(lines)


def recorded_counts(review: Review) -> str:
    """The verdict counts of the recorded runs, every comparison row, as one sentence."""
    return (
        f"{verdict_sentence(review.verdict_counts())}, over {len(review.results)} comparisons "
        "(steady state and compile time counted apart). `inconclusive`: the data cannot tell "
        "either way (see Inconclusive and unstable for what would settle it); `unstable`: the "
        "machine changed under the comparison"
    )


def _columns_note(ctx: ReportContext) -> str:
    s = ctx.review.settings
    return (
        "Ratio = candidate / baseline (geometric mean over processes of each process's median; "
        f"above 1: slower), with its {s.confidence:.0%} interval over processes; p: two-sided "
        "Welch t test on the log per-process medians; processes: baseline + candidate processes "
        "the interval rests on; calls: timed values nested in them (calls for steady state, "
        "compiles for compile time); detectable: the smallest slowdown this comparison calls "
        "`slower` with 80 % power."
    )


def regressions_section(ctx: ReportContext) -> str:
    """Every ``slower`` row over all pairs, steady state first, largest ratio first."""
    rows = ctx.review.regressions
    t = ctx.review.settings
    return (
        "## Regressions\n\n"
        "Every case that got slower (verdict `slower`: the interval lies above 1 and the "
        f"estimate is at least 1 + threshold, {t.threshold:.1%} for steady state and "
        f"{t.compile_threshold:.1%} for compile time), over all compared pairs; steady state "
        "first, then compile time; largest "
        f"ratio first. {_columns_note(ctx)}\n\n" + md.table(comparison_table(rows))
    )


def improvements_section(ctx: ReportContext) -> str:
    """Every ``faster`` row over all pairs, steady state first, smallest ratio first."""
    rows = ctx.review.improvements
    return (
        "## Improvements\n\nEvery case that got faster (verdict `faster`: the interval lies "
        "below 1 and the estimate is at most 1 / (1 + threshold)), columns as above; smallest "
        "ratio first.\n\n" + md.table(comparison_table(rows))
    )


def _apparent(rows: pd.DataFrame, review: Review) -> pd.Series:
    """Whether each row's estimate lies beyond its metric's threshold (either way)."""
    s = review.settings
    bound = rows["metric"].map({STEADY_STATE: s.threshold, COMPILE: s.compile_threshold})
    ratio = pd.to_numeric(rows["ratio"], errors="coerce")
    return (ratio > 1 + bound) | (ratio < 1 / (1 + bound))


def inconclusive_section(ctx: ReportContext) -> str:
    """``unstable`` rows with their reason; ``inconclusive`` ones that look changed, with advice."""
    review = ctx.review
    unstable, inconclusive = review.unstable, review.inconclusive
    parts = ["## Inconclusive and unstable"]
    if unstable.empty:
        parts.append(
            "No comparison of recorded runs is `unstable`: no noise indicator says the "
            "machine changed (live comparisons: their own section)."
        )
    else:
        table = comparison_table(unstable, advice=True).renamed({"advice": "reason"})
        parts.append(
            f"{len(unstable)} comparison(s) are `unstable`: the noise indicators recorded beside "
            "the timings (CPU share of the timed region, hypervisor steal, drift between the "
            "halves of a run) say the machine changed under them, so they are never called "
            "`slower` or `faster`. Rerun them on a quiet machine. Reason per row:"
        )
        parts.append(md.table(table))
    if inconclusive.empty:
        parts.append(
            "No comparison of recorded runs is `inconclusive` (live comparisons: their "
            "own section)."
        )
        return "\n\n".join(parts)
    apparent = inconclusive[_apparent(inconclusive, review).to_numpy()]
    parts.append(
        f"{len(inconclusive)} comparison(s) are `inconclusive`: their interval is too wide to "
        "show a change beyond the threshold or its absence (the verdict `same`). That is no "
        "finding either way; `advice` says what would settle it (usually more processes: the "
        "interval narrows with the spread between processes, not with more calls in each), "
        "`detectable` the smallest slowdown the comparison would have found."
    )
    if apparent.empty:
        parts.append("None of them has an estimate beyond the threshold.")
    else:
        rest = len(inconclusive) - len(apparent)
        parts.append(
            f"The {len(apparent)} whose estimate lies beyond the threshold (apparent changes: "
            "leads to rerun with more processes, not findings), largest change first; the other "
            f"{rest} are in the tables by pair:"
        )
        parts.append(md.table(comparison_table(apparent, advice=True)))
    return "\n\n".join(parts)


def pairs_section(ctx: ReportContext) -> str:
    """Per pair: verdict counts, the full steady-state table and the full compile-time table."""
    review = ctx.review
    parts = ["## Comparisons by pair"]
    if not review.comparisons:
        parts.append(f"Only one version ({', '.join(review.versions)}): nothing to compare.")
        return "\n\n".join(parts)
    results = review.results
    parts.append(
        "Every comparison, with its verdict; `advice`: what would settle an `inconclusive` "
        "row, or why a row is `unstable`."
    )
    for a, b in review.pairs:
        rows = results[(results["baseline"] == a) & (results["candidate"] == b)]
        parts.append(f"### {pair_label(a, b)}")
        parts.append("Verdicts:\n\n" + md.table(verdict_counts(rows)))
        for metric, title in (
            (STEADY_STATE, "Steady state (latency per call)"),
            (COMPILE, "Compile time (XLA compile per process)"),
        ):
            sub = rows[rows["metric"] == metric]
            parts.append(
                f"#### {title}: {pair_label(a, b)}\n\n"
                + md.table(comparison_table(sub, versions=False, verdict=True, advice=True))
            )
    return "\n\n".join(parts)


def environment_section(ctx: ReportContext) -> str:
    """Per version: versions, Python, backend, device, host CPU, record counts, drift."""
    return (
        "## Versions and environment\n\n"
        "Per JAX version under review; several values are joined with commas. `not ok`: records "
        "that were not timed (see Not timed); `drift`: numerical drift findings (see Numerical "
        "drift).\n\n" + md.table(environment_table(ctx.review))
    )


def checked_sets(drift: pd.DataFrame) -> str:
    """Which workloads and sets a drift frame checked, per version: one Markdown sentence."""
    if drift.empty:
        return "Checked: nothing."
    parts = []
    for workload, rows in drift.groupby("workload", sort=True):
        sets = sorted(rows["set"].astype(str).unique())
        versions = ", ".join(sorted({str(v) for v in rows["version"].dropna()}, key=version_key))
        shown = ", ".join(f"`{x}`" for x in sets[:4]) + (f" and {len(sets) - 4} more"
                                                           if len(sets) > 4 else "")  # fmt: skip
        parts.append(f"`{workload}` ({len(sets)} set(s): {shown}; JAX {versions})")
    return "Checked: " + "; ".join(parts) + "."


def drift_section(ctx: ReportContext) -> str:
    """Numerical drift findings (outputs past tolerance) per version, or that none were given."""
    drift = ctx.review.drift
    head = "## Numerical drift\n\n"
    if drift is None:
        return head + "Not checked: no drift results were given to this report."
    head += checked_sets(drift) + "\n\n"
    found = sorted_findings(drift)
    if found.empty:
        return head + f"No findings: all {len(drift)} checked outputs are within tolerance."
    shown = found.assign(
        **{c: found[c].map(md.number) for c in ("max_abs_err", "max_rel_err", "rtol", "atol")}
    )
    return (
        head + f"{len(found)} of {len(drift)} checked outputs moved past their tolerance "
        "(`within_tolerance` false; `finding` says why):\n\n" + md.table(shown)
    )


def not_timed_table(review: Review) -> pd.DataFrame:
    """Records without a steady state, grouped by status and reason, counted per version.

    Returns:
        Columns ``status``, ``reason`` (the record's ``error``, at most 160 characters), one
        count column per version (version order), ``cases`` (how many distinct cases) and
        ``example`` (one such case); ``failed`` first, then ``recompiled``, then ``skipped``.
    """
    rows = review.not_timed
    columns = ["status", "reason", *review.versions, "cases", "example"]
    if rows.empty:
        return pd.DataFrame(columns=columns)
    rows = rows.assign(
        reason=rows["error"].fillna("").astype(str).str.slice(0, 160),
        version=rows["version"].astype(str),
    )
    out = []
    for (status, reason), group in rows.groupby(["status", "reason"], sort=False):
        counts = group["version"].value_counts()
        out.append(
            {"status": status, "reason": reason}
            | {v: int(counts.get(v, 0)) for v in review.versions}
            | {"cases": group["case"].nunique(), "example": sorted(group["case"])[0]}
        )
    order = {"failed": 0, "recompiled": 1}
    table = pd.DataFrame(out, columns=columns)
    rank = table["status"].map(lambda s: order.get(s, 2))
    return table.assign(rank=rank).sort_values(["rank", "reason"]).drop(columns="rank")


def not_timed_section(ctx: ReportContext) -> str:
    """Records with no steady state (failed, skipped, recompiled), counted per version."""
    table = not_timed_table(ctx.review)
    if table.empty:
        return "## Not timed\n\nEvery record of the versions under review was timed (`ok`)."
    return (
        "## Not timed\n\nRecords without a steady state, by status and reason, with the number "
        "of records per version: `failed` and `skipped` were never timed, `recompiled` compiled "
        "inside the timed region. They are left out of the steady-state comparisons; a case "
        "timed in one version only is listed under Kept apart: as unmatched, or as failed where "
        "the other version recorded it, never `ok`.\n\n" + md.table(table)
    )


def kept_apart_section(ctx: ReportContext) -> str:
    """Why rows of one case were not pooled, and the cases that had no counterpart."""
    review = ctx.review
    within = split_series(review.frame).reasons if "case" in review.frame else []
    reasons = list(dict.fromkeys([*within, *(r for c in review.comparisons for r in c.kept_apart)]))
    parts = [
        "## Kept apart",
        "Rows of one case are pooled and compared only under one measurement condition (same "
        "source, backend, device, machine, CPU, Python, jaxlib, timing settings, environment "
        "variables and JAX flags). Conditions that share a case but differ, and which fields "
        "differ:",
        md.bullets(reasons),
    ]
    for c in review.comparisons:
        parts.append(f"Unmatched in {pair_label(c.baseline, c.candidate)}:")
        parts.append(md.bullets(c.unmatched))
        if c.failed:
            parts.append(f"Timed by one version, failed in the other, in "
                         f"{pair_label(c.baseline, c.candidate)}:")  # fmt: skip
            parts.append(md.bullets(map(str, c.failed)))
    return "\n\n".join(parts)


def problems_section(ctx: ReportContext) -> str:
    """The files (or parts of files) that failed to load, by name."""
    problems = ctx.review.problems
    if not problems:
        return "## Problems\n\nNone: every results file loaded."
    return (
        "## Problems\n\nThese files, or lines of them, did not load, or loaded with the caveat "
        "given; the report is built from what loaded:\n\n"
        + md.bullets(f"`{p.path}`: {p.reason}" for p in problems)
    )
