"""Load drift files for analysis, tolerantly, and pick out the findings (pandas, no JAX).

The review report shows drift beside timings, keyed by JAX version (``env.jax``)::

    from jaxbench.drift import drift_findings, load_drift

    frame, problems = load_drift(["results"])  # every drift-*.jsonl under results/
    drift_findings(frame)  # outputs beyond tolerance, invalid inputs that did not raise
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ValidationError

from jaxbench.analysis.frames import Problem
from jaxbench.analysis.versions import version_categorical
from jaxbench.drift.schema import DRIFT_FILE_PREFIX, DriftRow

#: One row per key in :func:`load_drift` (the latest check wins).
KEY = ("jax", "backend", "device_kind", "workload", "dtype", "set", "output")
#: Environment columns spread from each row's ``env``.
ENV_COLUMNS = ("jax", "jaxlib", "backend", "device_kind", "platform_version", "hostname")
#: Reference columns spread from each row's ``reference``: ``reference_<name>``.
REFERENCE_COLUMNS = ("jax", "jaxlib", "backend", "device_kind", "created_at", "path")


def drift_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and folders into drift files: a folder gives its ``drift-*.jsonl``, recursively.

    A file named explicitly is kept whatever its name (it may turn out not to be a drift file).

    Raises:
        FileNotFoundError: A named path does not exist.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if not p.exists():
            raise FileNotFoundError(f"no such drift file or folder: {p}")
        files.extend(sorted(p.rglob(f"{DRIFT_FILE_PREFIX}*.jsonl")) if p.is_dir() else [p])
    return files


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        err = exc.errors()[0]
        return f"{'.'.join(map(str, err['loc'])) or 'top level'}: {err['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def read_drift_file(path: Path) -> tuple[list[DriftRow], Problem | None]:
    """Read one drift file, keeping its valid lines.

    Returns:
        ``(rows, problem)``: the valid rows, and a :class:`~jaxbench.analysis.frames.Problem`
        naming the file when it cannot be read or has lines that are not drift rows (the first
        bad line and how many were loaded), else ``None``.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        return [], Problem(str(path), f"cannot be read: {exc.strerror or exc}")
    rows: list[DriftRow] = []
    bad: list[str] = []
    for lineno, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(DriftRow.model_validate_json(line))
        except (ValueError, ValidationError) as exc:
            bad.append(f"line {lineno}: {_reason(exc)}")
    if not bad:
        return rows, None
    if not rows:
        return [], Problem(str(path), f"not a drift file (first: {bad[0]}); nothing loaded")
    what = "line is not a drift row" if len(bad) == 1 else "lines are not drift rows"
    return rows, Problem(str(path), f"{len(bad)} {what} (first: {bad[0]}); {len(rows)} loaded")


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

    Folders are searched recursively for ``drift-*.jsonl``. A file that cannot be read, is not a
    drift file (e.g. a results file named explicitly) or has bad lines is reported in
    ``problems`` by name; everything else still loads, bad lines skipped.

    Args:
        paths: Drift files or folders.
        latest_only: Keep one row per :data:`KEY` (JAX version, backend, device kind, workload,
            dtype, set, output): the one of the latest check (by ``checked_at``). ``False``
            keeps every check's rows.

    Returns:
        ``(frame, problems)``. ``frame`` has one row per output checked with the
        :class:`~jaxbench.drift.schema.DriftRow` fields (errors in the output's units,
        ``rtol``, ``atol``, ``within_tolerance``, ...), ``jax``/``jaxlib``/``backend``/
        ``device_kind``/``platform_version``/``hostname`` from ``env``, ``reference_jax`` and
        the other ``reference_*`` columns, ``version`` (``jax`` as an ordered categorical in
        version order), ``file`` and ``env``; empty, without columns, when nothing loaded.
        ``problems`` is a list of :class:`~jaxbench.analysis.frames.Problem`.

    Raises:
        FileNotFoundError: A named path does not exist.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    records: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in drift_files(paths):
        rows, problem = read_drift_file(path)
        if problem is not None:
            problems.append(problem)
        records.extend(drift_row(r, path) for r in rows)
    frame = pd.DataFrame(records)
    if frame.empty:
        return frame, problems
    if latest_only:
        frame = frame.sort_values("checked_at", kind="stable")
        frame = frame.drop_duplicates(list(KEY), keep="last").sort_index()
    frame = frame.reset_index(drop=True)
    frame["version"] = version_categorical(frame["jax"])
    return frame, problems


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
