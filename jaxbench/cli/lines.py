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


class PairProgress:
    """The line after each saved pair of a live comparison, with the time it may still take.

    ``pair 4 done (up to 30; 9.8 s a pair, at most about 4 min left); saved <file>``: the mean
    time of the pairs so far, times the pairs the cap still allows. Decided cases stop earlier,
    so the estimate is an upper bound, not a forecast.

    Args:
        max_pairs: The schedule's cap on pairs.
        prefix: Put before the line (e.g. ``"confirm: "``).
        done: Pairs already in the file when this run began (a resumed comparison).
    """

    def __init__(self, max_pairs: int, prefix: str = "", done: int = 0) -> None:
        import time

        self.max_pairs, self.prefix, self.done = max_pairs, prefix, done
        self.started = time.monotonic()

    def line(self, pairs: int, path: Any) -> str:
        """The line after pair ``pairs`` (counted from the file's first) was saved in ``path``."""
        import time

        ran = max(1, pairs - self.done)
        each = (time.monotonic() - self.started) / ran
        left = max(0, self.max_pairs - pairs) * each
        when = f"at most about {_duration(left)} left" if left else "the last the cap allows"
        return (f"{self.prefix}pair {pairs} done (up to {self.max_pairs}; {each:.1f} s a pair, "
                f"{when}); saved {path}")  # fmt: skip

    def __call__(self, pairs: int, path: Any) -> None:
        """Print :meth:`line` on stderr (``on_saved`` of :func:`~jaxbench.interleave.run_live`)."""
        from jaxbench.cli.options import err_console

        err_console.print(self.line(pairs, path), highlight=False)


def _duration(seconds: float) -> str:
    """``45 s``, ``4 min``, ``1.5 h``: a rough span for a time-left estimate."""
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
