"""Calibration on the machine at hand: A/A comparisons, their false alarms and detectable effect.

``jaxbench calibrate`` (:mod:`jaxbench.cli.calibrate`) runs ``C`` live comparisons of one case
with the very same interpreter on both sides (A/A), each over ``P`` pairs of fresh worker
processes with one look (:func:`jaxbench.interleave.run_pairs`, ``max_pairs = pairs``).
Every verdict other than ``slower`` or ``faster`` is right for an A/A comparison, so

- the **false-alarm rate** is the share of the ``C`` comparisons called ``slower`` or ``faster``,
  with its exact (Clopper-Pearson) 95 % interval;
- the **between-pair spread** ``sd`` is the standard deviation of the log ratios of all ``C * P``
  pairs: the spread of one pair's figure, which is what the interval of a live comparison rests
  on. From it, the smallest slowdown the default design of ``jaxbench compare --interleave``
  (:class:`jaxbench.interleave.Schedule` defaults: ``pairs`` at the first look, ``max_pairs`` at
  the last, each at the level of the last look of O'Brien-Fleming-type error spending,
  :func:`jaxbench.inference.sequential.nominal_level`) calls ``slower`` with 80 % and 95 % power
  (:func:`jaxbench.inference.verdicts.detectable`, with ``se = sd / sqrt(pairs)``);
- the **time per pair** (wall seconds, worker start included) and so the time to a verdict.

:func:`summarize_calibration` is that computation on plain numbers. The record
(:class:`Calibration`, kind ``calibration``, schema version 1) is one JSON file,
``calibration-<run id>.json``, written atomically after every pair by the one live runner
(:func:`jaxbench.interleave.run_live`) from the first finished comparison on, holding the
comparisons finished (``complete`` false until the last); :func:`load_calibrations` reads
them back and :func:`jaxbench.store.calibration.newest_calibration` picks one host's and case's.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from jaxbench.inference import verdicts
from jaxbench.inference.paired import pair_log_ratio
from jaxbench.inference.sequential import looks_at, nominal_level
from jaxbench.live_defaults import DEFAULT_COMPARISONS
from jaxbench.store import Calibration, CaseComparison, Problem, load, write_json
from jaxbench.store.calibration import (
    CalibrationCase,
    CalibrationComparison,
    CalibrationSummary,
    Design,
)

#: The case calibrated when nothing is selected (unselected parameters of another workload
#: take these values where it has them).
DEFAULT_SELECTION = {"workload": "train_step", "size": "small", "dtype": "float32",
                     "optimizer": "sgd"}  # fmt: skip
#: Verdicts that are false alarms on an A/A comparison.
FALSE_ALARMS = ("slower", "faster")
#: Level of the interval of the false-alarm rate.
CONFIDENCE = 0.95
#: The fewest pairs a comparison can alarm with: one pair gives no interval (``df = pairs - 1``).
MIN_ALARM_PAIRS = 2


def _num(x: float | None) -> float | None:
    """JSON-safe: ``None`` for ``nan`` or infinity."""
    return None if x is None or not math.isfinite(x) else float(x)


def design_detectable(sd: float, pairs: int, alpha: float, threshold: float, power: float) -> float:
    """Smallest slowdown a comparison of ``pairs`` pairs calls ``slower`` with ``power``.

    Args:
        sd: Between-pair standard deviation of the pair log ratio.
        pairs: Pairs of the comparison (``se = sd / sqrt(pairs)``, ``df = pairs - 1``).
        alpha: Level of the look (already divided over the looks).
        threshold: Threshold of the verdict.
        power: E.g. 0.8.

    Returns:
        Relative slowdown (0.03 = 3 %); ``nan`` without a finite ``sd`` or with one pair.
    """
    if pairs < MIN_ALARM_PAIRS or not math.isfinite(sd):
        return math.nan
    return verdicts.detectable(sd / math.sqrt(pairs), pairs - 1, alpha, threshold, power)


def check_pairs(pairs: int) -> None:
    """Refuse a calibration design that can never alarm.

    Raises:
        ValueError: ``pairs`` < :data:`MIN_ALARM_PAIRS`; the message names ``--pairs``.
    """
    if pairs < MIN_ALARM_PAIRS:
        raise ValueError(
            f"--pairs {pairs}: a comparison of fewer than {MIN_ALARM_PAIRS} pairs has no "
            f"interval and can never alarm; use --pairs {MIN_ALARM_PAIRS} or more"
        )


def proportion_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a proportion ``k / n``; ``(nan, nan)`` for n = 0."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))


def default_design(
    threshold: float = verdicts.DEFAULT_THRESHOLD, alpha: float = verdicts.DEFAULT_ALPHA
) -> Design:
    """:class:`Design` of ``jaxbench compare --interleave`` with its default schedule."""
    from jaxbench.interleave.session import Schedule

    s = Schedule()
    last = nominal_level(looks_at(s.max_pairs, s.pairs, s.pairs_step, s.max_pairs), s.max_pairs,
                         alpha)  # fmt: skip
    return Design(pairs=s.pairs, max_pairs=s.max_pairs, looks=s.looks, threshold=threshold,
                  alpha=alpha, alpha_per_look=last)  # fmt: skip


def summarize_calibration(
    pair_log_ratios: Sequence[Sequence[float]],
    verdict_of: Sequence[str] | None = None,
    pair_seconds: Sequence[float] = (),
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    design: Design | None = None,
) -> CalibrationSummary:
    """The figures of a calibration from its numbers alone (no workers).

    Args:
        pair_log_ratios: Per A/A comparison, its pairs' log ratios.
        verdict_of: Per comparison, its verdict (stability checks included); default: the
            verdict of :func:`~jaxbench.inference.verdicts.estimate_paired` at ``threshold`` and
            ``alpha`` (one look).
        pair_seconds: Wall seconds of each pair, any order.
        threshold: Threshold of the verdicts.
        alpha: Level of the comparisons' single look.
        design: Design of the detectable figures; default :func:`default_design`.

    Raises:
        ValueError: The verdicts do not match the comparisons, or a log ratio is not finite.
    """
    design = design or default_design(threshold, alpha)
    logs = [np.asarray(c, dtype=float).ravel() for c in pair_log_ratios]
    if verdict_of is None:
        verdict_of = [verdicts.estimate_paired(c, (0, 0), threshold, alpha).verdict for c in logs]
    if len(verdict_of) != len(logs):
        raise ValueError(f"{len(verdict_of)} verdicts for {len(logs)} comparisons")
    flat = np.concatenate(logs) if logs else np.zeros(0)
    if not np.isfinite(flat).all():
        raise ValueError("every pair's log ratio must be finite")
    n = len(logs)
    counts = {v: sum(1 for x in verdict_of if x == v) for v in verdicts.VERDICTS}
    k = sum(counts[v] for v in FALSE_ALARMS)
    low, high = proportion_interval(k, n)
    sd = float(flat.std(ddof=1)) if flat.size >= 2 else math.nan
    per_pair = float(np.median(pair_seconds)) if len(pair_seconds) else math.nan

    def det(pairs: int, power: float) -> float | None:
        return _num(design_detectable(sd, pairs, design.alpha_per_look, threshold, power))

    return CalibrationSummary(
        comparisons=n,
        pairs=int(flat.size),
        verdicts=counts,
        false_alarms=k,
        false_alarm_rate=_num(k / n) if n else None,
        false_alarm_ci_low=_num(low),
        false_alarm_ci_high=_num(high),
        ratio=_num(math.exp(flat.mean())) if flat.size else None,
        sd_log=_num(sd),
        design=design,
        detectable_80=det(design.pairs, verdicts.POWERS[0]),
        detectable_95=det(design.pairs, verdicts.POWERS[1]),
        detectable_80_max_pairs=det(design.max_pairs, verdicts.POWERS[0]),
        detectable_95_max_pairs=det(design.max_pairs, verdicts.POWERS[1]),
        seconds_per_pair=_num(per_pair),
        seconds_to_verdict=_num(design.pairs * per_pair),
        seconds_to_verdict_max=_num(design.max_pairs * per_pair),
    )


def summarized(record: Calibration) -> Calibration:
    """A copy of ``record`` whose summary is recomputed from its comparisons."""
    summary = summarize_calibration(
        [c.pair_log_ratios for c in record.comparisons],
        [c.verdict for c in record.comparisons],
        [s for c in record.comparisons for s in c.pair_seconds],
        record.threshold,
        record.alpha,
        record.summary.design,
    )
    return record.model_copy(update={"summary": summary})


def write_calibration(folder: str | os.PathLike[str], record: Calibration) -> Path:
    """Write ``record`` to ``folder/calibration-<run id>.json`` atomically; returns the path."""
    return write_json(Path(folder) / record.path_name, record)


#: Called after each pair with (comparison index, pairs done in it).
OnPair = Callable[[int, int], None]


class CalibrationFailed(RuntimeError):
    """The case did not run (failed to prepare, or recompiled while timed)."""


def _entry(c: CaseComparison, index: int, seed: int, started: str, threshold: float,
           alpha: float) -> CalibrationComparison:  # fmt: skip
    """The record's entry of one finished A/A comparison."""
    from jaxbench.interleave import estimate

    est = estimate(c, threshold, alpha)
    logs = [pair_log_ratio([r.baseline_s for r in p.rounds], [r.candidate_s for r in p.rounds])
            for p in c.pair_runs]  # fmt: skip
    return CalibrationComparison(
        index=index,
        seed=seed,
        verdict=est.verdict,
        ratio=_num(est.ratio),
        ci_low=_num(est.ci_low),
        ci_high=_num(est.ci_high),
        advice=est.advice,
        pair_log_ratios=logs,
        pair_seconds=[p.seconds or 0.0 for p in c.pair_runs],
        started_at=started,
    )


def run_calibration(
    workload: str,
    params: dict[str, Any],
    folder: str | os.PathLike[str],
    comparisons: int = DEFAULT_COMPARISONS,
    schedule: Any = None,
    backend: str = "cpu",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    on_pair: OnPair | None = None,
    python: str | None = None,
) -> tuple[Calibration, Path]:
    """Run ``comparisons`` A/A live comparisons of one case, saving the record as they finish.

    Each comparison's pairs run through :func:`jaxbench.interleave.run_live`, which rewrites
    ``folder/calibration-<run id>.json`` after every pair: from the first finished comparison
    on it holds every comparison finished (``complete`` false until the last). A comparison cut
    short has no verdict, so its pairs are not kept.

    Args:
        workload: Workload name.
        params: The case's parameters (both sides the same).
        folder: Folder of the record (it must exist).
        comparisons: How many A/A comparisons, >= 1.
        schedule: :class:`~jaxbench.interleave.Schedule` of each comparison; its
            ``max_pairs`` is set to ``pairs`` (one look) and comparison ``i`` uses seed
            ``seed + i``. Default: the Schedule defaults.
        backend: Backend of the workers.
        threshold: Threshold of the verdicts.
        alpha: Level of the verdicts.
        on_pair: See :data:`OnPair`.
        python: Interpreter of both sides (default this one).

    Returns:
        The record, complete, and its path.

    Raises:
        ValueError: ``comparisons`` < 1, fewer pairs than :data:`MIN_ALARM_PAIRS` (a design
            that can never alarm), or a bad threshold or alpha.
        CalibrationFailed: The case failed or recompiled (it would every time).
        jaxbench.interleave.LiveStopped: Interrupted, or a worker could not start or died;
            its path and pairs are those of the comparisons finished (``None`` and 0 before
            the first).
    """
    from jaxbench.cases import Case
    from jaxbench.env import host
    from jaxbench.interleave import LiveStopped, Schedule, Variant
    from jaxbench.store import new_run_id
    from jaxbench.store.live import now

    if comparisons < 1:
        raise ValueError(f"--comparisons must be >= 1, got {comparisons!r}")
    verdicts.check_rule(threshold, alpha)
    base = schedule or Schedule()
    check_pairs(base.pairs)
    base = dataclasses.replace(base, max_pairs=base.pairs)
    python = python or sys.executable
    side = Variant("current", python, {})
    record = Calibration(
        run_id=new_run_id(),
        started_at=now(),
        requested=comparisons,
        case=CalibrationCase(
            workload=workload, params=dict(params), label=Case(workload, dict(params)).label
        ),
        backend=backend,
        python=python,
        host=host(),
        schedule=dataclasses.asdict(base),
        threshold=threshold,
        alpha=alpha,
        summary=summarize_calibration([], threshold=threshold, alpha=alpha),
    )
    path = Path(folder) / record.path_name
    live = {"path": path, "backend": backend, "threshold": threshold, "alpha": alpha}
    for i in range(comparisons):
        s = dataclasses.replace(base, seed=base.seed + i)
        try:
            record = _one_comparison(record, i, s, side, (workload, dict(params)), live, on_pair)
        except LiveStopped as exc:
            kept = sum(len(x.pair_log_ratios) for x in record.comparisons)
            note = (f"of whole comparisons; the {exc.pairs} of comparison {i + 1} are dropped: "
                    "a calibration keeps whole comparisons only" if exc.pairs else "")  # fmt: skip
            raise LiveStopped(path if record.comparisons else None, kept, exc.cause,
                              note) from exc  # fmt: skip
    return record, path


def _one_comparison(
    record: Calibration,
    index: int,
    s: Any,
    side: Any,
    case: tuple[str, dict[str, Any]],
    live: dict[str, Any],
    on_pair: OnPair | None,
) -> Calibration:
    """``record`` with A/A comparison ``index`` added, saved after every pair.

    ``live`` has :func:`~jaxbench.interleave.run_live`'s ``path``, ``backend``, ``threshold``
    and ``alpha``. The record is written once the comparison has all its pairs (or its time),
    and again after each later pair; before the first comparison ends nothing is written.
    """
    from jaxbench.interleave import run_live
    from jaxbench.interleave.session import out_of_time
    from jaxbench.store.live import now

    started, before = now(), record
    threshold, alpha = live["threshold"], live["alpha"]

    def contents(found: list[CaseComparison]) -> Calibration | None:
        nonlocal record
        (c,) = found
        if c.status == "ok" and (len(c.pairs) == s.pairs or out_of_time(c, s.max_time_s)):
            record = _with(before, c, _entry(c, index, s.seed, started, threshold, alpha))
        return record if record.comparisons else None

    def saved(pairs: int, path: Path) -> None:
        if on_pair:
            on_pair(index, pairs)

    (c,) = run_live(side, side, [case], schedule=s, on_saved=saved, contents=contents,
                    **live).comparisons  # fmt: skip
    if c.status != "ok":
        kept = f"; the comparisons finished before it are in {live['path']}" if index else ""
        raise CalibrationFailed(f"{c.label}: {c.status}: {c.error}{kept}")
    return record


def _with(record: Calibration, c: CaseComparison, entry: CalibrationComparison) -> Calibration:
    """``record`` with one more finished comparison, summarized; complete after the last."""
    update: dict[str, Any] = {"comparisons": [*record.comparisons, entry]}
    if record.jax is None and c.baseline:
        update |= {"jax": c.baseline.jax, "jaxlib": c.baseline.jaxlib,
                   "case": record.case.model_copy(update={"label": c.label})}  # fmt: skip
    if len(update["comparisons"]) == record.requested:
        from jaxbench.store.live import now

        update |= {"complete": True, "finished_at": now()}
    return summarized(record.model_copy(update=update))


def load_calibrations(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[Calibration], list[Problem]]:
    """Every :class:`~jaxbench.store.Calibration` under ``paths`` (:func:`jaxbench.store.load`).

    Bad files are reported in ``problems`` with their names; the rest still load.
    """
    loaded = load(paths, kinds={"calibration"})
    return loaded.models("calibration"), list(loaded.problems)
