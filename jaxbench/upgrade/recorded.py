"""Bisect on a cluster: one task per release, several processes each, judged over processes.

:func:`sweep_releases` submits ``processes`` sweeps through the existing runner
(:mod:`jaxbench.cluster.dispatch`), each with one task per release (and shard), and waits for
them: on Slurm they run at once on the partition's nodes; the local executor runs them one
after another. :class:`RecordedJudge` then judges any two releases from those records with the
recorded verdicts of ``jaxbench compare`` (per-process medians, Welch's t interval over
processes: :func:`jaxbench.analysis.compare.compare_versions`), so every search strategy runs
on the same data without measuring again. Each step is explained from the programs the records
saved.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from jaxbench.analysis.compare import STEADY_STATE, compare_versions
from jaxbench.analysis.report_explain import side_artifact
from jaxbench.bisect.search import Judgement
from jaxbench.cluster import dispatch
from jaxbench.explain.saved import explain_saved
from jaxbench.store import ArtifactError
from jaxbench.store.sweep import CaseSpec


def sweep_releases(
    profile: Any,
    releases: Sequence[str],
    cases: Sequence[Any],
    timing: dict[str, Any],
    processes: int,
    on_progress: Callable[[str], None] = lambda _: None,
    requirements: tuple[str, ...] = (),
    user_workloads: tuple[str, ...] = (),
) -> list[Path]:
    """Submit ``processes`` sweeps of ``cases`` under every release, and wait for them all.

    Args:
        profile: The cluster profile (:class:`jaxbench.cluster.profile.Profile`).
        releases: JAX versions, one task each (per shard) in every sweep.
        cases: :class:`jaxbench.cases.Case` objects.
        timing: :class:`jaxbench.measure.TimingConfig` fields.
        processes: Sweeps, so processes per release and case.
        on_progress: Called with one line per step.
        requirements: More ``pip install`` arguments of the release environments.
        user_workloads: User workloads those environments must find.

    Returns:
        The sweep folders.

    Raises:
        jaxbench.cluster.preflight.PreflightError: A check of the profile failed.
        jaxbench.cluster.pyenvs.PyEnvError: An environment could not be built.
    """
    specs = [CaseSpec(workload=c.workload, params=dict(c.params)) for c in cases]
    sweeps = []
    for number in range(1, processes + 1):
        request = dispatch.SweepRequest(profile=profile, cases=specs, timing=dict(timing),
                                        jax_versions=list(releases), requirements=requirements,
                                        user_workloads=user_workloads)  # fmt: skip
        sweep, manifest = dispatch.plan(request)
        dispatch.submit(sweep, manifest, on_progress=on_progress)
        on_progress(f"sweep {number} of {processes} submitted: {sweep.root}")
        sweeps.append(sweep)
    for sweep in sweeps:
        dispatch.wait(sweep)
        on_progress(f"sweep {sweep.root.name} done")
    return [s.root for s in sweeps]


class RecordedJudge:
    """Judges ``after`` against ``before`` from recorded runs (the process is the unit).

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` holding every release.
        threshold: The verdicts' threshold.
        alpha: Their level.
    """

    def __init__(self, frame: pd.DataFrame, threshold: float, alpha: float) -> None:
        self.frame = frame
        self.threshold = threshold
        self.alpha = alpha

    def __call__(self, before: str, after: str, labels: Sequence[str]) -> dict[str, Judgement]:
        """``{label: Judgement}``: each case's steady-state verdict (``failed``: no records).

        ``labels`` are the cases' labels (:attr:`jaxbench.cases.Case.label`), as the records
        carry them.
        """
        try:
            table = compare_versions(self.frame, before, after, threshold=self.threshold,
                                     alpha=self.alpha).table  # fmt: skip
        except ValueError as exc:
            return {label: Judgement("failed", note=str(exc)) for label in labels}
        steady = table[table["metric"] == STEADY_STATE]
        out = {}
        for label in labels:
            rows = steady[steady["case"] == label]
            if rows.empty:
                out[label] = Judgement("failed", note=f"no records of both {before} and {after}")
                continue
            row = rows.iloc[0]
            out[label] = Judgement(str(row["verdict"]), float(row["ratio"]), float(row["ci_low"]),
                                   float(row["ci_high"]), str(row["advice"] or ""))  # fmt: skip
        return out

    def explain(self, label: str, before: str, after: str, verdict: str) -> list[str]:
        """The program change of a step, from the artifacts the two releases' records saved."""
        sides = [side_artifact(self.frame, label, v) for v in (before, after)]
        if sides[0] is None or sides[1] is None:
            return ["no saved programs for one of the releases"]
        try:
            return explain_saved(sides[0], sides[1], verdict)
        except (ArtifactError, ValueError) as exc:
            return [f"not explained: {exc}"]
