"""Compare two versions case by case: steady-state latency and compile time, never mixed.

Each row of a comparison is one case (benchmark and parameters) under one measurement condition
(:mod:`jaxbench.analysis.conditions`) and one metric, judged over **processes**
(:func:`jaxbench.inference.verdicts.estimate_independent`; the ``process`` column of
:func:`jaxbench.analysis.load_results` says which records share one):

- ``steady_state``: per process, the median of every timed call of its ``ok`` records;
- ``compile``: per process, its XLA compile time. A compile that a case took over from an
  earlier case of the same process (one program shared by several K values, say) counts once,
  for the case that paid for it; persistent-cache hits are left out.

A verdict becomes ``unstable`` when the noise indicators show a disturbance that could explain it
(:func:`jaxbench.inference.stability.processes_disturbances`,
:func:`jaxbench.inference.stability.veto`). A case measured for the baseline under one
condition and for the candidate under another is not compared; :attr:`Comparison.unmatched`
names it and :attr:`Comparison.kept_apart` says which fields differ.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.analysis.conditions import CONDITION, DEFAULT_FIELDS, split_series
from jaxbench.analysis.frames import case_sort_key, compile_times, laid_out
from jaxbench.analysis.versions import previous_version, version_categorical
from jaxbench.inference import stability, verdicts
from jaxbench.store import Noise

STEADY_STATE = "steady_state"
COMPILE = "compile"
DEFAULT_COMPILE_THRESHOLD = 0.10
BASIS = "independent processes: per process the median call; Welch t interval of log medians"
COLUMNS = (
    "metric",
    "case",
    "benchmark",
    CONDITION,
    "n_baseline",
    "n_candidate",
    "calls_baseline",
    "calls_candidate",
    "baseline_median_s",
    "candidate_median_s",
    "ratio",
    "ci_low",
    "ci_high",
    "p_value",
    "verdict",
    "detectable",
    "sd_log",
    "advice",
    "basis",
)


@dataclass(frozen=True)
class Comparison:
    """The result of :func:`compare_versions`.

    Attributes:
        baseline: Baseline version (or other ``by`` value).
        candidate: Candidate version.
        table: One row per metric, case and condition; columns :data:`COLUMNS`. ``n_*`` count
            processes, ``calls_*`` the values nested in them; ``*_median_s`` are medians of the
            per-process medians (seconds); ``ratio`` is candidate / baseline (geometric mean over
            processes; above 1: slower), ``ci_low``/``ci_high`` its ``1 - alpha`` interval,
            ``verdict`` one of :data:`jaxbench.inference.verdicts.VERDICTS`, ``detectable`` the
            smallest slowdown this design detects at 80 % power, ``sd_log`` the spread of one
            process's log median (pooled over the sides), ``advice`` what would settle an
            ``inconclusive`` case or why one is ``unstable``.
        kept_apart: Why rows of one case were not pooled (differing condition fields).
        unmatched: Cases of one side with no counterpart under the same condition, and cases
            one side timed and the other only skipped (a case that one side recorded only as
            failed is under ``failed`` instead).
        threshold: Steady-state threshold used (relative, e.g. 0.02).
        compile_threshold: Compile-time threshold used.
        alpha: ``1 -`` the confidence level of the intervals.
        failed: Cases that one side timed and the other recorded, but never ``ok``.
    """

    baseline: str
    candidate: str
    table: pd.DataFrame
    kept_apart: list[str]
    unmatched: list[str]
    threshold: float
    compile_threshold: float
    alpha: float
    failed: list[Failure] = field(default_factory=list)

    @property
    def candidate_failed(self) -> bool:
        """Whether a case that the baseline timed fails on the candidate (a regression)."""
        return any(f.side == self.candidate for f in self.failed)


@dataclass(frozen=True)
class Failure:
    """A case that one side timed (``ok`` records) and the other recorded, none of them ``ok``.

    Attributes:
        case: The case label.
        side: The side whose records of it are all not ``ok`` (``by``'s value).
        statuses: How many of its records had each status, e.g. ``{"failed": 2}``.
        error: The first of their errors (``None``: none recorded).
    """

    case: str
    side: str
    statuses: dict[str, int]
    error: str | None

    def __str__(self) -> str:
        counts = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))
        why = f"; first error: {self.error}" if self.error else ""
        return f"{self.case}: no ok record on {self.side} ({counts}){why}"


def _failures(
    rows: pd.DataFrame, by: str, sides: tuple[str, str]
) -> tuple[list[Failure], dict[str, str]]:
    """:attr:`Comparison.failed` of both sides' rows, and the cases a side could not time.

    ``rows`` has ``case``, ``status``, ``samples_s`` and ``by``. A case one side timed and the
    other only skipped (not applicable there, or an asv benchmark not selected in that run), or
    recorded ``ok`` without samples (asv without ``--record-samples`` keeps only a median), is
    no regression: it maps to its :attr:`Comparison.unmatched` line instead.
    """
    side = rows[by].astype(str)
    ok = rows["status"] == "ok"
    timed = {s: set(rows.loc[ok & (side == s), "case"]) for s in sides}
    out: list[Failure] = []
    skipped: dict[str, str] = {}
    sampled = ok & (rows["samples_s"].map(len) > 0)
    with_samples = {s: set(rows.loc[sampled & (side == s), "case"]) for s in sides}
    for s, other in (sides, sides[::-1]):
        for case in sorted((timed[s] - with_samples[s]) & with_samples[other], key=str):
            skipped[str(case)] = (f"{STEADY_STATE} {case}: {s} has no samples, so nothing "
                                  "to compare (an asv result of a run without "
                                  "--record-samples keeps only its median)")  # fmt: skip
        lost = rows[(side == s) & rows["case"].isin(timed[other] - timed[s])]
        for case, records in lost.groupby("case", sort=False):
            errors = records["error"].dropna() if "error" in records else pd.Series()
            error = str(errors.iloc[0]) if len(errors) else None
            statuses = {str(k): int(v) for k, v in records["status"].value_counts().items()}
            if set(statuses) == {"skipped"}:
                skipped[str(case)] = f"{case}: {s} skipped it" + (f" ({error})" if error else "")
                continue
            out.append(Failure(str(case), s, statuses, error))
    return sorted(out, key=lambda f: (f.side != sides[1], f.case)), skipped  # the candidate's first


@dataclass(frozen=True)
class _Processes:
    """The rows of a comparison's values, per process, for every case, condition and side.

    Made in one pass over the values (:func:`_by_process`), not one per case: a long history
    has hundreds of cases and thousands of processes. Segment ``i`` is one process of one
    ``(case, condition, side)`` group; a group's segments are contiguous, its processes in the
    order of their names.

    Attributes:
        groups: ``(case, condition, side)`` -> the ``slice`` of its segments.
        values: Per segment, its values in call order (by ``sample``; in frame order where
            there is none).
        noise: Per segment, the noise dict of its first row in frame order (``None`` where not
            recorded).
        medians: Per segment, the median of its values (``nan`` where one is ``nan``).
        log_medians: Per segment, the log of the median of its finite, positive values
            (``nan`` where it has none).
        calls: Per segment, how many finite, positive values it has.
        processes: Per segment, its process (the records' ``process``: a run id).
    """

    groups: dict[tuple[str, str, str], slice]
    values: list[np.ndarray]
    noise: list[Any]
    medians: np.ndarray
    log_medians: np.ndarray
    calls: np.ndarray
    processes: list[str]

    def side(self, key: tuple[str, str, str]) -> tuple[list[np.ndarray], list[Any]]:
        """One group's values and noise, per process."""
        part = self.groups[key]
        return self.values[part], self.noise[part]


def _by_process(records: pd.DataFrame, keys: list[str], column: str) -> _Processes:
    """:class:`_Processes` of ``records`` (rows with ``keys``, ``process``, ``column``).

    ``column`` holds each record's values in call order (its samples) or one value a record
    (its compile time); missing values are left out.
    """
    group = records.groupby(keys, sort=False, dropna=False).ngroup().to_numpy()
    names = list(records.drop_duplicates(keys)[keys].itertuples(index=False, name=None))
    process, ids = pd.factorize(records["process"], sort=True)  # in the order of the ids
    x, row, call = laid_out(records[column].tolist())
    kept = ~np.isnan(x)
    x, row, call = x[kept], row[kept], call[kept]
    g, p = group[row], process[row]
    # by group, then process (in name order), then call: ties in frame order (a stable sort)
    order = np.lexsort((call, p, g))
    g, p = g[order], p[order]
    first = np.r_[True, (g[1:] != g[:-1]) | (p[1:] != p[:-1])] if x.size else np.zeros(0, bool)
    starts = np.flatnonzero(first)
    segment = np.cumsum(first) - 1  # of each value in that order
    noise = np.full(starts.size, None)
    if "noise" in records and x.size:
        noise = records["noise"].to_numpy()[np.minimum.reduceat(row[order], starts)]
    x = x[order]
    valid = np.isfinite(x) & (x > 0)
    medians = verdicts.segment_medians(segment, x, starts.size)
    positive = medians if valid.all() else verdicts.segment_medians(segment[valid], x[valid],
                                                                    starts.size)  # fmt: skip
    # math.log, as the estimate of one group takes it (NumPy's differs in the last bit at times);
    # nan where a process has no finite, positive value
    logs = np.fromiter((math.log(m) if m > 0 else math.nan for m in positive.tolist()),
                       dtype=float, count=positive.size)  # fmt: skip
    present = g[starts]  # each segment's group: runs of one value
    bounds = np.flatnonzero(np.r_[True, present[1:] != present[:-1], True]) if x.size else [0]
    return _Processes(
        groups={names[present[a]]: slice(a, b) for a, b in itertools.pairwise(bounds)},
        values=np.split(x, starts[1:]) if x.size else [],
        noise=[_noise_dict(v) for v in noise],
        medians=medians,
        log_medians=logs,
        calls=np.bincount(segment[valid], minlength=starts.size),
        processes=[str(ids[i]) for i in p[starts]],
    )


def _noise_dict(noise: Any) -> dict[str, Any] | None:
    """A record's noise as the disturbance checks read it (``None`` where not recorded)."""
    if not isinstance(noise, Noise):
        return None
    return {**noise.__dict__, **(noise.__pydantic_extra__ or {})}


def _compare_values(
    found: _Processes,
    keys: tuple[tuple[str, str, str], tuple[str, str, str]],
    column: str,
    threshold: float,
    alpha: float,
    strict: bool,
) -> dict[str, object] | None:
    """One row's figures: the estimate over processes, vetoed by what could explain it.

    ``None`` where a side has no process with a positive value (every value 0): nothing to
    take the log of, so no estimate.
    """
    (va, na), (vb, nb) = found.side(keys[0]), found.side(keys[1])
    a, b = found.groups[keys[0]], found.groups[keys[1]]
    la, lb = found.log_medians[a], found.log_medians[b]
    ka, kb = np.isfinite(la), np.isfinite(lb)
    la, lb = la[ka], lb[kb]
    if not (la.size and lb.size):
        return None
    calls = (int(found.calls[a].sum()), int(found.calls[b].sum()))
    est = verdicts.estimate_log_medians(la, lb, calls, threshold, alpha, strict)
    if est.verdict == "inconclusive":  # does one process stand out? (labelled only here)
        # each side's processes numbered from 0, as the disturbances' reasons number them
        labels = {side: [f"{side} process {i} ({name})" for i, name in
                         enumerate(found.processes[part]) if keep[i]]
                  for side, part, keep in (("baseline", a, ka), ("candidate", b, kb))}  # fmt: skip
        est = stability.outlier_note(
            est,
            {"baseline": (la, labels["baseline"]), "candidate": (lb, labels["candidate"])},
            lambda logs: verdicts.estimate_log_medians(
                logs["baseline"], logs["candidate"], calls, threshold, alpha, strict
            ),
        )
    drift = column == "samples_s"
    disturbed = stability.processes_disturbances(na, nb, va if drift else (), vb if drift else ())
    return {
        "baseline_median_s": verdicts.median(found.medians[a]),
        "candidate_median_s": verdicts.median(found.medians[b]),
        **stability.veto(est, disturbed).row(),
        "basis": BASIS,
    }


def _metric_rows(
    values: pd.DataFrame,
    column: str,
    metric: str,
    by: str,
    sides: tuple[str, str],
    threshold: float,
    alpha: float,
    strict: bool,
    failed: set[str],
) -> tuple[list[dict[str, object]], list[str]]:
    rows, unmatched = [], []
    # one pass over the rows: each (case, condition, side) apart, not one scan per case
    keys = ["case", CONDITION, "_side"]
    keyed = values.assign(_side=values[by].astype(str))
    found: dict[str, dict[str, set[str]]] = {}  # case -> side -> conditions, values or not
    for case, cond, s in keyed[keys].drop_duplicates().itertuples(index=False):
        found.setdefault(case, {}).setdefault(s, set()).add(cond)
    processes = _by_process(keyed, keys, column)
    first = values.drop_duplicates("case")
    benchmark = dict(zip(first["case"], first["benchmark"], strict=True))
    cases = first["case"]
    for case in cases.iloc[np.argsort(case_sort_key(cases).to_numpy(), kind="stable")]:
        conds = {s: found[case].get(s, set()) for s in sides}
        both = sorted(conds[sides[0]] & conds[sides[1]])
        for cond in both:
            pair = (case, cond, sides[0]), (case, cond, sides[1])
            if not all(k in processes.groups for k in pair):
                continue
            figures = _compare_values(processes, pair, column, threshold, alpha, strict)
            if figures is None:
                unmatched.append(f"{metric} {case}: a side has no positive value under {cond} "
                                 "(every one 0); not compared")  # fmt: skip
                continue
            rows.append({"metric": metric, "case": case, "benchmark": benchmark[case],
                         CONDITION: cond} | figures)  # fmt: skip
        alone = {s: sorted(conds[s] - set(both)) for s in sides}
        for s, other in (sides, sides[::-1]) if case not in failed else ():
            if alone[s] and not conds[other]:
                unmatched.append(f"{metric} {case}: only {s} has it")
            elif alone[s]:
                unmatched.append(
                    f"{metric} {case}: {s} under {', '.join(alone[s])} has no {other} "
                    f"counterpart there ({other} only under {', '.join(sorted(conds[other]))}); "
                    "conditions differ, see kept_apart"
                )
    return rows, unmatched


#: Columns of the frame that :func:`compare_versions` reads once the series are split.
_READ = ("case", "benchmark", CONDITION, "process", "status", "error", "version", "samples_s",
         "noise", "compile_s", "compilation_cache")  # fmt: skip


def _with_process(frame: pd.DataFrame) -> pd.DataFrame:
    if "process" in frame:
        return frame
    return frame.assign(process=frame["run_id"].astype(str))


def compare_versions(
    frame: pd.DataFrame,
    baseline: str,
    candidate: str,
    *,
    by: str = "version",
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    compile_threshold: float = DEFAULT_COMPILE_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    condition_fields: Sequence[str] = DEFAULT_FIELDS,
    strict: bool = False,
) -> Comparison:
    """Compare ``candidate`` with ``baseline`` per case and condition, steady state and compile.

    Every interval is taken over processes (see the module docstring); one process a side
    gives no interval, so such a case is ``inconclusive`` with the advice to run more.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.
        baseline: Value of ``by`` for the baseline, e.g. ``"0.4.30"``.
        candidate: Value of ``by`` for the candidate.
        by: Column holding what is compared (``"version"``; ``"commit"`` or ``"side"`` work too,
            and are then left out of the condition).
        threshold: Smallest relative steady-state change that counts (0.02 = 2 %).
        compile_threshold: The same for compile time (noisier, so 10 % by default).
        alpha: ``1 -`` the confidence level of the intervals.
        condition_fields: Fixed condition fields
            (:func:`jaxbench.analysis.conditions.condition_fields`).
        strict: The minimum-effect rule (:func:`jaxbench.inference.verdicts.decide`).

    Returns:
        A :class:`Comparison`; its table is sorted by metric and case.

    Raises:
        ValueError: ``baseline`` or ``candidate`` has no rows in ``frame``, or a bad
            ``threshold`` or ``alpha``.
    """
    verdicts.check_rule(threshold, alpha)
    verdicts.check_rule(compile_threshold, alpha)
    present = set(frame[by].dropna().astype(str)) if by in frame else set()
    for name, value in (("baseline", baseline), ("candidate", candidate)):
        if str(value) not in present:
            raise ValueError(f"{name} {value!r} has no rows; {by} values: {sorted(present)}")
    sides = (str(baseline), str(candidate))
    sub = _with_process(frame[frame[by].astype(str).isin(sides)])
    fields = [f for f in condition_fields if f != by]
    split = split_series(sub, fields)
    # only the columns the comparison reads: exploding and grouping copy every column they hold
    narrow = split.frame[[c for c in dict.fromkeys((*_READ, by)) if c in split.frame]]
    timed = narrow[(narrow["status"] == "ok") & (narrow["samples_s"].map(len) > 0)]
    failed, skipped = _failures(narrow, by, sides)
    # said under failed (or skipped), not as "only one side has it"
    lost = {f.case for f in failed} | set(skipped)
    steady, un1 = _metric_rows(timed, "samples_s", STEADY_STATE, by, sides, threshold, alpha,
                               strict, lost)  # fmt: skip
    comp, un2 = _metric_rows(compile_times(narrow), "compile_s", COMPILE, by, sides,
                             compile_threshold, alpha, strict, lost)  # fmt: skip
    table = pd.DataFrame([*steady, *comp], columns=list(COLUMNS))
    return Comparison(
        baseline=sides[0],
        candidate=sides[1],
        table=table,
        kept_apart=split.reasons,
        unmatched=[*skipped.values(), *un1, *un2],
        failed=failed,
        threshold=threshold,
        compile_threshold=compile_threshold,
        alpha=alpha,
    )


#: The change recorded comparisons plan for ("how many processes to decide 5 %").
PLANNED_EFFECT = 0.05


def processes_to_decide(
    table: pd.DataFrame,
    effect: float = PLANNED_EFFECT,
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    strict: bool = False,
) -> tuple[int | None, float]:
    """Processes a side that this machine needs to call a change of ``effect`` ``slower``.

    From the measured spread between processes: the median over the steady-state rows of
    ``sd_log`` (one process's log median), through
    :func:`jaxbench.inference.verdicts.units_needed` (80 % power).

    Args:
        table: :attr:`Comparison.table`.
        effect: The change to decide (0.05 = 5 %).
        threshold: Threshold of the verdicts.
        alpha: Their level.
        strict: The minimum-effect rule.

    Returns:
        ``(processes a side, the spread used)``; ``(None, nan)`` without two processes on a
        side anywhere (no spread measured).
    """
    sd = table.loc[table["metric"] == STEADY_STATE, "sd_log"].astype(float).dropna()
    if sd.empty:
        return None, math.nan
    spread = float(sd.median())
    need = verdicts.units_needed(effect, spread, alpha, threshold, paired=False, strict=strict)
    return (math.ceil(need) if math.isfinite(need) else None), spread


def compare_to_previous(frame: pd.DataFrame, version: str, **kwargs: object) -> Comparison:
    """:func:`compare_versions` of ``version`` against the version just before it in ``frame``.

    Args:
        frame: As :func:`compare_versions`.
        version: The candidate JAX version.
        **kwargs: Passed to :func:`compare_versions`.

    Raises:
        ValueError: ``version`` is not in ``frame`` or is its oldest version.
    """
    versions = version_categorical(frame["version"]).categories
    previous = previous_version(versions, version)
    if previous is None:
        raise ValueError(f"{version!r} is the oldest version in the frame: nothing to compare to")
    return compare_versions(frame, previous, version, **kwargs)  # type: ignore[arg-type]
