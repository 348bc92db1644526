"""Load jaxbench records and asv results into one tidy frame, reporting files that do not load.

One row per record (the columns of :func:`record_row`), plus:

- ``source``: ``"jaxbench"`` (JSON Lines runs, sweep record files) or ``"asv"``;
- ``version``: the JAX version as an ordered categorical in version order
  (:mod:`jaxbench.analysis.versions`);
- ``case``: benchmark and parameters, e.g. ``"forward/vmap_jvp dtype=float32 k=8 size=tiny"``;
- ``condition``: the measurement condition (:mod:`jaxbench.analysis.conditions`);
- ``process``: the process that took the record, the independent unit of the statistics
  (:func:`process_unit`).

Each record is counted once: a sweep folder (one with ``sweep.json``) holds every record twice,
in ``records/*.json`` (the source of truth) and in the ``results.jsonl`` that ``jaxbench
collect`` gathers from them, so that ``results.jsonl`` is not read where its ``records/`` is.

:func:`steady_state_samples` gives one row per timed call (``latency_s``, seconds),
:func:`drawn_samples` at most a given number of them per group, for figures, and
:func:`compile_times` one row per record with a compile time (``compile_s``, seconds).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.analysis.conditions import DEFAULT_FIELDS, add_conditions
from jaxbench.analysis.versions import version_categorical
from jaxbench.store import Env, Loaded, Problem, Record, case_label, load
from jaxbench.store.record import NEEDED, missing_needed, with_implied

__all__ = [
    "Problem",
    "case_label",
    "compile_times",
    "drawn_samples",
    "laid_out",
    "load_results",
    "needed_problems",
    "process_unit",
    "record_row",
    "records_frame",
    "results_of",
    "samples_frame",
    "steady_state_samples",
]


def case_sort_key(labels: pd.Series) -> pd.Series:
    """Keys that order case labels with their numbers as numbers (``k=2`` before ``k=16``).

    For ``DataFrame.sort_values(key=...)``: every run of digits is zero-padded to 20 places.
    """
    return labels.astype(str).str.replace(r"\d+", lambda m: m.group().zfill(20), regex=True)


def record_row(rec: Record, file: str | os.PathLike[str]) -> dict[str, Any]:
    """One row of the :func:`load_results` frame: the record's fields plus spread columns.

    The record's fields are taken as they are, not copied: ``env``, ``noise`` and ``metrics``
    stay the store's models (:class:`~jaxbench.store.Env`, :class:`~jaxbench.store.Noise`,
    :class:`~jaxbench.store.Metrics`), read by attribute. Spread columns: ``param.<name>`` per
    parameter (one the record predates at its implied value,
    :func:`jaxbench.store.record.with_implied`); ``jax``, ``jaxlib``, ``backend``,
    ``device_kind`` from ``env``; ``machine`` (``env.host.hostname``) and ``commit``
    (``env.git.commit``); ``file``; ``source`` (``asv``
    for records converted from asv's result files, which carry ``env.asv``; ``jaxbench``
    otherwise).
    """
    row = dict(rec.__dict__)  # the record's fields (a Record has no others)
    for key, value in with_implied(rec.benchmark, rec.params).items():
        row[f"param.{key}"] = value
    env = rec.env
    row |= {"jax": env.jax, "jaxlib": env.jaxlib, "backend": env.backend,
            "device_kind": env.device_kind, "machine": env.host.hostname,
            "commit": env.git.commit, "file": str(file),
            "source": "asv" if env.asv is not None else "jaxbench"}  # fmt: skip
    return row


def samples_frame(records: pd.DataFrame) -> pd.DataFrame:
    """One row per timed sample: the frame from :func:`load_results` exploded on ``samples_s``.

    The sample column is renamed ``latency_s`` (seconds) and ``sample`` numbers calls from 0.
    Records without samples (failed, skipped) are dropped.
    """
    latency, rows, sample = laid_out(records["samples_s"].tolist())
    out = records.drop(columns=["env", "samples_s"], errors="ignore").iloc[rows]
    return out.reset_index(drop=True).assign(latency_s=latency, sample=sample)


def laid_out(cells: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each record's values laid end to end, as one array: what :func:`samples_frame` rows hold.

    Args:
        cells: One sequence of values a record (its samples, seconds), or one value a record
            (e.g. its compile time).

    Returns:
        ``(values, record, call)``, each of shape ``(values,)``: the values as floats, the
        position in ``cells`` of the record each came from, and its place in that record's
        sequence (0 for a single value). A record without values has no entry.
    """
    if not cells or not isinstance(cells[0], list | tuple | np.ndarray):
        n = len(cells)
        return np.asarray(cells, dtype=float), np.arange(n), np.zeros(n, dtype=np.int64)
    counts = np.fromiter(map(len, cells), dtype=np.int64, count=len(cells))
    record = np.repeat(np.arange(len(cells)), counts)
    values = [np.asarray(c, dtype=float) for c in cells]
    first = np.repeat(np.cumsum(counts) - counts, counts)  # each value's record's first value
    return (
        np.concatenate(values) if record.size else np.empty(0),
        record,
        np.arange(record.size) - first,
    )


def load_results(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    condition_fields: tuple[str, ...] = DEFAULT_FIELDS,
) -> tuple[pd.DataFrame, list[Problem]]:
    """Load the records (jaxbench runs, sweep record files, asv results) under ``paths``.

    Reads through the store's one loader (:func:`jaxbench.store.load`): folders are searched
    recursively, each file once, a sweep's gathered ``results.jsonl`` skipped where its
    ``records/`` is read. Bad lines and files are reported in ``problems`` with file and line
    (a line cut short, a foreign JSON file, a newer schema version), and the rest still loads.
    Live comparisons, drift checks and calibrations in the same folders are passed over (see
    :func:`jaxbench.store.load` for them).

    Records without a nested field the analysis needs (:data:`jaxbench.store.record.NEEDED`),
    e.g. without a JAX version (asv's ``existing`` environments do not record it), are kept,
    with ``version`` missing, and named in ``problems``, once per file and field
    (:func:`needed_problems`): a comparison by version leaves them out, so compare such files by
    path.

    Args:
        paths: Files or folders.
        condition_fields: Fixed fields of the ``condition`` column
            (:func:`jaxbench.analysis.conditions.condition_fields`).

    Returns:
        ``(frame, problems)``: one row per record (columns as the module docstring says; empty,
        without columns, when nothing loaded) and a list of :class:`~jaxbench.store.Problem`.

    Raises:
        FileNotFoundError: A named path does not exist (a typo should not pass as "no results").
    """
    return results_of(load(paths, kinds={"record"}), condition_fields)


def results_of(
    loaded: Loaded, condition_fields: tuple[str, ...] = DEFAULT_FIELDS
) -> tuple[pd.DataFrame, list[Problem]]:
    """:func:`load_results` of what the store's loader read (its other kinds are left alone).

    For a command that reads records and other kinds in one pass (e.g. ``compare``: records
    and calibrations), so that no file is read twice.
    """
    items = loaded.of("record")
    return records_frame(items, condition_fields), [*loaded.problems, *needed_problems(items)]


def records_frame(
    items: Iterable[Any], condition_fields: tuple[str, ...] = DEFAULT_FIELDS
) -> pd.DataFrame:
    """The frame of :func:`load_results` from the store's record items (``Item``)."""
    rows = [record_row(i.model, i.path) for i in items]
    for row in rows:
        row["process"] = process_unit(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    _keep_int_params(frame, rows)
    frame["version"] = version_categorical(frame["jax"])
    labels: dict[tuple[Any, ...], str] = {}  # a history repeats a few hundred cases
    cases = []
    for benchmark, params in zip(frame["benchmark"], frame["params"], strict=True):
        key = (benchmark, *((k, type(v), v) for k, v in params.items()))  # 1, 1.0, True apart
        try:
            cases.append(labels[key])
        except KeyError:
            cases.append(labels.setdefault(key, case_label(benchmark, params)))
        except TypeError:  # a value that is not hashable: labelled on its own
            cases.append(case_label(benchmark, params))
    frame["case"] = cases
    return add_conditions(frame, condition_fields)


def needed_problems(items: Iterable[Any]) -> list[Problem]:
    """One :class:`Problem` per file and needed field its records lack.

    Args:
        items: The store's record items (``Item``: ``model``, ``path``, ``line``).

    Returns:
        Problems naming the file, the first record without the field (its line, where the file
        is JSON Lines, and its case), the field (:data:`jaxbench.store.record.NEEDED`) and how
        many records lack it, e.g. ``"1 record without a JAX version: ... (env.jax not
        recorded; first: line 2, train_step size=tiny)"``.
    """
    found: dict[tuple[str, str], list[Any]] = {}
    for item in items:
        for name in missing_needed(item.model):
            found.setdefault((str(item.path), name), []).append(item)
    problems = []
    for (file, name), lacking in found.items():
        first, n = lacking[0], len(lacking)
        where = f"line {first.line}, " if first.line is not None else ""
        case = case_label(first.model.benchmark, first.model.params)
        problems.append(Problem(file, f"{n} record{'s' if n > 1 else ''} {NEEDED[name]} "
                                      f"({name} not recorded; first: {where}{case})"))  # fmt: skip
    return problems


def _keep_int_params(frame: pd.DataFrame, rows: list[dict[str, Any]]) -> None:
    """Give ``param.*`` columns that pandas made float back their own values (in place).

    A parameter that some records lack (another family's, a user workload's) is missing in
    their rows, and pandas turns a column of ints with missing values into floats, so ``heads=4``
    would show as ``heads=4.0`` in every table and figure. Such a column holds the records' own
    values instead (``object`` dtype; ``None`` where missing).
    """
    for column in [c for c in frame.columns if c.startswith("param.")]:
        if frame[column].dtype.kind != "f":
            continue
        values = [row.get(column) for row in rows]
        if any(isinstance(v, int) and not isinstance(v, bool) for v in values):
            frame[column] = pd.Series(values, index=frame.index, dtype=object)


def process_unit(row: Mapping[str, Any]) -> str:
    """The process that took a record: the unit that the statistics treat as independent.

    Args:
        row: A row of the frame, as a mapping: ``env`` (:class:`~jaxbench.store.Env`),
            ``source``, ``run_id`` and ``file``.

    Returns:
        ``env.process_id`` where the record has it (:func:`jaxbench.env.process_id`). Older
        records get a fallback that is one unit per process, as far as the file tells:

        - asv rows: ``asv:<result file>``. asv times each benchmark in processes of its own but
          keeps no process boundary among its samples, so one result file is one unit;
        - sweep records (``env.sweep``): ``<run_id>/task:<id>``, with the Slurm array job and
          task ids (``<array job>_<task>``), else the Slurm job id, else the sweep's task
          index, else the record file's folder and name;
        - other jaxbench records: ``run:<run_id>`` (one ``jaxbench run`` is one process).
    """
    env = row.get("env")
    env = env if isinstance(env, Env) else Env()
    if row.get("source") == "asv":
        return f"asv:{row.get('file')}"
    if env.process_id:
        return env.process_id
    sweep = env.sweep
    if sweep is not None:
        slurm = env.slurm
        array = (slurm.get("SLURM_ARRAY_JOB_ID"), slurm.get("SLURM_ARRAY_TASK_ID"))
        if all(array):
            task = f"{array[0]}_{array[1]}"
        elif slurm.get("SLURM_JOB_ID"):
            task = str(slurm["SLURM_JOB_ID"])
        elif sweep.task is not None:
            task = f"index-{sweep.task}"
        else:
            file = Path(str(row.get("file")))
            task = f"{file.parent.name}/{file.name}"
        return f"{row.get('run_id')}/task:{task}"
    return f"run:{row.get('run_id')}"


def steady_state_samples(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per timed call of the ``ok`` records: ``latency_s`` (seconds) and ``sample``.

    Records with status ``recompiled`` are left out: their samples are not steady state.
    ``version`` stays an ordered categorical.
    """
    if frame.empty:
        return frame.assign(latency_s=pd.Series(dtype=float), sample=pd.Series(dtype=int))
    ok = frame[frame["status"] == "ok"]
    if ok.empty:
        return ok.assign(latency_s=pd.Series(dtype=float), sample=pd.Series(dtype=int))
    out = samples_frame(ok)
    if "version" in frame:
        out["version"] = out["version"].astype(frame["version"].dtype)
    return out


def drawn_samples(frame: pd.DataFrame, by: Sequence[str], most: int) -> pd.DataFrame:
    """The steady-state latencies of the ``ok`` records to draw: at most ``most`` per group.

    A figure of a distribution (a violin, an ECDF) needs its quantiles, not every call: a
    history of long records holds millions. Each group (the distinct values of ``by``, e.g.
    case, condition and version) of ``n`` calls keeps, of its values sorted, those at ranks
    ``round(j (n - 1) / (m - 1))`` for ``j = 0 .. m - 1``, ``m = min(n, most)``: its minimum,
    its maximum and evenly spaced order statistics between (all of them where ``n <= most``).
    Its ECDF then differs from the whole group's by at most ``1 / (m - 1)`` at any latency.

    Args:
        frame: Rows of :func:`load_results` with ``status``, ``samples_s`` and ``by``.
        by: Columns that make a group; they are the output's columns, with ``latency_s``.
        most: Values kept per group, at least 2.

    Returns:
        One row per kept value: ``by`` (categoricals stay so), then ``latency_s`` (seconds),
        groups in the order they first appear, values in ascending order. ``nan`` values are
        left out; records of status ``recompiled`` too, as in :func:`steady_state_samples`.

    Raises:
        ValueError: ``most`` below 2.
    """
    if most < 2:
        raise ValueError(f"most must be at least 2, got {most}")
    by = list(by)
    ok = frame[frame["status"] == "ok"] if not frame.empty else frame
    values, row, _ = laid_out(ok["samples_s"].tolist()) if not ok.empty else laid_out([])
    kept = ~np.isnan(values)
    values, row = values[kept], row[kept]
    if not values.size:
        return ok.iloc[:0][by].assign(latency_s=pd.Series(dtype=float))
    record_group = ok.groupby(by, sort=False, dropna=False, observed=True).ngroup().to_numpy()
    group = record_group[row]
    order = np.lexsort((values, group))  # by group, then value
    values = values[order]
    counts = np.bincount(group)
    present = np.flatnonzero(counts)
    n = counts[present]
    m = np.minimum(n, most)
    start = np.repeat(np.cumsum(n) - n, m)
    j = np.arange(m.sum()) - np.repeat(np.cumsum(m) - m, m)
    n_each, m_each = np.repeat(n, m), np.repeat(m, m)
    rank = np.rint(j * (n_each - 1) / np.maximum(m_each - 1, 1)).astype(np.int64)
    first = np.unique(record_group, return_index=True)[1]  # each group's first record
    keys = ok[by].iloc[np.repeat(first[present], m)].reset_index(drop=True)
    return keys.assign(latency_s=values[start + rank])


def compile_times(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per compile a process paid for (``compile_s``, seconds), ``samples_s`` dropped.

    Left out: records whose compile was a persistent compilation cache hit (their ``compile_s``
    is a cache load, not an XLA compile), and records whose compile figures were taken over
    from an earlier case of the same process (``compilation_cache.compile_reused_in_process``:
    one program shared by several K values counts once, for the case that compiled it).
    """
    if frame.empty:
        return frame
    cache = frame.get("compilation_cache", pd.Series(dtype=object)).reindex(frame.index)

    def flag(key: str) -> pd.Series:
        return cache.map(lambda c: isinstance(c, dict) and bool(c.get(key)))

    keep = frame["compile_s"].notna() & ~flag("cache_hits") & ~flag("compile_reused_in_process")
    return frame[keep].drop(columns=["samples_s"], errors="ignore")
