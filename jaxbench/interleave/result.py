"""The record of a live comparison of two variants, its statistics, and its files.

A live comparison file is JSON Lines named ``interleave-<id>.jsonl``, one
:class:`CaseComparison` per line, every timed call kept (seconds). The results loader of the
analysis (:func:`jaxbench.analysis.load_results`) leaves these files to
:func:`load_comparisons`.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from jaxbench.analysis import stability, verdicts
from jaxbench.analysis.frames import Problem, case_label
from jaxbench.analysis.paired import pair_log_ratio

FILE_PREFIX = "interleave-"
Mode = Literal["interleaved", "back_to_back"]
BASIS = {
    "interleaved": "process pairs: per pair the median per-round log ratio; t interval over pairs",
    "back_to_back": "independent processes: per process the median call; Welch t interval",
}
#: Schedule keys of files written before several pairs per comparison existed.
LEGACY_PAIRS = {"pairs": 1, "max_pairs": 1, "pairs_step": 1, "looks": 1}


class SideInfo(BaseModel):
    """What one side ran on: its label, interpreter, parameters and environment.

    ``compile_s`` is seconds of XLA compile in that worker, ``flops`` FLOP per timed call from
    XLA's cost analysis (``None`` where the backend has none); ``env`` is
    :func:`jaxbench.env.collect` in the worker.
    """

    model_config = ConfigDict(extra="forbid")

    label: str
    python: str
    params: dict[str, Any]
    benchmark: str
    jax: str | None
    jaxlib: str | None
    backend: str | None
    device_kind: str | None
    compile_s: float | None
    flops: float | None
    env: dict[str, Any]


class Round(BaseModel):
    """One round: which side went first (``AB`` or ``BA``) and each side's block.

    ``baseline_s``/``candidate_s`` are latencies in seconds; ``*_noise`` the block's noise
    indicators (:mod:`jaxbench.measure.noise`; empty where not recorded).
    """

    model_config = ConfigDict(extra="forbid")

    order: Literal["AB", "BA"]
    baseline_s: list[float]
    candidate_s: list[float]
    baseline_noise: dict[str, Any] = Field(default_factory=dict)
    candidate_noise: dict[str, Any] = Field(default_factory=dict)


class PairRun(BaseModel):
    """One pair of fresh worker processes on one case: its sides and its timed rounds.

    Attributes:
        index: The pair's number within the comparison, from 0, in time order.
        status: ``ok``; ``failed`` (a side did not prepare); ``recompiled``.
        error: Reason for a status other than ``ok``.
        baseline: Side A in this pair's baseline process.
        candidate: Side B in this pair's candidate process.
        rounds: Timed rounds in order (warm-up rounds are not kept).
        started_at: ISO-8601 UTC time the pair started the case.
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    status: Literal["ok", "failed", "recompiled"] = "ok"
    error: str | None = None
    baseline: SideInfo | None = None
    candidate: SideInfo | None = None
    rounds: list[Round] = Field(default_factory=list)
    started_at: str


def now() -> str:
    """The current UTC time, ISO-8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class CaseComparison(BaseModel):
    """One case compared live between a baseline (A) and a candidate (B) over process pairs.

    Attributes:
        mode: ``interleaved`` (blocks alternate between the two live processes of each pair)
            or ``back_to_back`` (all of A in one process, then all of B in another, per pair).
        workload: Workload name.
        params: The case's parameters before each side's overrides (``SideInfo.params`` has
            what each side actually ran).
        schedule: Pairs (first batch, step, cap, looks), rounds, calls per block, warm-up
            rounds and calls, seed.
        status: ``ok``; ``failed`` (a side did not prepare; see ``error``); ``recompiled``
            (a compile inside a timed block: not steady state, not compared).
        error: Reason for a status other than ``ok``.
        baseline: Side A of the first pair (labels, versions).
        candidate: Side B of the first pair.
        rounds: The rounds of a file written before several pairs existed (one pair); empty
            otherwise.
        pairs: One :class:`PairRun` per pair of processes, in time order.
        started_at: ISO-8601 UTC time the case started.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Mode
    workload: str
    params: dict[str, Any]
    schedule: dict[str, Any]
    status: Literal["ok", "failed", "recompiled"] = "ok"
    error: str | None = None
    baseline: SideInfo | None = None
    candidate: SideInfo | None = None
    rounds: list[Round] = Field(default_factory=list)
    pairs: list[PairRun] = Field(default_factory=list)
    started_at: str

    @classmethod
    def start(
        cls, mode: Mode, workload: str, params: dict[str, Any], schedule: Any
    ) -> CaseComparison:
        """A comparison that has just started (no pairs yet)."""
        return cls(
            mode=mode,
            workload=workload,
            params=dict(params),
            schedule=asdict(schedule),
            started_at=now(),
        )

    def with_pair(self, pair: PairRun) -> CaseComparison:
        """A copy with ``pair`` added; a pair that failed marks the whole case failed."""
        update: dict[str, Any] = {"pairs": [*self.pairs, pair]}
        if self.baseline is None and pair.baseline and pair.candidate:
            update |= {"baseline": pair.baseline, "candidate": pair.candidate}
        if pair.status != "ok":
            update |= {"status": pair.status, "error": f"pair {pair.index}: {pair.error}"}
        return self.model_copy(update=update)

    @property
    def pair_runs(self) -> list[PairRun]:
        """Every pair, a file of the one-pair format read as one pair."""
        if self.pairs or not self.rounds:
            return list(self.pairs)
        return [PairRun(index=0, baseline=self.baseline, candidate=self.candidate,
                        rounds=self.rounds, started_at=self.started_at)]  # fmt: skip

    @property
    def looks(self) -> int:
        """Interim looks the schedule allows (alpha is split over them)."""
        return int(self.schedule.get("looks", LEGACY_PAIRS["looks"]))

    @property
    def label(self) -> str:
        """The case as ``<benchmark> name=value ...`` (the baseline's benchmark name)."""
        benchmark = self.baseline.benchmark if self.baseline else self.workload
        return case_label(benchmark, self.params)

    def estimate(
        self,
        threshold: float = verdicts.DEFAULT_THRESHOLD,
        alpha: float = verdicts.DEFAULT_ALPHA,
        mode: Mode | None = None,
    ) -> verdicts.Estimate:
        """The ratio (candidate / baseline), its interval over processes, and the verdict.

        ``interleaved``: one log ratio per pair (:func:`jaxbench.analysis.paired.pair_log_ratio`)
        and the t interval over pairs (:func:`jaxbench.analysis.verdicts.estimate_paired`).
        ``back_to_back`` (or ``mode="back_to_back"`` on interleaved data, to read it the
        sequential way): each process's calls pooled, processes independent
        (:func:`jaxbench.analysis.verdicts.estimate_independent`). Each of the schedule's looks
        spends ``alpha / looks`` (:func:`jaxbench.analysis.verdicts.look_alpha`). A verdict is
        ``unstable`` when :mod:`jaxbench.analysis.stability` finds the machine changed.

        Raises:
            ValueError: No pair has timed rounds (status not ``ok``), or the mode asks for
                pairing of back-to-back data.
        """
        mode = mode or self.mode
        pairs = [p for p in self.pair_runs if p.status == "ok" and p.rounds]
        if self.status != "ok" or not pairs:
            raise ValueError(f"{self.label}: no timed rounds ({self.status}: {self.error})")
        a_level = verdicts.look_alpha(alpha, self.looks)
        calls = (sum(len(r.baseline_s) for p in pairs for r in p.rounds),
                 sum(len(r.candidate_s) for p in pairs for r in p.rounds))  # fmt: skip
        if mode == "interleaved":
            if self.mode != "interleaved":
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

    def summary_line(self) -> str:
        """One line for a log: case, status or ratio with interval, verdict and pairs."""
        if self.status != "ok":
            return f"{self.label}: {self.status}: {self.error}"
        e = self.estimate()
        advice = f"; {e.advice}" if e.advice else ""
        return (
            f"{self.label}: {e.ratio:.4f} [{e.ci_low:.4f}, {e.ci_high:.4f}] "
            f"{e.verdict} ({self.mode}, {e.units}){advice}"
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


def write_jsonl(path: Path, comparisons: Sequence[CaseComparison]) -> Path:
    """Write ``comparisons`` to ``path`` as JSON Lines, atomically (temporary file, rename).

    Raises:
        OSError: The folder cannot be written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for c in comparisons:
            f.write(c.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def comparison_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Live comparison files among ``paths`` (files, or folders searched recursively)."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(p.rglob(f"{FILE_PREFIX}*.jsonl")))
        elif p.name.startswith(FILE_PREFIX) and p.suffix == ".jsonl":
            out.append(p)
    return out


def load_comparisons(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[CaseComparison], list[Problem]]:
    """Every :class:`CaseComparison` in the live comparison files under ``paths``.

    A line that is not a valid comparison is reported in ``problems`` with its file and line;
    the rest still load.
    """
    found: list[CaseComparison] = []
    problems: list[Problem] = []
    for path in comparison_files(paths):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            problems.append(Problem(str(path), f"cannot read: {exc}"))
            continue
        for n, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                found.append(CaseComparison.model_validate(json.loads(line)))
            except (ValueError, ValidationError) as exc:
                reason = str(exc).splitlines()[0]
                problems.append(Problem(str(path), f"line {n} is not a live comparison: {reason}"))
    return found, problems


def comparisons_frame(
    comparisons: Sequence[CaseComparison],
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
) -> pd.DataFrame:
    """One row per comparison: sides, JAX versions, pairs, rounds, and the estimate's figures.

    Columns: ``mode``, ``case``, ``baseline``, ``candidate``, ``baseline_jax``,
    ``candidate_jax``, ``device_kind``, ``pairs``, ``rounds`` (per pair), ``calls_per_block``,
    then :meth:`jaxbench.analysis.verdicts.Estimate.row` and ``basis``. Comparisons that did
    not finish (status not ``ok``) get their status as the verdict and their error as basis.
    """
    rows = []
    for c in comparisons:
        runs = c.pair_runs
        row: dict[str, Any] = {
            "mode": c.mode,
            "case": c.label,
            "baseline": c.baseline.label if c.baseline else None,
            "candidate": c.candidate.label if c.candidate else None,
            "baseline_jax": c.baseline.jax if c.baseline else None,
            "candidate_jax": c.candidate.jax if c.candidate else None,
            "device_kind": c.baseline.device_kind if c.baseline else None,
            "pairs": len(runs),
            "rounds": len(runs[0].rounds) if runs else 0,
            "calls_per_block": c.schedule.get("calls_per_block"),
        }
        if c.status == "ok" and runs:
            row |= c.estimate(threshold, alpha).row() | {"basis": BASIS[c.mode]}
        else:
            row |= {"verdict": c.status, "basis": c.error}
        rows.append(row)
    return pd.DataFrame(rows)
