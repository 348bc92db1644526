"""A bisection in words: per case, the steps, the first slow release and what is unsettled."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from jaxbench.bisect.search import Bisection


def case_lines(result: Bisection, case: str) -> list[str]:
    """What the search found for one case, one finding a line (Markdown list items).

    The end-to-end verdict (BAD against GOOD, where it was judged), each step with its
    ratio and interval, the first slow release, boundaries the data could not settle, and a
    change end to end that no single step explains (a creep over several releases).
    """
    good, bad = result.releases[0], result.releases[-1]
    lines = []
    end = result.against_good.get(bad, {}).get(case)
    if end is not None:
        lines.append(f"- {bad} against {good}: {end.text()}")
    steps = [b for b in result.steps if b.case == case]
    for b in steps:
        lines.append(f"- **step {b.before} -> {b.after}: {b.judgement.text()}**")
    first = result.first_slow(case)
    lines.append(f"- first slow release: {first}" if first else "- no release was slower")
    for b in result.boundaries:
        if b.case == case and not b.is_step:
            note = f" ({b.judgement.note})" if b.judgement.note else ""
            lines.append(f"- unsettled {b.before} -> {b.after}: {b.judgement.text()}{note}")
    if end is not None and end.verdict in ("slower", "faster") and not steps:
        lines.append(
            f"- {end.verdict} end to end, but no pair of neighbouring releases was: the change "
            "came in steps below the threshold, or the data could not settle them"
        )
    return lines


def sweep_table(result: Bisection) -> list[str]:
    """Markdown table: each release's ratio and verdict against GOOD, one column per case."""
    if not result.against_good:
        return []
    head = ["release", *result.cases]
    rows = [head, ["---"] * len(head)]
    for release in result.releases[1:]:
        got = result.against_good.get(release)
        if got is None:
            continue
        rows.append([release, *(got[c].text() if c in got else "" for c in result.cases)])
    return ["| " + " | ".join(r) + " |" for r in rows]


def markdown(
    result: Bisection,
    title: str,
    files: Sequence[str],
    explanations: Mapping[tuple[str, str, str], list[str]],
    unit: str = "process pairs",
    sources: str = "Comparisons",
) -> str:
    """The whole report: releases, strategy, per case its findings and explanations, the files.

    Args:
        result: The search.
        title: The first heading.
        files: The files the verdicts come from (``interleave-<id>.jsonl``, or sweep folders).
        explanations: ``(case, before, after) -> jaxbench explain's lines`` for each step.
        unit: What the intervals are taken over (``process pairs``, or ``processes``).
        sources: The heading of the list of ``files``.
    """
    out = [f"# {title}", "",
           f"Releases ({len(result.releases)}): {', '.join(result.releases)}. Strategy: "
           f"{result.strategy}. Comparisons: {len(result.comparisons)}.", ""]  # fmt: skip
    table = sweep_table(result)
    if table:
        good = result.releases[0]
        out += [f"## Each release against GOOD ({good})", "", f"Time of the release over "
                f"{good}'s, its 95 % interval over {unit}, and the verdict.", "", *table,
                ""]  # fmt: skip
    for case in result.cases:
        out += [f"## {case}", "", *case_lines(result, case), ""]
        for (c, before, after), lines in explanations.items():
            if c == case:
                out += [f"### What changed in the program, {before} -> {after}", "", "```",
                        *lines, "```", ""]  # fmt: skip
    out += [f"## {sources}", "", *(f"- `{f}`" for f in files), ""]
    return "\n".join(out)
