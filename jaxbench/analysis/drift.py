"""Numerical drift per JAX version, as a report shows it beside the timings.

A drift frame is :func:`jaxbench.drift.load_drift`'s: one row per checked output of a workload
under one JAX version, with at least the columns :data:`DRIFT_COLUMNS` (``version``,
``workload``, ``dtype``, ``set``, ``output``, ``max_abs_err``, ``max_rel_err``, ``rtol``,
``atol``, ``within_tolerance``) and, where present, ``finding`` (why a row is one). A *finding*
is a row whose ``within_tolerance`` is false (:func:`jaxbench.drift.drift_findings`): an output
past its tolerance, or an invalid input that did not raise. This module only reads such a frame.
"""

from __future__ import annotations

import pandas as pd

from jaxbench.analysis.versions import version_key

DRIFT_COLUMNS = (
    "version",
    "workload",
    "dtype",
    "set",
    "output",
    "max_abs_err",
    "max_rel_err",
    "rtol",
    "atol",
    "within_tolerance",
)
NOT_CHECKED = "not checked"


def check_drift(drift: pd.DataFrame) -> pd.DataFrame:
    """Validate a drift frame.

    Args:
        drift: One row per checked output, columns :data:`DRIFT_COLUMNS` (more are kept).

    Returns:
        ``drift`` with ``version`` as text and ``within_tolerance`` as bool.

    Raises:
        ValueError: A column of :data:`DRIFT_COLUMNS` is missing (the message names it), or
            ``within_tolerance`` holds a missing value.
    """
    missing = [c for c in DRIFT_COLUMNS if c not in drift.columns]
    if missing:
        raise ValueError(
            f"drift frame lacks column(s) {', '.join(missing)}; needs {', '.join(DRIFT_COLUMNS)}"
        )
    if drift["within_tolerance"].isna().any():
        raise ValueError("drift frame has rows without a 'within_tolerance' value")
    return drift.assign(
        version=drift["version"].astype(str),
        within_tolerance=drift["within_tolerance"].astype(bool),
    )


def sorted_findings(drift: pd.DataFrame) -> pd.DataFrame:
    """The findings of ``drift`` (:func:`jaxbench.drift.drift_findings`), oldest version first.

    Args:
        drift: As :func:`check_drift`.

    Returns:
        Columns :data:`DRIFT_COLUMNS` less ``within_tolerance``, plus ``finding`` where the
        frame has it; sorted by version (version order), workload, dtype, set and output.

    Raises:
        ValueError: As :func:`check_drift`.
    """
    from jaxbench.drift import drift_findings

    drift = check_drift(drift)
    columns = [c for c in (*DRIFT_COLUMNS, "finding") if c in drift and c != "within_tolerance"]
    return drift_findings(drift)[columns].sort_values(
        ["version", "workload", "dtype", "set", "output"],
        key=lambda col: col.map(version_key) if col.name == "version" else col.astype(str),
        ignore_index=True,
    )


def drift_by_version(drift: pd.DataFrame | None, versions: list[str]) -> dict[str, str]:
    """One word per version for a summary table: ``none``, ``N finding(s)`` or ``not checked``.

    Args:
        drift: As :func:`check_drift`, or ``None`` when drift was not checked at all.
        versions: Versions to describe.

    Returns:
        ``{version: text}``; ``not checked`` for a version without rows in ``drift``.

    Raises:
        ValueError: As :func:`check_drift`.
    """
    if drift is None:
        return dict.fromkeys(versions, NOT_CHECKED)
    drift = check_drift(drift)
    out = {}
    for version in versions:
        rows = drift[drift["version"] == str(version)]
        bad = int((~rows["within_tolerance"]).sum())
        if rows.empty:
            out[version] = NOT_CHECKED
        elif bad == 0:
            out[version] = "none"
        else:
            out[version] = f"{bad} finding" + ("s" if bad > 1 else "")
    return out
