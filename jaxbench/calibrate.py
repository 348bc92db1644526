"""Calibration on the machine at hand: A/A comparisons, their false alarms and detectable effect.

``jaxbench calibrate`` (:mod:`jaxbench.calibrate_cli`) runs ``C`` live comparisons of one case
with the very same interpreter on both sides (A/A), each over ``P`` pairs of fresh worker
processes with one look (:func:`jaxbench.interleave.run_interleaved`, ``max_pairs = pairs``).
Every verdict other than ``slower`` or ``faster`` is right for an A/A comparison, so

- the **false-alarm rate** is the share of the ``C`` comparisons called ``slower`` or ``faster``,
  with its exact (Clopper-Pearson) 95 % interval;
- the **between-pair spread** ``sd`` is the standard deviation of the log ratios of all ``C * P``
  pairs: the spread of one pair's figure, which is what the interval of a live comparison rests
  on. From it, the smallest slowdown the default design of ``jaxbench compare --interleave``
  (:class:`jaxbench.interleave.Schedule` defaults: ``pairs`` at the first look, ``max_pairs`` at
  the last, each look at ``alpha / looks``) calls ``slower`` with 80 % and 95 % power
  (:func:`jaxbench.analysis.verdicts.detectable`, with ``se = sd / sqrt(pairs)``);
- the **time per pair** (wall seconds, worker start included) and so the time to a verdict.

:func:`summarize_calibration` is that computation on plain numbers. The record
(:class:`Calibration`, kind ``calibration``, schema version 1) is one JSON file,
``calibration-<run id>.json``, written atomically after every finished comparison
(``complete`` false until the last); :func:`load_calibrations` and :func:`latest_calibration`
read them back.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jaxbench.analysis import verdicts
from jaxbench.analysis.frames import Problem, case_label
from jaxbench.analysis.paired import pair_log_ratio

FILE_PREFIX = "calibration-"
SCHEMA_VERSION = 1
DEFAULT_COMPARISONS = 4
#: The case calibrated when nothing is selected (unselected parameters of another workload
#: take these values where it has them).
DEFAULT_SELECTION = {"workload": "train_step", "size": "small", "dtype": "float32",
                     "optimizer": "sgd"}  # fmt: skip
#: Verdicts that are false alarms on an A/A comparison.
FALSE_ALARMS = ("slower", "faster")
#: Level of the interval of the false-alarm rate.
CONFIDENCE = 0.95


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
    if pairs < 2 or not math.isfinite(sd):
        return math.nan
    return verdicts.detectable(sd / math.sqrt(pairs), pairs - 1, alpha, threshold, power)


def proportion_interval(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Exact (Clopper-Pearson) interval of a proportion ``k / n``; ``(nan, nan)`` for n = 0."""
    if n == 0:
        return (math.nan, math.nan)
    from scipy.stats import binomtest

    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
    return (float(ci.low), float(ci.high))


class Design(BaseModel):
    """The design the detectable figures are stated for (``jaxbench compare`` defaults)."""

    model_config = ConfigDict(extra="forbid")

    pairs: int
    max_pairs: int
    looks: int
    threshold: float
    alpha: float
    alpha_per_look: float


class CalibrationSummary(BaseModel):
    """What the A/A comparisons say about this machine (``None``: not computable).

    Attributes:
        comparisons: A/A comparisons with a verdict.
        pairs: Pairs over all of them.
        verdicts: Count per verdict (:data:`jaxbench.analysis.verdicts.VERDICTS`).
        false_alarms: Comparisons called ``slower`` or ``faster``.
        false_alarm_rate: ``false_alarms / comparisons``.
        false_alarm_ci_low: Lower end of its exact 95 % interval.
        false_alarm_ci_high: Upper end.
        ratio: ``exp`` of the mean pair log ratio over all pairs (1 for a fair A/A).
        sd_log: Standard deviation of the pair log ratios over all pairs.
        design: The design of the figures below.
        detectable_80: Smallest slowdown called ``slower`` with 80 % power at the first look
            (``design.pairs`` pairs, ``design.alpha_per_look``).
        detectable_95: The same at 95 % power.
        detectable_80_max_pairs: At the last look (``design.max_pairs`` pairs).
        detectable_95_max_pairs: The same at 95 % power.
        seconds_per_pair: Median wall seconds of one pair (workers started, case prepared,
            warm-up and timed rounds).
        seconds_to_verdict: ``design.pairs`` times that: a verdict at the first look.
        seconds_to_verdict_max: ``design.max_pairs`` times that: the longest comparison.
    """

    model_config = ConfigDict(extra="forbid")

    comparisons: int
    pairs: int
    verdicts: dict[str, int]
    false_alarms: int
    false_alarm_rate: float | None
    false_alarm_ci_low: float | None
    false_alarm_ci_high: float | None
    ratio: float | None
    sd_log: float | None
    design: Design
    detectable_80: float | None
    detectable_95: float | None
    detectable_80_max_pairs: float | None
    detectable_95_max_pairs: float | None
    seconds_per_pair: float | None
    seconds_to_verdict: float | None
    seconds_to_verdict_max: float | None


def default_design(
    threshold: float = verdicts.DEFAULT_THRESHOLD, alpha: float = verdicts.DEFAULT_ALPHA
) -> Design:
    """:class:`Design` of ``jaxbench compare --interleave`` with its default schedule."""
    from jaxbench.interleave.session import Schedule

    s = Schedule()
    return Design(pairs=s.pairs, max_pairs=s.max_pairs, looks=s.looks, threshold=threshold,
                  alpha=alpha, alpha_per_look=verdicts.look_alpha(alpha, s.looks))  # fmt: skip


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
            verdict of :func:`~jaxbench.analysis.verdicts.estimate_paired` at ``threshold`` and
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


class CalibrationCase(BaseModel):
    """The calibrated case: workload, parameters and label (``<benchmark> name=value ...``)."""

    model_config = ConfigDict(extra="forbid")

    workload: str
    params: dict[str, Any]
    label: str


class CalibrationComparison(BaseModel):
    """One A/A comparison: its estimate (one look) and every pair's log ratio and seconds."""

    model_config = ConfigDict(extra="forbid")

    index: int
    seed: int
    verdict: str
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    advice: str
    pair_log_ratios: list[float]
    pair_seconds: list[float]
    started_at: str


class Calibration(BaseModel):
    """The record of ``jaxbench calibrate`` (kind ``calibration``, schema version 1).

    Attributes:
        kind: ``calibration``.
        schema_version: :data:`SCHEMA_VERSION`.
        run_id: :func:`jaxbench.results.new_run_id`; the file is ``calibration-<run_id>.json``.
        started_at: ISO-8601 UTC start.
        finished_at: End; ``None`` while running or when interrupted.
        complete: All requested comparisons are in.
        requested: Comparisons asked for.
        case: The case, the same on both sides.
        backend: Backend of the workers.
        python: Interpreter of both sides.
        host: :func:`jaxbench.env.host` of this machine.
        jax: JAX version in the workers.
        jaxlib: jaxlib version in the workers.
        schedule: The comparisons' :class:`~jaxbench.interleave.Schedule` (one look).
        threshold: Threshold of the verdicts.
        alpha: Level of the verdicts (one look).
        comparisons: One entry per finished comparison.
        summary: :func:`summarize_calibration` of them.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["calibration"] = "calibration"
    schema_version: Literal[1] = SCHEMA_VERSION
    run_id: str
    started_at: str
    finished_at: str | None = None
    complete: bool = False
    requested: int
    case: CalibrationCase
    backend: str
    python: str
    host: dict[str, Any]
    jax: str | None = None
    jaxlib: str | None = None
    schedule: dict[str, Any]
    threshold: float
    alpha: float
    comparisons: list[CalibrationComparison] = Field(default_factory=list)
    summary: CalibrationSummary

    @property
    def path_name(self) -> str:
        """``calibration-<run_id>.json``."""
        return f"{FILE_PREFIX}{self.run_id}.json"

    def summarized(self) -> Calibration:
        """A copy whose summary is recomputed from its comparisons."""
        summary = summarize_calibration(
            [c.pair_log_ratios for c in self.comparisons],
            [c.verdict for c in self.comparisons],
            [s for c in self.comparisons for s in c.pair_seconds],
            self.threshold,
            self.alpha,
            self.summary.design,
        )
        return self.model_copy(update={"summary": summary})


def write_calibration(folder: str | os.PathLike[str], record: Calibration) -> Path:
    """Write ``record`` to ``folder/calibration-<run id>.json`` atomically; returns the path."""
    from jaxbench.results import write_bytes_atomic

    data = json.dumps(record.model_dump(mode="json"), indent=1).encode()
    return write_bytes_atomic(Path(folder) / record.path_name, data)


#: Called after each pair with (comparison index, pairs done in it).
OnPair = Callable[[int, int], None]
#: Called with the record after each finished comparison (e.g. to save it).
OnComparison = Callable[[Calibration], None]


class CalibrationFailed(RuntimeError):
    """The case did not run (failed to prepare, or recompiled while timed)."""


def run_calibration(
    workload: str,
    params: dict[str, Any],
    comparisons: int = DEFAULT_COMPARISONS,
    schedule: Any = None,
    backend: str = "cpu",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    on_pair: OnPair | None = None,
    on_comparison: OnComparison | None = None,
    python: str | None = None,
) -> Calibration:
    """Run ``comparisons`` A/A live comparisons of one case and summarize them.

    Args:
        workload: Workload name.
        params: The case's parameters (both sides the same).
        comparisons: How many A/A comparisons, >= 1.
        schedule: :class:`~jaxbench.interleave.Schedule` of each comparison; its
            ``max_pairs`` is set to ``pairs`` (one look) and comparison ``i`` uses seed
            ``seed + i``. Default: the Schedule defaults.
        backend: Backend of the workers.
        threshold: Threshold of the verdicts.
        alpha: Level of the verdicts.
        on_pair: See :data:`OnPair`.
        on_comparison: See :data:`OnComparison`.
        python: Interpreter of both sides (default this one).

    Raises:
        ValueError: ``comparisons`` < 1, or a bad threshold or alpha.
        CalibrationFailed: The case failed or recompiled (it would every time).
        jaxbench.interleave.WorkerError: A worker could not start or died.
    """
    from jaxbench.env import host
    from jaxbench.interleave.result import now
    from jaxbench.interleave.session import Schedule, Variant, run_interleaved
    from jaxbench.results import new_run_id

    if comparisons < 1:
        raise ValueError(f"--comparisons must be >= 1, got {comparisons!r}")
    verdicts.check_rule(threshold, alpha)
    base = schedule or Schedule()
    base = dataclasses.replace(base, max_pairs=base.pairs)
    python = python or sys.executable
    side = Variant("current", python, {})
    record = Calibration(
        run_id=new_run_id(),
        started_at=now(),
        requested=comparisons,
        case=CalibrationCase(
            workload=workload, params=dict(params), label=case_label(workload, params)
        ),
        backend=backend,
        python=python,
        host=host(),
        schedule=dataclasses.asdict(base),
        threshold=threshold,
        alpha=alpha,
        summary=summarize_calibration([], threshold=threshold, alpha=alpha),
    )
    for i in range(comparisons):
        s = dataclasses.replace(base, seed=base.seed + i)
        started, marks = now(), [time.perf_counter()]

        def mark(found: list, index: int = i, marks: list[float] = marks) -> None:
            marks.append(time.perf_counter())
            if on_pair:
                on_pair(index, len(marks) - 1)

        (c,) = run_interleaved(side, side, [(workload, dict(params))], backend, s, mark,
                               threshold, alpha)  # fmt: skip
        if c.status != "ok":
            raise CalibrationFailed(f"{c.label}: {c.status}: {c.error}")
        est = c.estimate(threshold, alpha)
        logs = [pair_log_ratio([r.baseline_s for r in p.rounds], [r.candidate_s for r in p.rounds])
                for p in c.pair_runs]  # fmt: skip
        entry = CalibrationComparison(
            index=i,
            seed=s.seed,
            verdict=est.verdict,
            ratio=_num(est.ratio),
            ci_low=_num(est.ci_low),
            ci_high=_num(est.ci_high),
            advice=est.advice,
            pair_log_ratios=logs,
            pair_seconds=list(np.diff(marks)),
            started_at=started,
        )
        update: dict[str, Any] = {"comparisons": [*record.comparisons, entry]}
        if record.jax is None and c.baseline:
            update |= {"jax": c.baseline.jax, "jaxlib": c.baseline.jaxlib,
                       "case": record.case.model_copy(update={"label": c.label})}  # fmt: skip
        if i == comparisons - 1:
            update |= {"complete": True, "finished_at": now()}
        record = record.model_copy(update=update).summarized()
        if on_comparison:
            on_comparison(record)
    return record


def calibration_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """``calibration-*.json`` files under ``paths``, folders searched recursively.

    A file named explicitly is taken whatever its name.
    """
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(p.rglob(f"{FILE_PREFIX}*.json")))
        else:
            out.append(p)
    return out


def load_calibrations(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[Calibration], list[Problem]]:
    """Every :class:`Calibration` under ``paths``; bad files are reported in ``problems``.

    A file that cannot be read, is not JSON or is not a calibration record (schema version 1)
    becomes a :class:`~jaxbench.analysis.frames.Problem` naming it; the rest still load.
    """
    found: list[Calibration] = []
    problems: list[Problem] = []
    for path in calibration_files(paths):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            problems.append(Problem(str(path), f"cannot read: {exc}"))
            continue
        except ValueError as exc:
            problems.append(Problem(str(path), f"not JSON: {exc}"))
            continue
        try:
            found.append(Calibration.model_validate(data))
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "the file"
            reason = f"not a calibration record (schema {SCHEMA_VERSION}): {where}: {first['msg']}"
            problems.append(Problem(str(path), reason))
    return found, problems


def latest_calibration(
    paths: Iterable[str | os.PathLike[str]],
    host: str | None = None,
    case: str | None = None,
) -> Calibration | None:
    """The most recent calibration under ``paths`` (by start time), or ``None``.

    Args:
        paths: Files or folders.
        host: Only calibrations of this host name (``host["hostname"]``).
        case: Only this case label (:attr:`CalibrationCase.label`).
    """
    found, _ = load_calibrations(paths)
    keep = [c for c in found
            if (host is None or c.host.get("hostname") == host)
            and (case is None or c.case.label == case)]  # fmt: skip
    return max(keep, key=lambda c: (c.started_at, c.run_id), default=None)
