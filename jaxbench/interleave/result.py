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

from jaxbench.analysis import stats
from jaxbench.analysis.frames import Problem, case_label
from jaxbench.analysis.paired import paired_comparison, round_ratios

FILE_PREFIX = "interleave-"
Mode = Literal["interleaved", "back_to_back"]
BASIS = {
    "interleaved": "paired over rounds: median per-round ratio, bootstrap CI, Wilcoxon signed-rank",
    "back_to_back": "independent samples: ratio of medians, bootstrap CI, Mann-Whitney U",
}


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
    """One round: which side went first (``AB`` or ``BA``) and each side's block, seconds."""

    model_config = ConfigDict(extra="forbid")

    order: Literal["AB", "BA"]
    baseline_s: list[float]
    candidate_s: list[float]


class CaseComparison(BaseModel):
    """One case compared live between a baseline (A) and a candidate (B).

    Attributes:
        mode: ``interleaved`` (blocks alternate between two live processes) or ``back_to_back``
            (all of A in one process, then all of B in another).
        workload: Workload name.
        params: The case's parameters before each side's overrides (``SideInfo.params`` has
            what each side actually ran).
        schedule: Rounds, calls per block, warm-up rounds and calls, seed.
        status: ``ok``; ``failed`` (a side did not prepare; see ``error``); ``recompiled``
            (a compile inside a timed block: not steady state, not compared).
        error: Reason for a status other than ``ok``.
        baseline: Side A, once prepared.
        candidate: Side B, once prepared.
        rounds: Timed rounds in order (warm-up rounds are not kept).
        started_at: ISO-8601 UTC time the case started.
    """

    model_config = ConfigDict(extra="forbid")

    mode: Mode
    workload: str
    params: dict[str, Any]
    schedule: dict[str, int]
    status: Literal["ok", "failed", "recompiled"] = "ok"
    error: str | None = None
    baseline: SideInfo | None = None
    candidate: SideInfo | None = None
    rounds: list[Round] = Field(default_factory=list)
    started_at: str

    @classmethod
    def start(
        cls, mode: Mode, workload: str, params: dict[str, Any], schedule: Any
    ) -> CaseComparison:
        """A comparison that has just started (no sides, no rounds)."""
        return cls(
            mode=mode,
            workload=workload,
            params=dict(params),
            schedule=asdict(schedule),
            started_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )

    def with_sides(self, baseline: SideInfo, candidate: SideInfo) -> CaseComparison:
        """A copy with both sides set."""
        return self.model_copy(update={"baseline": baseline, "candidate": candidate})

    def failed(
        self, error: str, status: Literal["failed", "recompiled"] = "failed"
    ) -> CaseComparison:
        """A copy marked ``status`` with ``error``."""
        return self.model_copy(update={"status": status, "error": error})

    def finished(self, rounds: list[Round]) -> CaseComparison:
        """A copy with its timed rounds."""
        return self.model_copy(update={"rounds": rounds})

    @property
    def label(self) -> str:
        """The case as ``<benchmark> name=value ...`` (the baseline's benchmark name)."""
        benchmark = self.baseline.benchmark if self.baseline else self.workload
        return case_label(benchmark, self.params)

    def figures(
        self,
        threshold: float = stats.DEFAULT_THRESHOLD,
        alpha: float = stats.DEFAULT_ALPHA,
        mode: Mode | None = None,
    ) -> dict[str, Any]:
        """Ratio (candidate / baseline), CI, p-value and verdict, by ``mode`` (default own).

        ``interleaved``: :func:`jaxbench.analysis.paired.paired_comparison` of the per-round
        ratios. ``back_to_back``: all calls of each side pooled,
        :func:`jaxbench.analysis.stats.median_ratio_ci` and the Mann-Whitney U test, as for
        records of separate runs. Pass ``mode="back_to_back"`` to read interleaved data the
        sequential way.

        Raises:
            ValueError: The comparison has no timed rounds (status not ``ok``), or the mode
                asks for pairing of back-to-back data.
        """
        mode = mode or self.mode
        if self.status != "ok" or not self.rounds:
            raise ValueError(f"{self.label}: no timed rounds ({self.status}: {self.error})")
        if mode == "interleaved":
            if self.mode != "interleaved":
                raise ValueError("back-to-back rounds are not paired: use mode='back_to_back'")
            ratios = round_ratios(
                [r.baseline_s for r in self.rounds], [r.candidate_s for r in self.rounds]
            )
            p = paired_comparison(ratios, threshold, alpha)
            ratio, low, high, pval, verdict = p.ratio, p.ci_low, p.ci_high, p.p_value, p.verdict
        else:
            a = np.concatenate([r.baseline_s for r in self.rounds])
            b = np.concatenate([r.candidate_s for r in self.rounds])
            ratio, low, high = stats.median_ratio_ci(a, b)
            pval = stats.mann_whitney_p(a, b)
            verdict = stats.verdict(ratio, low, high, pval, threshold, alpha)
        return {
            "ratio": ratio,
            "ci_low": low,
            "ci_high": high,
            "p_value": pval,
            "verdict": verdict,
            "basis": BASIS[mode],
        }

    def summary_line(self) -> str:
        """One line for a log: case, status or ratio with CI and verdict."""
        if self.status != "ok":
            return f"{self.label}: {self.status}: {self.error}"
        f = self.figures()
        return (
            f"{self.label}: {f['ratio']:.4f} [{f['ci_low']:.4f}, {f['ci_high']:.4f}] "
            f"{f['verdict']} ({self.mode}, {len(self.rounds)} rounds)"
        )


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
    threshold: float = stats.DEFAULT_THRESHOLD,
    alpha: float = stats.DEFAULT_ALPHA,
) -> pd.DataFrame:
    """One row per comparison: sides, JAX versions, rounds, ratio, CI, p, verdict and basis.

    Comparisons that did not finish (status not ``ok``) get their status as the verdict.
    """
    rows = []
    for c in comparisons:
        row: dict[str, Any] = {
            "mode": c.mode,
            "case": c.label,
            "baseline": c.baseline.label if c.baseline else None,
            "candidate": c.candidate.label if c.candidate else None,
            "baseline_jax": c.baseline.jax if c.baseline else None,
            "candidate_jax": c.candidate.jax if c.candidate else None,
            "device_kind": c.baseline.device_kind if c.baseline else None,
            "rounds": len(c.rounds),
            "calls_per_block": c.schedule.get("calls_per_block"),
        }
        if c.status == "ok" and c.rounds:
            row |= c.figures(threshold, alpha)
        else:
            row |= {"verdict": c.status, "basis": c.error}
        rows.append(row)
    return pd.DataFrame(rows)
