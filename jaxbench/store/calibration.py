"""The calibration record (kind ``calibration``): A/A comparisons run on one machine.

``jaxbench calibrate`` (:mod:`jaxbench.calibrate`) writes one JSON file,
``calibration-<run id>.json``, rewritten atomically after every finished comparison
(``complete`` false until the last). Schema version 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FILE_PREFIX = "calibration-"
SCHEMA_VERSION = 1


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
        verdicts: Count per verdict (:data:`jaxbench.inference.verdicts.VERDICTS`).
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
        run_id: :func:`jaxbench.store.new_run_id`; the file is ``calibration-<run_id>.json``.
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
        schedule: The comparisons' :class:`~jaxbench.interleave.Schedule` fields (one look).
        threshold: Threshold of the verdicts.
        alpha: Level of the verdicts (one look).
        comparisons: One entry per finished comparison.
        summary: :func:`jaxbench.calibrate.summarize_calibration` of them.
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


def newest_calibration(
    calibrations: Iterable[Calibration], host: str | None = None, case: str | None = None
) -> Calibration | None:
    """The complete calibration that started last (ties: by run id), or ``None``.

    An interrupted one (``complete`` false) is chosen only where no complete one is: its
    figures rest on fewer comparisons than were asked for (:func:`partial_note` says so).

    Args:
        calibrations: Records to choose from.
        host: Only calibrations of this host name (``host["hostname"]``).
        case: Only this case label (:attr:`CalibrationCase.label`).
    """
    keep = [c for c in calibrations
            if (host is None or c.host.get("hostname") == host)
            and (case is None or c.case.label == case)]  # fmt: skip
    return max(keep, key=lambda c: (c.complete, c.started_at, c.run_id), default=None)


def partial_note(calibration: Calibration) -> str:
    """``""`` for a complete calibration, else ``" (interrupted: 1 of 3 comparisons)"``."""
    if calibration.complete:
        return ""
    return f" (interrupted: {len(calibration.comparisons)} of {calibration.requested} comparisons)"
