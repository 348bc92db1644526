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

Each check returns :class:`Disturbance` objects: a human-readable reason and a **bound**, the
largest shift of the comparison's log ratio the disturbance could cause (a pair whose CPU share
moved by a factor ``f`` can be off by at most ``log f``, and it is one of ``n`` pairs in the mean:
``log f / n``; steal ``s`` slows what it hits by at most ``1 / (1 - s)``; a latency that moved
from ``a`` to ``b`` within a process moves its median by at most ``|log(b / a)|``).
:func:`veto` then turns a verdict ``unstable`` only when a disturbance of that size could have
made it: a ``slower`` whose interval, moved towards 1 by the summed bounds, would no longer be
``slower`` (and the mirror for ``faster``), a ``same`` that either move would break, or an
``inconclusive`` beside disturbances as large as the threshold. A 1000x slowdown beside 14 %
steal stays ``slower``; a 3 % one beside a hog that doubles one side's time is ``unstable``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from jaxbench.inference.verdicts import Estimate, decide, median
from jaxbench.units import fmt_seconds

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
#: Share of a recorded process's latencies, from its start, left out of its drift test: the
#: first tenth to fifth of the calls of a fresh process ran 2-50 % slower than the rest in the
#: committed review's runs (a warm-up that outlasts the untimed calls), which is not the machine
#: changing. Live blocks are preceded by untimed rounds instead.
SETTLE_SHARE = 1 / 3


@dataclass(frozen=True)
class Disturbance:
    """Evidence that the machine changed under a comparison, with what it could explain.

    Attributes:
        reason: Human-readable, e.g. ``"pair 3: the hypervisor stole 14.0 % of the CPU time"``.
        bound: Largest shift of the comparison's log ratio (candidate / baseline) this
            disturbance could cause, >= 0 (natural log units).
    """

    reason: str
    bound: float


def veto(est: Estimate, disturbances: Sequence[Disturbance]) -> Estimate:
    """``est`` marked ``unstable`` when the disturbances seen could explain its verdict.

    With ``B`` the sum of the bounds: a ``slower`` (``faster``) is vetoed when its interval
    moved by ``B`` towards 1 would no longer be ``slower`` (``faster``); a ``same`` when a move
    of ``B`` either way would leave the equivalence region; an ``inconclusive`` when ``B`` is at
    least ``log(1 + threshold)`` (the disturbance alone could hide or fake a change that
    matters). Otherwise the verdict stands and the disturbances are named in its advice.
    """
    if not disturbances:
        return est
    total = sum(d.bound for d in disturbances)
    reasons = [d.reason for d in disturbances]
    if est.verdict in ("slower", "faster", "same"):
        moved = {decide(est.ci_low * math.exp(s), est.ci_high * math.exp(s), est.threshold,
                        est.strict) for s in (-total, total)}  # fmt: skip
        explains = moved != {est.verdict}
    else:
        explains = total >= math.log1p(est.threshold)
    if explains:
        return est.unstable(reasons)
    note = (f"disturbances that could move the ratio by at most {math.expm1(total):.1%} do not "
            f"explain this verdict: {'; '.join(reasons)}")  # fmt: skip
    return est.with_note(note)


def halves_shift(
    values: Sequence[float] | np.ndarray, least: float = 0.0
) -> tuple[float, float, float]:
    """``(first-half median, second-half median, Mann-Whitney p)`` of a series in time order.

    Returns ``nan`` figures (and p = 1) when a half has fewer than :data:`MIN_HALF` values.
    Where the medians differ by ``least`` or less, the test is not run and p is 1: a caller
    that ignores such a shift anyway is spared it (it is most of the cost of a comparison
    of many recorded processes).
    """
    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    half = x.size // 2
    if half < MIN_HALF:
        return (math.nan, math.nan, 1.0)
    first, second = x[:half], x[x.size - half :]
    a, b = median(first), median(second)
    if abs(b - a) <= least:
        return (a, b, 1.0)
    from scipy import stats as sps  # not at the top: a live worker never needs it

    return (a, b, float(sps.mannwhitneyu(first, second, alternative="two-sided").pvalue))


def drift(
    log_values: Sequence[float] | np.ndarray,
    shift: float,
    alpha: float,
    what: str,
    weight: float = 1.0,
    seconds: bool = False,
) -> Disturbance | None:
    """A disturbance when the halves of a log-scale series differ by more than ``shift``.

    Args:
        log_values: Shape ``(n,)``, logs in time order (per-round log ratios, log latencies).
        shift: Relative change that counts, e.g. 0.02.
        alpha: Level of the Mann-Whitney U test of the halves.
        what: What the series is, for the reason (``"pair 3: per-round ratio"``).
        weight: The series' share of the comparison's mean log ratio (``1 / pairs``, or
            ``1 / processes`` of its side); the bound is ``weight * |log(second / first)|``.
        seconds: The series is of log seconds (a latency): the reason gives its halves in
            time units (``164 µs``), not as bare numbers.
    """
    a, b, p = halves_shift(log_values, least=math.log1p(shift))
    if math.isnan(a) or p >= alpha or abs(b - a) <= math.log1p(shift):
        return None
    first, second = (
        (fmt_seconds(math.exp(v)) if seconds else f"{math.exp(v):.3g}") for v in (a, b)
    )
    reason = f"{what} moved from {first} to {second} between halves (p={p:.1e})"
    return Disturbance(reason, weight * abs(b - a))


def _shares(noise: Iterable[Mapping[str, Any] | None]) -> np.ndarray:
    return np.asarray([v for v in map(_share, noise) if v is not None], dtype=float)


def share_change(
    noise: Iterable[Mapping[str, Any] | None],
    what: str,
    factor: float = CPU_SHARE_FACTOR,
    weight: float = 1.0,
) -> Disturbance | None:
    """A disturbance when the ``cpu_share`` of ``noise`` (in time order) moved beyond ``factor``.

    The series is cut into quarters (halves below 8 values, single values below 4) and the
    medians of the parts are compared, max / min (:func:`_parts_span`), so one odd block of a
    few calls does not count, but a hog that starts part-way does.

    Args:
        noise: Noise dicts (:mod:`jaxbench.measure.noise`) in time order, e.g. one per block,
            or one per pair or process; entries without ``cpu_share`` are ignored.
        what: Where they come from, for the reason.
        factor: Largest max / min ratio of the parts' medians allowed.
        weight: Share of the comparison's mean log ratio the series stands for; the bound is
            ``weight * log(max / min)`` (time scales at most as the CPU share taken away).
    """
    return _span_change(_shares(noise), what, factor, weight)


def _span_change(shares: np.ndarray, what: str, factor: float, weight: float) -> Disturbance | None:
    """:func:`share_change` of the CPU shares already read from the noise dicts."""
    span = _parts_span(shares)
    if span is None or span[1] / span[0] <= factor:
        return None
    reason = (f"{what}: CPU share of the timed region moved between {span[0]:.2f} and "
              f"{span[1]:.2f} (other processes took CPUs part of the time)")  # fmt: skip
    return Disturbance(reason, weight * math.log(span[1] / span[0]))


def _parts_span(x: np.ndarray) -> tuple[float, float] | None:
    """``(min, max)`` of the medians of the quarters of ``x`` (halves below 8, values below 4)."""
    if x.size < 2:
        return None
    parts = 4 if x.size >= 8 else 2 if x.size >= 4 else x.size
    medians = [float(np.median(p)) for p in np.array_split(x, parts)]
    return (min(medians), max(medians))


def steal(
    noise: Iterable[Mapping[str, Any] | None], what: str, weight: float = 1.0
) -> Disturbance | None:
    """A disturbance when any ``steal_share`` of ``noise`` exceeds :data:`MAX_STEAL`.

    The bound is ``weight * -log(1 - worst steal)``: time stolen from a region stretches it by
    at most ``1 / (1 - s)``.
    """
    vals = [n.get("steal_share") for n in noise if isinstance(n, Mapping)]
    worst = max((v for v in vals if isinstance(v, int | float)), default=0.0)
    if worst <= MAX_STEAL:
        return None
    reason = f"{what}: the hypervisor stole {worst:.1%} of the CPU time"
    return Disturbance(reason, weight * -math.log1p(-min(worst, 0.999)))


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


def pair_disturbances(
    rounds: Sequence[Any], index: int, threshold: float, alpha: float, weight: float = 1.0
) -> list[Disturbance]:
    """Disturbances of one interleaved pair (rounds in time order).

    Interleaving cancels what changes for both workers alike (the machine's clock, load that
    slows both), so only what treats the two sides differently counts here: the per-round ratio
    drifting between halves, and the candidate's CPU share relative to the baseline's moving
    (a hog on one worker's CPU); and steal.

    Args:
        rounds: :class:`jaxbench.store.Round` objects (``baseline_s``,
            ``candidate_s``, ``baseline_noise``, ``candidate_noise``).
        index: The pair's index, from 0 (:attr:`jaxbench.store.PairRun.index`); the reasons
            name it from 1.
        threshold: The verdict's threshold (drift of the ratio beyond it counts).
        alpha: Level of each drift test (already divided over the series checked).
        weight: The pair's share of the comparison's mean log ratio (``1 / pairs``).
    """
    med_a = np.log([np.median(r.baseline_s) for r in rounds])
    med_b = np.log([np.median(r.candidate_s) for r in rounds])
    name = f"pair {index + 1}"  # named from 1, as the progress lines count them
    out = [
        drift(med_b - med_a, threshold, alpha, f"{name}: per-round ratio", weight),
        share_change(map(_share_ratio, rounds),
                     f"{name}, candidate relative to baseline", weight=weight),
        steal([n for r in rounds for n in (r.baseline_noise, r.candidate_noise)], name, weight),
    ]  # fmt: skip
    return [d for d in out if d]


def pairs_disturbances(pairs: Sequence[Sequence[Any]], threshold: float) -> list[Disturbance]:
    """Disturbances of a comparison over several pairs (each a sequence of rounds).

    Every pair is checked (:func:`pair_disturbances`, the drift tests sharing
    :data:`DRIFT_ALPHA`, each pair weighing ``1 / pairs``), and the candidate's CPU share
    relative to the baseline's is compared across pairs (each pair's median; weight 1), so a
    hog that slows one side from some pair on shows.
    """
    n = max(1, len(pairs))
    alpha = DRIFT_ALPHA / n
    out: list[Disturbance | None]
    out = [d for i, rounds in enumerate(pairs)
           for d in pair_disturbances(rounds, i, threshold, alpha, 1 / n)]  # fmt: skip
    medians = []
    for rounds in pairs:
        s = _shares(map(_share_ratio, rounds))
        if s.size:
            medians.append({"cpu_share": float(np.median(s))})
    out.append(share_change(medians, "between pairs, candidate relative to baseline"))
    return [d for d in out if d]


def processes_disturbances(
    baseline: Sequence[Mapping[str, Any] | None],
    candidate: Sequence[Mapping[str, Any] | None],
    baseline_samples: Sequence[Sequence[float]] = (),
    candidate_samples: Sequence[Sequence[float]] = (),
) -> list[Disturbance]:
    """Disturbances of a comparison of independent processes (recorded runs).

    Args:
        baseline: One noise dict per baseline process (``None`` or empty where not recorded).
        candidate: The candidate's.
        baseline_samples: Per process, its latencies in call order (checked for drift after
            the first :data:`SETTLE_SHARE` of them; each process weighs ``1 / processes`` of
            its side).
        candidate_samples: The candidate's.
    """
    na, nb = max(1, len(baseline)), max(1, len(candidate))
    sa, sb = _shares(baseline), _shares(candidate)
    out: list[Disturbance | None] = [
        _span_change(sa, "baseline processes", CPU_SHARE_FACTOR, 1.0),
        _span_change(sb, "candidate processes", CPU_SHARE_FACTOR, 1.0),
        *(steal([n], f"baseline process {i}", 1 / na)
          for i, n in enumerate(baseline) if _steals(n)),
        *(steal([n], f"candidate process {i}", 1 / nb)
          for i, n in enumerate(candidate) if _steals(n)),
    ]  # fmt: skip
    if sa.size and sb.size:
        med = sorted((float(np.median(sa)), float(np.median(sb))))
        if med[1] / med[0] > CPU_SHARE_FACTOR_SIDES:
            reason = (
                f"CPU share differs between the sides ({np.median(sa):.2f} vs "
                f"{np.median(sb):.2f}): the machine was not in the same state, or the versions "
                "use the CPUs differently; compare live (--interleave) to tell"
            )
            out.append(Disturbance(reason, math.log(med[1] / med[0])))
    series = [
        (f"{side} process {i}", s, 1 / max(1, len(samples)))
        for side, samples in (("baseline", baseline_samples), ("candidate", candidate_samples))
        for i, s in enumerate(samples)
    ]  # each side's processes numbered from 0, as the steal and share reasons number them
    alpha = DRIFT_ALPHA / max(1, len(series))
    moved = _may_drift([s for _, s, _ in series], math.log1p(LATENCY_SHIFT))
    for (what, samples, weight), check in zip(series, moved, strict=True):
        if not check:
            continue
        logs = np.log(np.asarray(samples, dtype=float).clip(min=1e-12))
        logs = logs[int(len(logs) * SETTLE_SHARE) :]
        out.append(drift(logs, LATENCY_SHIFT, alpha, f"{what}: latency", weight, seconds=True))
    return [d for d in out if d]


def _steals(noise: Mapping[str, Any] | None) -> bool:
    """Whether :func:`steal` of this one noise dict finds a disturbance."""
    value = noise.get("steal_share") if isinstance(noise, Mapping) else None
    return isinstance(value, int | float) and not value <= MAX_STEAL  # nan too, as steal has it


def _may_drift(series: Sequence[Sequence[float]], least: float) -> np.ndarray:
    """Per series, ``False`` where :func:`drift` of its settled log latencies cannot fire.

    The halves' medians of every series of one length without a non-finite value are taken at
    once (a history has thousands of processes a comparison): a series whose halves differ by
    clearly less than ``least`` cannot drift (:func:`halves_shift` does not test it). Every
    other series is ``True`` and is checked one by one.
    """
    flags = np.ones(len(series), dtype=bool)
    by_length: dict[int, list[int]] = {}
    for i, s in enumerate(series):
        by_length.setdefault(len(s), []).append(i)
    for n, which in by_length.items():
        logs = np.log(np.asarray([series[i] for i in which], dtype=float).clip(min=1e-12))
        logs = logs[:, int(n * SETTLE_SHARE) :]
        half = logs.shape[1] // 2
        finite = np.isfinite(logs).all(axis=1)
        if half < MIN_HALF:
            flags[np.asarray(which)[finite]] = False  # too short to test
            continue
        shift = np.abs(np.median(logs[:, -half:], axis=1) - np.median(logs[:, :half], axis=1))
        # a margin, so that rounding in the medians never spares a series at the boundary
        flags[np.asarray(which)[finite & (shift < least * (1 - 1e-9))]] = False
    return flags


#: Modified z-score above which one unit (a process, or a pair) stands out from the rest of its
#: side: 3.5, the cut Iglewicz and Hoaglin recommend ("How to Detect and Handle Outliers", ASQC
#: Basic References in Quality Control 16, 1993).
OUTLIER_Z = 3.5


def outlier(
    sides: Sequence[Sequence[float] | np.ndarray], least: float
) -> tuple[int, int, float] | None:
    """The one unit of a comparison that stands out most from its side, where one does.

    Args:
        sides: Per side, shape ``(units,)``: each unit's log value (a process's log median, a
            pair's log ratio), all finite.
        least: Smallest distance from its side's median that counts (natural log units).

    Returns:
        ``(side, index, modified z-score)`` of the unit farthest from its side's median, in
        units of the spread of every unit about its own side's median (the median absolute
        deviation scaled to a normal's standard deviation,
        :func:`scipy.stats.median_abs_deviation`; pooled over the sides, so that a side of 3
        does not measure its spread from 3 values), where that score is above
        :data:`OUTLIER_Z` (``inf`` where every other unit sits on its median) and the
        distance above ``least``; ``None`` otherwise. Only a side of 3 or more units is
        searched: of two, neither stands out from the other.
    """
    from scipy import stats as sps  # not at the top: a live worker never needs it

    xs = [np.asarray(x, dtype=float) for x in sides]
    devs = [np.abs(x - np.median(x)) if x.size else x for x in xs]
    best = None
    for side, dev in enumerate(devs):
        if dev.size < 3:
            continue
        i = int(np.argmax(dev))
        if dev[i] > least and (best is None or dev[i] > devs[best[0]][best[1]]):
            best = (side, i)
    if best is None:
        return None
    side, i = best
    # the middle unit of an odd side sits on its median by construction: no spread in it
    about = [np.sort(x)[np.arange(x.size) != x.size // 2] - np.median(x) if x.size % 2 else
             x - np.median(x) for x in xs if x.size]  # fmt: skip
    spread = float(sps.median_abs_deviation(np.concatenate(about), scale="normal"))
    z = math.inf if spread == 0 else float(devs[side][i] / spread)
    return (side, i, z) if z > OUTLIER_Z else None


def outlier_note(
    est: Estimate,
    sides: Mapping[str, tuple[np.ndarray, Sequence[str]]],
    again: Callable[[Mapping[str, np.ndarray]], Estimate],
) -> Estimate:
    """``est`` with its advice naming a unit that stands out, where it is ``inconclusive``.

    An outlying process (one that a disturbance slowed, say) widens the interval until nothing
    is decided, and "run about 30 more processes a side" does not say why. The unit found by
    :func:`outlier` over all sides, at least :data:`LATENCY_SHIFT` (or the threshold, if
    larger) from its side's median, as a process's own drift must be to count, is named with
    how far it stands out and the estimate without it; the advice ``est`` had follows as the
    other way. The verdict stays ``inconclusive``: a unit cannot be dropped after the fact (a
    change that slows some processes only is a change), so the advice asks for it to be run
    again or looked into. How often it names a unit where none stands out, on seeded
    simulations, is in ``docs/review.md`` (``tests/test_verdicts.py`` checks it).

    Args:
        est: The estimate over every unit; returned as it is unless ``inconclusive``.
        sides: Side name (``"baseline"``, ``"candidate"``, ``"pairs"``) -> its units' log values
            (shape ``(units,)``, finite) and one label a unit (e.g. ``"candidate process 3"``).
        again: The same estimate from the sides' log values (every side, one of them less a
            unit).
    """
    if est.verdict != "inconclusive":
        return est
    names = list(sides)
    found = outlier([sides[s][0] for s in names], math.log1p(max(est.threshold, LATENCY_SHIFT)))
    if found is None:
        return est
    side, i, z = found
    values, labels = sides[names[side]]
    rest = np.delete(values, i)
    other = again({s: v for s, (v, _) in sides.items()} | {names[side]: rest})
    score = "every other one alike" if math.isinf(z) else f"modified z-score {z:.1f}"
    otherwise = f" (otherwise: {est.advice})" if est.advice else ""
    return replace(
        est,
        advice=f"{labels[i]} stands out: {math.exp(values[i] - float(np.median(rest))):.3g}x "
        f"the median of the other {rest.size} ({score}); without it: {other.verdict} "
        f"({other.ratio:.3f} [{other.ci_low:.3f}, {other.ci_high:.3f}]): run it again, or find "
        f"what disturbed it{otherwise}",
    )
