"""Live comparisons as a frame: one row per compared case with its estimate and verdict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from jaxbench.inference import verdicts
from jaxbench.interleave.verdict import BASIS, estimate
from jaxbench.store.live import CaseComparison


def comparisons_frame(
    comparisons: Sequence[CaseComparison],
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    strict: bool = False,
) -> pd.DataFrame:
    """One row per comparison: sides, JAX versions, pairs, rounds, and the estimate's figures.

    Columns: ``mode``, ``case``, ``baseline``, ``candidate``, ``baseline_jax``,
    ``candidate_jax``, ``device_kind``, ``pairs``, ``rounds`` (per pair), ``calls_per_block``,
    then :meth:`jaxbench.inference.verdicts.Estimate.row` and ``basis``. Comparisons that did
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
            row |= estimate(c, threshold, alpha, strict=strict).row() | {"basis": BASIS[c.mode]}
        else:
            row |= {"verdict": c.status, "basis": c.error}
        rows.append(row)
    return pd.DataFrame(rows)
