"""Paired figures of one interleaved pair of worker processes: its per-round ratios.

In an interleaved comparison (:mod:`jaxbench.interleave`) each round times one block of calls of
the baseline and one of the candidate, back to back in random order (Abedi and Brecht, RMIT,
ICPE 2017). Whatever drifts slowly on the machine affects both blocks of a round alike, so the
per-round ratio ``median(candidate block) / median(baseline block)`` cancels it. The rounds of
one pair are **not** independent of each other, though: a pair of processes keeps its own memory
layout and thread placement for its whole life, so it differs from another pair of the very same
builds by a few percent. One pair therefore gives one value, :func:`pair_log_ratio`, and the
interval is taken over pairs (:func:`jaxbench.inference.verdicts.estimate_paired`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Fewest timed rounds of a pair: fewer leave the pair's median ratio at the mercy of one round.
MIN_ROUNDS = 6


def round_ratios(
    baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]]
) -> np.ndarray:
    """``median(candidate block) / median(baseline block)`` for each round.

    Args:
        baseline_blocks: One sequence of latencies (seconds) per round.
        candidate_blocks: The candidate's, same number of rounds.

    Returns:
        Shape ``(rounds,)``, float64.

    Raises:
        ValueError: The round counts differ, or a block is empty or not positive.
    """
    if len(baseline_blocks) != len(candidate_blocks):
        raise ValueError(
            f"baseline has {len(baseline_blocks)} rounds, candidate {len(candidate_blocks)}"
        )
    out = []
    for i, (a, b) in enumerate(zip(baseline_blocks, candidate_blocks, strict=True)):
        if not (len(a) and len(b)):
            raise ValueError(f"round {i}: a block is empty")
        ma, mb = np.median(np.asarray(a, float)), np.median(np.asarray(b, float))
        if not (ma > 0 and mb > 0):
            raise ValueError(f"round {i}: block medians must be positive, got {ma} and {mb}")
        out.append(mb / ma)
    return np.asarray(out, dtype=float)


def pair_log_ratio(
    baseline_blocks: Sequence[Sequence[float]], candidate_blocks: Sequence[Sequence[float]]
) -> float:
    """The log ratio (candidate / baseline) of one pair: median of its per-round log ratios.

    Args:
        baseline_blocks: As :func:`round_ratios`.
        candidate_blocks: As :func:`round_ratios`.

    Raises:
        ValueError: As :func:`round_ratios`, or no round at all.
    """
    r = round_ratios(baseline_blocks, candidate_blocks)
    if r.size == 0:
        raise ValueError("a pair without timed rounds has no ratio")
    return float(np.median(np.log(r)))
