"""The text sections of a version-upgrade report: verdict tables, environment, method, problems.

Each ``*_section`` function is a :data:`~jaxbench.analysis.report_context.Section`. The
``*_table`` functions give the same tables as display frames (text cells), for notebooks.
"""

from __future__ import annotations

import math

import pandas as pd

from jaxbench.analysis import markdown as md
from jaxbench.analysis.compare import (
    BASIS_FEW,
    BASIS_TESTS,
    BASIS_THRESHOLD,
    COMPILE,
    STEADY_STATE,
)
from jaxbench.analysis.conditions import DEFAULT_FIELDS
from jaxbench.analysis.drift import drift_by_version, sorted_findings
from jaxbench.analysis.report_context import ReportContext
from jaxbench.analysis.review import Review

METRIC_NAMES = {STEADY_STATE: "steady state", COMPILE: "compile time"}
BASIS_NAMES = {
    BASIS_TESTS: "CI + U test",
    BASIS_THRESHOLD: "threshold only",
    BASIS_FEW: "threshold only (too few for the test)",
}
VERDICTS = ("slower", "faster", "unchanged")
ARROW = "→"


def pair_label(baseline: str, candidate: str) -> str:
    """``0.4.9 → 0.4.10``."""
    return f"{baseline} {ARROW} {candidate}"


def _n(rows: pd.DataFrame) -> pd.Series:
    return rows["n_baseline"].astype(str) + " / " + rows["n_candidate"].astype(str)


def comparison_table(
    rows: pd.DataFrame, *, versions: bool = True, verdict: bool = False
) -> pd.DataFrame:
    """Rows of :attr:`Review.results` as text: medians in s/ms/µs, change, ratio with CI, p.

    Args:
        rows: Rows of :attr:`jaxbench.analysis.review.Review.results` (or of a
            :attr:`Comparison.table` with ``baseline`` and ``candidate`` columns).
        versions: Include the ``metric`` and ``versions`` (``baseline → candidate``) columns.
        verdict: Include the ``verdict`` column.

    Returns:
        Columns (``metric``,) ``case``, ``condition``, (``versions``,) ``baseline median``,
        ``candidate median``, ``change``, ``ratio [CI]``, ``p``, ``n`` (baseline / candidate),
        (``verdict``,) ``basis``; one row per input row, in order.
    """
    out = pd.DataFrame(index=rows.index)
    if versions:
        out["metric"] = rows["metric"].map(METRIC_NAMES)
    out["case"] = rows["case"]
    out["condition"] = rows["condition"]
    if versions:
        out["versions"] = [
            pair_label(a, b) for a, b in zip(rows["baseline"], rows["candidate"], strict=True)
        ]
    out["baseline median"] = rows["baseline_median_s"].map(md.seconds)
    out["candidate median"] = rows["candidate_median_s"].map(md.seconds)
    out["change"] = rows["ratio"].map(md.change)
    out["ratio [CI]"] = [
        md.ratio_ci(r, lo, hi)
        for r, lo, hi in zip(rows["ratio"], rows["ci_low"], rows["ci_high"], strict=True)
    ]
    out["p"] = rows["p_value"].map(md.p_value)
    out["n"] = _n(rows) if len(rows) else pd.Series(dtype=str)
    if verdict:
        out["verdict"] = rows["verdict"]
    out["basis"] = rows["basis"].map(lambda b: BASIS_NAMES.get(b, b))
    return out.reset_index(drop=True)


def verdict_counts(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows per metric and verdict: ``metric`` then one column per verdict, then ``total``."""
    counts = pd.crosstab(rows["metric"], rows["verdict"]).reindex(
        index=list(METRIC_NAMES), columns=list(VERDICTS), fill_value=0
    )
    counts = counts.fillna(0).astype(int)
    counts["total"] = counts.sum(axis=1)
    counts.index = counts.index.map(METRIC_NAMES)
    return counts.rename_axis("metric").reset_index().rename_axis(None, axis=1)


def environment_table(review: Review) -> pd.DataFrame:
    """Per version: JAX/jaxlib, Python, backend, device kind, host CPU, record counts, drift.

    Several values of one version (e.g. two machines) are joined with ``, ``.
    """
    frame = review.frame
    drift = drift_by_version(review.drift, review.versions)
    rows = []
    for version in review.versions:
        sub = frame[frame["version"].astype(str) == version]
        env = sub["env"].map(lambda e: e if isinstance(e, dict) else {})
        host = env.map(lambda e: e.get("host") if isinstance(e.get("host"), dict) else {})
        cpus = [
            f"{h.get('cpu_model')} ×{h.get('cpu_count')}"
            if h.get("cpu_count")
            else h.get("cpu_model")
            for h in host
        ]
        statuses = sub["status"].value_counts()
        other = ", ".join(f"{s} {n}" for s, n in statuses.items() if s != "ok")
        rows.append(
            {
                "version": version,
                "jax": _values(sub["jax"]),
                "jaxlib": _values(sub["jaxlib"]),
                "python": _values(env.map(lambda e: e.get("python"))),
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


def header_section(ctx: ReportContext) -> str:
    """Title, the versions and pairs, the mode, and the verdict counts in one sentence."""
    review = ctx.review
    results = review.results
    n_slow, n_fast = len(review.regressions), len(review.improvements)
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
    lines.append(f"- Comparison mode: **{review.mode.name}** (see Method)")
    lines.append(
        f"- **{n_slow} regression{'s' * (n_slow != 1)}**, {n_fast} improvement"
        f"{'s' * (n_fast != 1)}, {len(results) - n_slow - n_fast} unchanged, over {len(results)} "
        "comparisons (steady state and compile time counted apart)"
    )
    if review.problems:
        lines.append(
            f"- {len(review.problems)} file(s) or part(s) of files did not load: see Problems"
        )
    return "\n".join(lines)


def regressions_section(ctx: ReportContext) -> str:
    """Every ``slower`` row over all pairs, steady state first, largest ratio first."""
    rows = ctx.review.regressions
    return (
        "## Regressions\n\n"
        "Every case that got slower (verdict `slower`), over all compared pairs; steady state "
        "first, then compile time; largest ratio first. Ratio = candidate / baseline median "
        f"(above 1: slower), with its {ctx.review.settings.confidence:.0%} bootstrap interval; "
        "p: two-sided Mann-Whitney U; n: values baseline / candidate (samples for steady state, "
        "records for compile time).\n\n" + md.table(comparison_table(rows))
    )


def improvements_section(ctx: ReportContext) -> str:
    """Every ``faster`` row over all pairs, steady state first, smallest ratio first."""
    rows = ctx.review.improvements
    return (
        "## Improvements\n\nEvery case that got faster (verdict `faster`), columns as above; "
        "smallest ratio first.\n\n" + md.table(comparison_table(rows))
    )


def pairs_section(ctx: ReportContext) -> str:
    """Per pair: verdict counts, the full steady-state table and the full compile-time table."""
    review = ctx.review
    parts = ["## Comparisons by pair"]
    if not review.comparisons:
        parts.append(f"Only one version ({', '.join(review.versions)}): nothing to compare.")
        return "\n\n".join(parts)
    results = review.results
    for a, b in review.pairs:
        rows = results[(results["baseline"] == a) & (results["candidate"] == b)]
        parts.append(f"### {pair_label(a, b)}")
        parts.append("Verdicts:\n\n" + md.table(verdict_counts(rows)))
        for metric, title in (
            (STEADY_STATE, "Steady state (latency per call)"),
            (COMPILE, "Compile time (XLA compile per record)"),
        ):
            sub = rows[rows["metric"] == metric]
            parts.append(
                f"#### {title}: {pair_label(a, b)}\n\n"
                + md.table(comparison_table(sub, versions=False, verdict=True))
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


def drift_section(ctx: ReportContext) -> str:
    """Numerical drift findings (outputs past tolerance) per version, or that none were given."""
    drift = ctx.review.drift
    head = "## Numerical drift\n\n"
    if drift is None:
        return head + "Not checked: no drift results were given to this report."
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
        "timed in one version only is listed under Kept apart as unmatched.\n\n" + md.table(table)
    )


def kept_apart_section(ctx: ReportContext) -> str:
    """Why rows of one case were not pooled, and the cases that had no counterpart."""
    review = ctx.review
    reasons = list(dict.fromkeys(r for c in review.comparisons for r in c.kept_apart))
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
    return "\n\n".join(parts)


def problems_section(ctx: ReportContext) -> str:
    """The files (or parts of files) that failed to load, by name."""
    problems = ctx.review.problems
    if not problems:
        return "## Problems\n\nNone: every results file loaded."
    return (
        "## Problems\n\nThese files, or lines of them, did not load; the report is built from "
        "the rest:\n\n" + md.bullets(f"`{p.path}`: {p.reason}" for p in problems)
    )


def method_section(ctx: ReportContext) -> str:
    """Comparison mode, what is compared, the verdict rule, thresholds and bootstrap settings."""
    review = ctx.review
    s = review.settings
    t, tc = s.threshold, s.compile_threshold
    return "\n".join(
        [
            "## Method",
            "",
            f"**Comparison mode: {review.mode.name}.** {review.mode.description}",
            "",
            "**What is compared.** Each pair of versions is compared case by case (benchmark and "
            "parameters) under one measurement condition at a time "
            f"(fields: {', '.join(DEFAULT_FIELDS)}, each recorded environment variable and JAX "
            "flag). Steady state and compile time are separate rows, never mixed:",
            "",
            "- *steady state*: every timed call of the `ok` records (latency per call, blocked on "
            "the whole output), pooled per version; `recompiled` records are left out;",
            "- *compile time*: the XLA compile time of each record (one value per record); "
            "persistent-cache hits are left out.",
            "",
            "**Verdict rule** (ratio r = candidate median / baseline median):",
            "",
            f"- `slower`: the whole {s.confidence:.0%} bootstrap interval of r lies above 1, "
            f"r > 1 + t, and the two-sided Mann-Whitney U p < {s.alpha:g};",
            f"- `faster`: the interval lies below 1, r < 1 / (1 + t), and p < {s.alpha:g};",
            "- `unchanged` otherwise;",
            "- with a single value on a side (e.g. one compile per version) no interval or test "
            "is possible, and the verdict rests on the threshold alone (basis `threshold only`); "
            "the same when a side has so few values that the rank test could not reach alpha "
            "whatever they are (two a side: p >= 1/3; basis `threshold only (too few for the "
            "test)`).",
            "",
            f"Thresholds t: steady state {t:.1%}, compile time {tc:.1%}. Confidence level "
            f"{s.confidence:.0%}; percentile bootstrap of the ratio of medians, both sides "
            f"resampled independently, {s.n_resamples} resamples, seed {s.seed}. "
            "The bootstrap treats successive samples as independent, so intervals are somewhat "
            "narrow; the threshold covers that.",
        ]
    )
