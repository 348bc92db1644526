"""The live comparison (kind ``live-comparison``): two variants timed over process pairs.

A live comparison file is JSON Lines, ``interleave-<id>.jsonl``, one :class:`CaseComparison` per
line, every timed call kept (seconds); :mod:`jaxbench.interleave` writes it (rewritten whole after
every pair) and :func:`jaxbench.interleave.estimate` computes its verdict.

Schema versions: 1 (no ``kind`` field; still read) and 2 (``kind: "live-comparison"``).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from jaxbench.store.record import Trace, case_label

SCHEMA_VERSION = 2
#: A live comparison's design, stored as its ``mode``: both sides in each pair of processes at
#: once (``interleaved``), or one after the other (``back_to_back``: the ``sequential`` design
#: of :data:`jaxbench.analysis.review.SEQUENTIAL`, run live).
Mode = Literal["interleaved", "back_to_back"]
#: Schedule keys of files written before several pairs per comparison existed.
LEGACY_PAIRS = {"pairs": 1, "max_pairs": 1, "pairs_step": 1, "looks": 1}


class SideInfo(BaseModel):
    """What one side ran on: its label, interpreter, parameters and environment.

    ``compile_s`` is seconds of XLA compile in that worker, ``flops`` FLOP per timed call from
    XLA's cost analysis (``None`` where the backend has none); ``env`` is
    :func:`jaxbench.env.collect` in the worker. ``gate`` is ``run`` where the worker ran the
    case's full correctness gate, ``reused`` where ``programs_hash`` (the content hash of the
    compiled programs, the name of their artifact) had passed it in an earlier pair on this
    side, so only one call's output was checked to be finite; ``None`` in files written before
    either was recorded. ``compilation_cache_dir`` is the worker's persistent compilation
    cache folder, ``None`` when off. For a user workload ``env`` holds ``workload_source``
    (:class:`jaxbench.store.record.WorkloadSource`: the module file, distribution and version,
    git commit and dirty state each side's worker imported). ``trace`` is the profiler trace
    this pair's worker took of the case after its timed rounds (``compare --interleave
    --trace``; :class:`jaxbench.store.record.Trace`, its op table, not saved as a file).
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
    gate: Literal["run", "reused"] | None = None
    programs_hash: str | None = None
    compilation_cache_dir: str | None = None
    trace: Trace | None = None


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
        index: The pair's number within the comparison, from 0, in time order (texts for
            people, progress lines and reasons, name pairs from 1: index 0 is "pair 1").
        status: ``ok``; ``failed`` (a side did not prepare); ``recompiled``.
        error: Reason for a status other than ``ok``.
        baseline: Side A in this pair's baseline process.
        candidate: Side B in this pair's candidate process.
        rounds: Timed rounds in order (warm-up rounds are not kept).
        started_at: ISO-8601 UTC time the pair started the case.
        seconds: Wall seconds of the whole pair (worker starts and every case it ran);
            ``None`` in files written before it was kept.
    """

    model_config = ConfigDict(extra="forbid")

    index: int
    status: Literal["ok", "failed", "recompiled"] = "ok"
    error: str | None = None
    baseline: SideInfo | None = None
    candidate: SideInfo | None = None
    rounds: list[Round] = Field(default_factory=list)
    started_at: str
    seconds: float | None = None


def now() -> str:
    """The current UTC time, ISO-8601 to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


class CaseComparison(BaseModel):
    """One case compared live between a baseline (A) and a candidate (B) over process pairs.

    Attributes:
        kind: ``live-comparison``.
        schema_version: :data:`SCHEMA_VERSION` (1 in older files).
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

    kind: Literal["live-comparison"] = "live-comparison"
    schema_version: Literal[1, 2] = SCHEMA_VERSION
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
            update |= {"status": pair.status, "error": f"pair {pair.index + 1}: {pair.error}"}
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
