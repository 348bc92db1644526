"""The verdict of a live comparison: its ratio, interval over process pairs, and stability.

:func:`estimate` reads a :class:`jaxbench.store.CaseComparison` the way its mode was run
(pairs of live processes, or independent back-to-back processes); the live session uses it at
each look to drop decided cases, and the analysis for its tables.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from jaxbench.inference import sequential, stability, verdicts
from jaxbench.inference.paired import pair_log_ratio
from jaxbench.store.live import LEGACY_PAIRS, CaseComparison, Mode, Round

#: How each mode's interval is formed, for tables.
BASIS = {
    "interleaved": "process pairs: per pair the median per-round log ratio; t interval over pairs",
    "back_to_back": "independent processes: per process the median call; Welch t interval",
}


def cut_short(comparison: CaseComparison, first_look: int = 0) -> bool:
    """Whether a comparison stopped inside its first look: ``ok``, with some pairs but fewer.

    The first look is the comparison's own schedule's (``first_look`` where it has none).
    """
    first = int(comparison.schedule.get("pairs", first_look))
    return comparison.status == "ok" and 0 < len(comparison.pairs) < first


def look_level(comparison: CaseComparison, pairs: int, alpha: float) -> float:
    """The level of a comparison's interval after ``pairs`` pairs: a repeated CI.

    The comparison looked at its schedule's pair counts (``pairs``, then every ``pairs_step``,
    up to ``max_pairs``) and, when cut short between two of them, at ``pairs``
    (:func:`jaxbench.inference.sequential.looks_at`); the level of the last look follows from
    O'Brien-Fleming-type error spending over them
    (:func:`jaxbench.inference.sequential.nominal_level`), so all looks together keep
    ``alpha``. A file of the one-look format gets ``alpha``.

    Raises:
        ValueError: ``pairs`` < 1.
    """
    s = comparison.schedule
    first = int(s.get("pairs", LEGACY_PAIRS["pairs"]))
    step = int(s.get("pairs_step", LEGACY_PAIRS["pairs_step"]))
    cap = max(first, int(s.get("max_pairs", first)))
    return sequential.nominal_level(sequential.looks_at(pairs, first, step, cap), cap, alpha)


def estimate(
    comparison: CaseComparison,
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    mode: Mode | None = None,
    strict: bool = False,
) -> verdicts.Estimate:
    """A live comparison's ratio (candidate / baseline), interval over processes, and verdict.

    ``interleaved``: one log ratio per pair (:func:`jaxbench.inference.paired.pair_log_ratio`)
    and the t interval over pairs (:func:`jaxbench.inference.verdicts.estimate_paired`).
    ``back_to_back`` (or ``mode="back_to_back"`` on interleaved data, to read it the
    sequential way): each process's calls pooled, processes independent
    (:func:`jaxbench.inference.verdicts.estimate_independent`). The interval is the repeated
    CI of the look the comparison ended at (:func:`look_level`), so the verdict keeps its
    error rate over all looks. A verdict is ``unstable`` when
    :mod:`jaxbench.inference.stability` finds a disturbance that could explain it
    (:func:`jaxbench.inference.stability.veto`); ``strict`` is the minimum-effect rule. A
    comparison cut short in its first look (:func:`cut_short`) says so in its advice.

    Raises:
        ValueError: No pair has timed rounds (status not ``ok``), or the mode asks for
            pairing of back-to-back data.
    """
    est = _estimate(comparison, threshold, alpha, mode, strict)
    if not cut_short(comparison):
        return est
    first = int(comparison.schedule.get("pairs", 0))
    note = (f"stopped after {len(comparison.pairs)} of the {first} pairs of its first look "
            "(an early look: only a very large change is decided); the same command "
            "completes it")  # fmt: skip
    # an early look's advice of "more pairs will not settle it soon" is its level's, not the
    # data's: replaced; "no interval" (one pair) and a decided verdict's notes stay
    early = est.verdict == "inconclusive" and not math.isnan(est.ci_low)
    return replace(est, advice=note) if early else est.with_note(note)


def _estimate(
    comparison: CaseComparison,
    threshold: float,
    alpha: float,
    mode: Mode | None,
    strict: bool,
) -> verdicts.Estimate:
    mode = mode or comparison.mode
    pairs = [p for p in comparison.pair_runs if p.status == "ok" and p.rounds]
    if comparison.status != "ok" or not pairs:
        raise ValueError(
            f"{comparison.label}: no timed rounds ({comparison.status}: {comparison.error})"
        )
    a_level = look_level(comparison, len(pairs), alpha)
    calls = (sum(len(r.baseline_s) for p in pairs for r in p.rounds),
             sum(len(r.candidate_s) for p in pairs for r in p.rounds))  # fmt: skip
    if mode == "interleaved":
        if comparison.mode != "interleaved":
            raise ValueError("back-to-back rounds are not paired: use mode='back_to_back'")
        logs = [
            pair_log_ratio([r.baseline_s for r in p.rounds], [r.candidate_s for r in p.rounds])
            for p in pairs
        ]
        est = verdicts.estimate_paired(logs, calls, threshold, a_level, strict)
        est = stability.outlier_note(
            est,
            {"pairs": (np.asarray(logs), [f"pair {p.index}" for p in pairs])},
            lambda x: verdicts.estimate_paired(x["pairs"], calls, threshold, a_level, strict),
        )
        return stability.veto(est, stability.pairs_disturbances([p.rounds for p in pairs],
                                                                threshold))  # fmt: skip
    a = [np.concatenate([r.baseline_s for r in p.rounds]) for p in pairs]
    b = [np.concatenate([r.candidate_s for r in p.rounds]) for p in pairs]
    est = verdicts.estimate_independent(a, b, threshold, a_level, strict)
    (la, _), (lb, _) = verdicts.log_medians(a), verdicts.log_medians(b)
    if la.size == lb.size == len(pairs):  # no process left out: one label each
        est = stability.outlier_note(
            est,
            {side: (logs, [f"{side} process {i} (pair {p.index})" for i, p in enumerate(pairs)])
             for side, logs in (("baseline", la), ("candidate", lb))},
            lambda x: verdicts.estimate_log_medians(x["baseline"], x["candidate"], calls,
                                                    threshold, a_level, strict),
        )  # fmt: skip
    disturbances = stability.processes_disturbances(
        [_block_noise(p.rounds, "baseline_noise") for p in pairs],
        [_block_noise(p.rounds, "candidate_noise") for p in pairs],
        a,
        b,
    )
    return stability.veto(est, disturbances)


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
