"""Lines more than one command prints: scaling exponents' changes, recorded and live."""

from __future__ import annotations

from typing import Any

from jaxbench.cli.options import console


def print_exponent_changes(
    frame: Any, by: str, baseline: str, candidate: str, alpha: float
) -> None:
    """One line per swept parameter whose scaling exponent both sides have (analysis.scaling).

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` of both sides.
        by: The column naming the side (``jax`` or ``side``).
        baseline: Its value for the baseline.
        candidate: Its value for the candidate.
        alpha: ``1 -`` the confidence level of the exponents' intervals.
    """
    from jaxbench.analysis.scaling import exponent_changes, exponents_frame

    changes = exponent_changes(exponents_frame(frame, alpha, by=by), [(baseline, candidate)],
                               alpha=alpha)  # fmt: skip
    for r in changes.itertuples():
        why = f" ({r.reason})" if r.reason else ""
        console.print(
            f"scaling: {r.benchmark} {r.params}: exponent of latency in {r.swept} "
            f"{r.exponent_baseline:.2f} -> {r.exponent_candidate:.2f}, change "
            f"{r.difference:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}]: {r.verdict}{why}",
            highlight=False,
            soft_wrap=True,
        )


def print_live_exponent_changes(comparisons: list, alpha: float) -> None:
    """One line per swept parameter of a live run, its exponent judged over process pairs.

    The live counterpart of :func:`print_exponent_changes`
    (:func:`jaxbench.analysis.scaling.live_exponent_changes`); nothing where no parameter is
    swept.

    Args:
        comparisons: The run's :class:`~jaxbench.store.live.CaseComparison` objects.
        alpha: ``1 -`` the confidence level, before it is split over looks.
    """
    from jaxbench.analysis.scaling import live_exponent_changes

    for r in live_exponent_changes(comparisons, alpha=alpha).itertuples():
        why = f" ({r.reason})" if r.reason else ""
        console.print(
            f"scaling: {r.benchmark} {r.params}: exponent of latency in {r.swept} "
            f"{r.exponent_baseline:.2f} -> {r.exponent_candidate:.2f}, change "
            f"{r.difference:+.2f} [{r.ci_low:+.2f}, {r.ci_high:+.2f}] over {r.pairs} live "
            f"pair{'s' if r.pairs != 1 else ''}: {r.verdict}{why}",
            highlight=False,
            soft_wrap=True,
        )
