"""Did the machine change under a comparison? Checks that turn a verdict into ``unstable``.

A verdict rests on the assumption that both sides ran on the same machine in the same state. The
checks here look for evidence against it, in the timings themselves and in the noise indicators
recorded beside them (:mod:`jaxbench.measure.noise`: ``cpu_share`` is process CPU time over
wall time of the timed region, ``steal_share`` the hypervisor's share of all CPU time):

- **drift within a process or pair**: the first and second halves of a time series (per-round
  log ratios of a pair, or the latencies of one side) differ by more than the threshold
  (:data:`LATENCY_SHIFT` for absolute latency), with a two-sided Mann-Whitney U test
  (:func:`scipy.stats.mannwhitneyu`) below :data:`DRIFT_ALPHA` divided by the number of series
  checked (Bonferroni), so a quiet machine is flagged at most that often;
- **CPU share changed**: the timed region's ``cpu_share`` moved by more than
  :data:`CPU_SHARE_FACTOR` within a pair or process, or between pairs or processes of one side:
  another process took CPUs for part of the time. On this project's 2-core VM the ``small``
  train step runs at a share of about 1.8 when quiet and 0.77 with two busy loops beside it;
- **latency spread between pairs**: a side's median latency moved by more than
  :data:`LATENCY_SHIFT` from one pair of processes to another;
- **steal**: the hypervisor took more than :data:`MAX_STEAL` of the CPU time.

Each check returns human-readable reasons; an empty list means no evidence of change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Family-wise level of the drift tests of one comparison (split over the series checked).
DRIFT_ALPHA = 0.01
#: Relative change of a side's own latency between halves that counts as the machine changing.
LATENCY_SHIFT = 0.10
#: Largest ratio of CPU shares (max / min) that still counts as the same machine state.
CPU_SHARE_FACTOR = 1.25
#: Between the two sides of a sequential comparison the factor is wider: a new version may use
#: more threads, but a hog beside one side only changes the share far more.
CPU_SHARE_FACTOR_SIDES = 1.5
#: Shortest region whose CPU share counts: shorter ones hold a scheduler slice or two, so their
#: share is all or nothing (the usual figure, or far below it when one preemption fell inside).
MIN_SHARE_WALL_S = 0.01
#: Largest hypervisor steal share of the timed region.
MAX_STEAL = 0.05
#: Fewer values than this a half are not tested for drift.
MIN_HALF = 5


def halves_shift(values: Sequence[float] | np.ndarray) -> tuple[float, float, float]:
    """``(first-half median, second-half median, Mann-Whitney p)`` of a series in time order.

    Returns ``nan`` figures (and p = 1) when a half has fewer than :data:`MIN_HALF` values.
    """
    from scipy import stats as sps  # not at the top: a live worker never needs it

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    half = x.size // 2
    if half < MIN_HALF:
        return (math.nan, math.nan, 1.0)
    first, second = x[:half], x[x.size - half :]
    p = float(sps.mannwhitneyu(first, second, alternative="two-sided").pvalue)
    return (float(np.median(first)), float(np.median(second)), p)


def drift_reason(
    log_values: Sequence[float] | np.ndarray, shift: float, alpha: float, what: str
) -> str | None:
    """A reason when the halves of a log-scale series differ by more than ``shift`` (relative).

    Args:
        log_values: Shape ``(n,)``, logs in time order (per-round log ratios, log latencies).
        shift: Relative change that counts, e.g. 0.02.
        alpha: Level of the Mann-Whitney U test of the halves.
        what: What the series is, for the reason (``"pair 3: per-round ratio"``).
    """
    a, b, p = halves_shift(log_values)
    if math.isnan(a) or p >= alpha or abs(b - a) <= math.log1p(shift):
        return None
    return f"{what} moved from {math.exp(a):.3g} to {math.exp(b):.3g} between halves (p={p:.1e})"


def _shares(noise: Iterable[Mapping[str, Any] | None]) -> np.ndarray:
    return np.asarray([v for v in map(_share, noise) if v is not None], dtype=float)


def share_reason(
    noise: Iterable[Mapping[str, Any] | None], what: str, factor: float = CPU_SHARE_FACTOR
) -> str | None:
    """A reason when the ``cpu_share`` of ``noise`` (in time order) moved by more than ``factor``.

    The series is cut into quarters (halves below 8 values, single values below 4) and the
    medians of the parts are compared, max / min (:func:`_parts_span`), so one odd block of a
    few calls does not count, but a hog that starts part-way does.

    Args:
        noise: Noise dicts (:mod:`jaxbench.measure.noise`) in time order, e.g. one per block,
            or one per pair or process; entries without ``cpu_share`` are ignored.
        what: Where they come from, for the reason.
        factor: Largest max / min ratio of the parts' medians allowed.
    """
    span = _parts_span(_shares(noise))
    if span is None or span[1] / span[0] <= factor:
        return None
    return (
        f"{what}: CPU share of the timed region moved between {span[0]:.2f} and {span[1]:.2f} "
        "(other processes took CPUs part of the time)"
    )


def _parts_span(x: np.ndarray) -> tuple[float, float] | None:
    """``(min, max)`` of the medians of the quarters of ``x`` (halves below 8, values below 4)."""
    if x.size < 2:
        return None
    parts = 4 if x.size >= 8 else 2 if x.size >= 4 else x.size
    medians = [float(np.median(p)) for p in np.array_split(x, parts)]
    return (min(medians), max(medians))


def steal_reason(noise: Iterable[Mapping[str, Any] | None], what: str) -> str | None:
    """A reason when any ``steal_share`` of ``noise`` exceeds :data:`MAX_STEAL`."""
    vals = [n.get("steal_share") for n in noise if isinstance(n, Mapping)]
    worst = max((v for v in vals if isinstance(v, int | float)), default=0.0)
    if worst <= MAX_STEAL:
        return None
    return f"{what}: the hypervisor stole {worst:.1%} of the CPU time"


def _share(noise: Mapping[str, Any] | None) -> float | None:
    """The ``cpu_share`` of a region long enough to tell (:data:`MIN_SHARE_WALL_S`)."""
    if not isinstance(noise, Mapping):
        return None
    share, wall = noise.get("cpu_share"), noise.get("wall_s")
    if not (isinstance(share, int | float) and share > 0):
        return None
    if isinstance(wall, int | float) and wall < MIN_SHARE_WALL_S:
        return None
    return float(share)


def _share_ratio(r: Any) -> dict[str, float] | None:
    """``{"cpu_share": candidate share / baseline share}`` of one round, if both can tell."""
    a, b = _share(r.baseline_noise), _share(r.candidate_noise)
    return None if a is None or b is None else {"cpu_share": b / a}


def pair_reasons(rounds: Sequence[Any], index: int, threshold: float, alpha: float) -> list[str]:
    """Reasons to distrust one interleaved pair (rounds in time order).

    Interleaving cancels what changes for both workers alike (the machine's clock, load that
    slows both), so only what treats the two sides differently counts here: the per-round ratio
    drifting between halves, and the candidate's CPU share relative to the baseline's moving
    (a hog on one worker's CPU); and steal.

    Args:
        rounds: :class:`jaxbench.store.Round` objects (``baseline_s``,
            ``candidate_s``, ``baseline_noise``, ``candidate_noise``).
        index: The pair's number, for the reasons.
        threshold: The verdict's threshold (drift of the ratio beyond it counts).
        alpha: Level of each drift test (already divided over the series checked).
    """
    med_a = np.log([np.median(r.baseline_s) for r in rounds])
    med_b = np.log([np.median(r.candidate_s) for r in rounds])
    out = [
        drift_reason(med_b - med_a, threshold, alpha, f"pair {index}: per-round ratio"),
        share_reason(map(_share_ratio, rounds), f"pair {index}, candidate relative to baseline"),
        steal_reason([n for r in rounds for n in (r.baseline_noise, r.candidate_noise)],
                     f"pair {index}"),
    ]  # fmt: skip
    return [r for r in out if r]


def pairs_reasons(pairs: Sequence[Sequence[Any]], threshold: float) -> list[str]:
    """Reasons to distrust a comparison over several pairs (each a sequence of rounds).

    Every pair is checked (:func:`pair_reasons`, the drift tests sharing
    :data:`DRIFT_ALPHA`), and the candidate's CPU share relative to the baseline's is compared
    across pairs (each pair's median), so a hog that slows one side from some pair on shows.
    """
    alpha = DRIFT_ALPHA / max(1, len(pairs))
    out: list[str | None]
    out = [r for i, rounds in enumerate(pairs) for r in pair_reasons(rounds, i, threshold, alpha)]
    medians = []
    for rounds in pairs:
        s = _shares(map(_share_ratio, rounds))
        if s.size:
            medians.append({"cpu_share": float(np.median(s))})
    out.append(share_reason(medians, "between pairs, candidate relative to baseline"))
    return [r for r in out if r]


def processes_reasons(
    baseline: Sequence[Mapping[str, Any] | None],
    candidate: Sequence[Mapping[str, Any] | None],
    baseline_samples: Sequence[Sequence[float]] = (),
    candidate_samples: Sequence[Sequence[float]] = (),
) -> list[str]:
    """Reasons to distrust a comparison of independent processes (recorded runs).

    Args:
        baseline: One noise dict per baseline process (``None`` or empty where not recorded).
        candidate: The candidate's.
        baseline_samples: Per process, its latencies in call order (checked for drift).
        candidate_samples: The candidate's.
    """
    out: list[str | None] = [
        share_reason(baseline, "baseline processes"),
        share_reason(candidate, "candidate processes"),
        steal_reason([*baseline, *candidate], "a process"),
    ]
    sa, sb = _shares(baseline), _shares(candidate)
    if sa.size and sb.size:
        med = sorted((float(np.median(sa)), float(np.median(sb))))
        if med[1] / med[0] > CPU_SHARE_FACTOR_SIDES:
            out.append(
                f"CPU share differs between the sides ({np.median(sa):.2f} vs "
                f"{np.median(sb):.2f}): the machine was not in the same state, or the versions "
                "use the CPUs differently; compare live (--interleave) to tell"
            )
    series = [("baseline", s) for s in baseline_samples] + [
        ("candidate", s) for s in candidate_samples
    ]
    alpha = DRIFT_ALPHA / max(1, len(series))
    for i, (side, samples) in enumerate(series):
        logs = np.log(np.asarray(samples, dtype=float).clip(min=1e-12))
        out.append(drift_reason(logs, LATENCY_SHIFT, alpha, f"{side} process {i}: latency"))
    return [r for r in out if r]
