"""Numerical drift per JAX version: the drift checks loaded, and shown beside the timings.

:func:`load_drift` reads the drift rows of the store (written by :mod:`jaxbench.drift`)::

    from jaxbench.analysis.drift import drift_findings, load_drift

    frame, problems = load_drift(["results"])  # every drift check under results/
    drift_findings(frame)  # outputs beyond tolerance, invalid inputs that did not raise

A drift frame is :func:`load_drift`'s: one row per checked output of a workload
under one JAX version, with at least the columns :data:`DRIFT_COLUMNS` (``version``,
``workload``, ``dtype``, ``set``, ``output``, ``max_abs_err``, ``max_rel_err``, ``rtol``,
``atol``, ``within_tolerance``) and, where present, ``finding`` (why a row is one). A *finding*
is a row whose ``within_tolerance`` is false (:func:`drift_findings`): an output
past its tolerance, or an invalid input that did not raise. This module only reads such a frame.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

import pandas as pd

from jaxbench.analysis.versions import version_categorical, version_key
from jaxbench.store import DriftRow, Item, Problem, load

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
#: One row per key in :func:`load_drift` (the latest check wins).
KEY = ("jax", "backend", "device_kind", "workload", "dtype", "set", "output")
#: Environment columns spread from each row's ``env``.
ENV_COLUMNS = ("jax", "jaxlib", "backend", "device_kind", "platform_version", "hostname")
#: Reference columns spread from each row's ``reference``: ``reference_<name>``.
REFERENCE_COLUMNS = ("jax", "jaxlib", "backend", "device_kind", "created_at", "path")


def validate_drift_frame(drift: pd.DataFrame) -> pd.DataFrame:
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
    """The findings of ``drift`` (:func:`drift_findings`), oldest version first.

    Args:
        drift: As :func:`validate_drift_frame`.

    Returns:
        Columns :data:`DRIFT_COLUMNS` less ``within_tolerance``, plus ``finding`` where the
        frame has it; sorted by version (version order), workload, dtype, set and output.

    Raises:
        ValueError: As :func:`validate_drift_frame`.
    """
    drift = validate_drift_frame(drift)
    columns = [c for c in (*DRIFT_COLUMNS, "finding") if c in drift and c != "within_tolerance"]
    return drift_findings(drift)[columns].sort_values(
        ["version", "workload", "dtype", "set", "output"],
        key=lambda col: col.map(version_key) if col.name == "version" else col.astype(str),
        ignore_index=True,
    )


def new_findings(drift: pd.DataFrame | None, baseline: str, candidate: str) -> pd.DataFrame:
    """The candidate's findings that the baseline does not have: what the upgrade moved.

    A finding of both versions (against a reference saved under a third) was there before the
    upgrade; one of the candidate only is the upgrade's. Outputs are matched by workload,
    dtype, set and output.

    Args:
        drift: As :func:`validate_drift_frame`, or ``None`` (no drift checked).
        baseline: The baseline's version.
        candidate: The candidate's version.

    Returns:
        Those rows of :func:`sorted_findings` (empty where none, or no drift).
    """
    if drift is None or drift.empty:
        return pd.DataFrame(columns=[c for c in DRIFT_COLUMNS if c != "within_tolerance"])
    found = sorted_findings(drift)
    key = ["workload", "dtype", "set", "output"]
    before = set(map(tuple, found.loc[found["version"] == baseline, key].astype(str).to_numpy()))
    now = found[found["version"] == candidate]
    fresh = [tuple(row) not in before for row in now[key].astype(str).to_numpy()]
    return now[fresh].reset_index(drop=True)


def drift_by_version(drift: pd.DataFrame | None, versions: list[str]) -> dict[str, str]:
    """One word per version for a summary table: ``none``, ``N finding(s)`` or ``not checked``.

    Args:
        drift: As :func:`validate_drift_frame`, or ``None`` when drift was not checked at all.
        versions: Versions to describe.

    Returns:
        ``{version: text}``; ``not checked`` for a version without rows in ``drift``.

    Raises:
        ValueError: As :func:`validate_drift_frame`.
    """
    if drift is None:
        return dict.fromkeys(versions, NOT_CHECKED)
    drift = validate_drift_frame(drift)
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


def drift_row(row: DriftRow, file: str | os.PathLike[str]) -> dict[str, Any]:
    """One row of the :func:`load_drift` frame.

    The row's fields, with ``env`` and ``reference`` spread (:data:`ENV_COLUMNS`;
    ``reference_<name>`` for :data:`REFERENCE_COLUMNS`), ``shape`` as a tuple, ``env`` kept
    whole, and ``file``.
    """
    out = row.model_dump(exclude={"env", "reference"})
    out["shape"] = tuple(row.shape) if row.shape is not None else None
    for key in ENV_COLUMNS:
        out[key] = row.env.get(key)
    for key in REFERENCE_COLUMNS:
        out[f"reference_{key}"] = getattr(row.reference, key)
    out["env"] = row.env
    out["file"] = str(file)
    return out


def load_drift(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str], latest_only: bool = True
) -> tuple[pd.DataFrame, list[Problem]]:
    """Load drift files into one frame, reporting the files that do not load.

    Reads the drift rows of the store (:func:`jaxbench.store.load`, folders searched
    recursively). A file that cannot be read, holds no drift rows though named explicitly
    (e.g. a results file) or has bad lines is reported in ``problems`` with file and line;
    everything else still loads.

    Args:
        paths: Drift files or folders.
        latest_only: Keep one row per :data:`KEY` (JAX version, backend, device kind, workload,
            dtype, set, output): the one of the latest check (by ``checked_at``). ``False``
            keeps every check's rows.

    Returns:
        ``(frame, problems)``. ``frame`` has one row per output checked with the
        :class:`~jaxbench.store.drift.DriftRow` fields (errors in the output's units,
        ``rtol``, ``atol``, ``within_tolerance``, ...), ``jax``/``jaxlib``/``backend``/
        ``device_kind``/``platform_version``/``hostname`` from ``env``, ``reference_jax`` and
        the other ``reference_*`` columns, ``version`` (``jax`` as an ordered categorical in
        version order), ``file`` and ``env``; empty, without columns, when nothing loaded.
        ``problems`` is a list of :class:`~jaxbench.store.Problem`.

    Raises:
        FileNotFoundError: A named path does not exist.
    """
    loaded = load(paths, kinds={"jaxbench-drift"})
    return drift_frame(loaded.of("jaxbench-drift"), latest_only), list(loaded.problems)


def drift_frame(items: Iterable[Item], latest_only: bool = True) -> pd.DataFrame:
    """The frame of :func:`load_drift` from the store's drift items (``Item``)."""
    frame = pd.DataFrame([drift_row(i.model, i.path) for i in items])
    if frame.empty:
        return frame
    if latest_only:
        frame = frame.sort_values("checked_at", kind="stable")
        frame = frame.drop_duplicates(list(KEY), keep="last").sort_index()
    frame = frame.reset_index(drop=True)
    frame["version"] = version_categorical(frame["jax"])
    return frame


def drift_findings(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a :func:`load_drift` frame that are findings.

    A finding is an output beyond tolerance, of another dtype than the reference's, or not
    computed, or an ``invalid_shape`` set whose wrong-shape input did not raise the workload's
    own error (``within_tolerance`` false; the ``finding`` column says why).

    Returns:
        Those rows (all columns), in frame order; empty if none or if ``frame`` is empty.
    """
    if frame.empty:
        return frame
    return frame[~frame["within_tolerance"].astype(bool)]
