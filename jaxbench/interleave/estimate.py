"""The verdict of a live comparison: its ratio, interval over process pairs, and stability.

:func:`estimate` reads a :class:`jaxbench.store.CaseComparison` the way its mode was run
(pairs of live processes, or independent back-to-back processes); the live session uses it at
each look to drop decided cases, and the analysis for its tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from jaxbench.inference import stability, verdicts
from jaxbench.inference.paired import pair_log_ratio
from jaxbench.store.live import CaseComparison, Mode, Round

#: How each mode's interval is formed, for tables.
BASIS = {
    "interleaved": "process pairs: per pair the median per-round log ratio; t interval over pairs",
    "back_to_back": "independent processes: per process the median call; Welch t interval",
}


def estimate(
    comparison: CaseComparison,
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    mode: Mode | None = None,
) -> verdicts.Estimate:
    """A live comparison's ratio (candidate / baseline), interval over processes, and verdict.

    ``interleaved``: one log ratio per pair (:func:`jaxbench.inference.paired.pair_log_ratio`)
    and the t interval over pairs (:func:`jaxbench.inference.verdicts.estimate_paired`).
    ``back_to_back`` (or ``mode="back_to_back"`` on interleaved data, to read it the
    sequential way): each process's calls pooled, processes independent
    (:func:`jaxbench.inference.verdicts.estimate_independent`). Each of the schedule's looks
    spends ``alpha / looks`` (:func:`jaxbench.inference.verdicts.look_alpha`). A verdict is
    ``unstable`` when :mod:`jaxbench.inference.stability` finds the machine changed.

    Raises:
        ValueError: No pair has timed rounds (status not ``ok``), or the mode asks for
            pairing of back-to-back data.
    """
    mode = mode or comparison.mode
    pairs = [p for p in comparison.pair_runs if p.status == "ok" and p.rounds]
    if comparison.status != "ok" or not pairs:
        raise ValueError(
            f"{comparison.label}: no timed rounds ({comparison.status}: {comparison.error})"
        )
    a_level = verdicts.look_alpha(alpha, comparison.looks)
    calls = (sum(len(r.baseline_s) for p in pairs for r in p.rounds),
             sum(len(r.candidate_s) for p in pairs for r in p.rounds))  # fmt: skip
    if mode == "interleaved":
        if comparison.mode != "interleaved":
            raise ValueError("back-to-back rounds are not paired: use mode='back_to_back'")
        logs = [
            pair_log_ratio([r.baseline_s for r in p.rounds], [r.candidate_s for r in p.rounds])
            for p in pairs
        ]
        est = verdicts.estimate_paired(logs, calls, threshold, a_level)
        return est.unstable(stability.pairs_reasons([p.rounds for p in pairs], threshold))
    a = [np.concatenate([r.baseline_s for r in p.rounds]) for p in pairs]
    b = [np.concatenate([r.candidate_s for r in p.rounds]) for p in pairs]
    est = verdicts.estimate_independent(a, b, threshold, a_level)
    reasons = stability.processes_reasons(
        [_block_noise(p.rounds, "baseline_noise") for p in pairs],
        [_block_noise(p.rounds, "candidate_noise") for p in pairs],
        a,
        b,
    )
    return est.unstable(reasons)


def summary_line(comparison: CaseComparison) -> str:
    """One line for a log: case, status or ratio with interval, verdict and pairs."""
    if comparison.status != "ok":
        return f"{comparison.label}: {comparison.status}: {comparison.error}"
    e = estimate(comparison)
    advice = f"; {e.advice}" if e.advice else ""
    return (
        f"{comparison.label}: {e.ratio:.4f} [{e.ci_low:.4f}, {e.ci_high:.4f}] "
        f"{e.verdict} ({comparison.mode}, {e.units}){advice}"
    )


def _block_noise(rounds: Sequence[Round], side: str) -> dict[str, Any]:
    """One noise dict for a side of a pair: the median CPU share and the worst steal."""
    blocks = [getattr(r, side) for r in rounds if getattr(r, side)]
    shares = [b["cpu_share"] for b in blocks if isinstance(b.get("cpu_share"), int | float)]
    steals = [b["steal_share"] for b in blocks if isinstance(b.get("steal_share"), int | float)]
    out: dict[str, Any] = {}
    if shares:
        out["cpu_share"] = float(np.median(shares))
    if steals:
        out["steal_share"] = max(steals)
    return out
