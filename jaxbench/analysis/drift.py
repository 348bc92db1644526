"""Numerical drift per JAX version, as a report shows it beside the timings.

A drift frame has one row per checked output of a workload under one JAX version: columns
:data:`DRIFT_COLUMNS` (``version``, ``workload``, ``dtype``, ``set``, ``output``,
``max_abs_err``, ``max_rel_err``, ``rtol``, ``atol``, ``within``). A *finding* is a row whose
``within`` is false: that output moved past its tolerance. This module only reads such a frame;
whatever computes it is elsewhere.
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
    "within",
)
NOT_CHECKED = "not checked"


def check_drift(drift: pd.DataFrame) -> pd.DataFrame:
    """Validate a drift frame.

    Args:
        drift: One row per checked output, columns :data:`DRIFT_COLUMNS` (more are kept).

    Returns:
        ``drift`` with ``version`` as text and ``within`` as bool.

    Raises:
        ValueError: A column of :data:`DRIFT_COLUMNS` is missing (the message names it), or
            ``within`` holds a missing value.
    """
    missing = [c for c in DRIFT_COLUMNS if c not in drift.columns]
    if missing:
        raise ValueError(
            f"drift frame lacks column(s) {', '.join(missing)}; needs {', '.join(DRIFT_COLUMNS)}"
        )
    if drift["within"].isna().any():
        raise ValueError("drift frame has rows without a 'within' value")
    return drift.assign(version=drift["version"].astype(str), within=drift["within"].astype(bool))


def drift_findings(drift: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``drift`` past tolerance (``within`` false), oldest version first.

    Args:
        drift: As :func:`check_drift`.

    Returns:
        Columns :data:`DRIFT_COLUMNS` less ``within``, sorted by version (version order),
        workload, dtype, set and output.

    Raises:
        ValueError: As :func:`check_drift`.
    """
    drift = check_drift(drift)
    found = drift.loc[~drift["within"], [c for c in DRIFT_COLUMNS if c != "within"]]
    return found.sort_values(
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
        bad = int((~rows["within"]).sum())
        if rows.empty:
            out[version] = NOT_CHECKED
        elif bad == 0:
            out[version] = "none"
        else:
            out[version] = f"{bad} finding" + ("s" if bad > 1 else "")
    return out
