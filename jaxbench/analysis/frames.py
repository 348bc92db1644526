"""Load jaxbench records and asv results into one tidy frame, reporting files that do not load.

One row per record (the columns of :func:`jaxbench.results.load_records`), plus:

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

:func:`steady_state_samples` gives one row per timed call (``latency_s``, seconds) and
:func:`compile_times` one row per record with a compile time (``compile_s``, seconds).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from jaxbench.analysis.conditions import DEFAULT_FIELDS, add_conditions
from jaxbench.analysis.versions import version_categorical
from jaxbench.asv_results import read_asv_file
from jaxbench.results import (
    OTHER_KINDS,
    ResultsFormatError,
    SkippedLineWarning,
    read_record_file,
    read_records,
    record_row,
    samples_frame,
)

#: JSON files found in results folders that are neither records nor asv results: not reported.
#: ``reference.json`` is a drift reference's manifest (:mod:`jaxbench.drift`).
NOT_RESULT_FILES = frozenset(
    {"benchmarks.json", "machine.json", "sweep.json", "jaxbench-env.json", "reference.json"}
)
#: A sweep folder's manifest, records folder and gathered records (:mod:`jaxbench.cluster.sweep`).
SWEEP_MANIFEST, SWEEP_RECORDS, SWEEP_RESULTS = "sweep.json", "records", "results.jsonl"


def _is_record_file(path: Path) -> bool:
    name = path.name
    return name not in NOT_RESULT_FILES and name[0] != "." and not name.startswith(OTHER_KINDS)


@dataclass(frozen=True)
class Problem:
    """A results file (or part of one) that could not be loaded.

    Attributes:
        path: The file.
        reason: What is wrong, e.g. ``"line 3: expected a JSON object"``.
    """

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


def _is_gathered(path: Path, folders: set[Path]) -> bool:
    """Whether ``path`` is a sweep's ``results.jsonl`` while files of its ``records/`` load.

    ``folders`` are the (resolved) folders of every file being loaded.
    """
    sweep = path.parent
    return (
        path.name == SWEEP_RESULTS
        and sweep / SWEEP_RECORDS in folders
        and (sweep / SWEEP_MANIFEST).is_file()
    )


def _files(paths: Iterable[Path]) -> list[Path]:
    """The files to read, each once; a sweep's ``results.jsonl`` is left out (module docstring)."""
    files: list[Path] = []
    for p in paths:
        if not p.exists():
            raise FileNotFoundError(f"no such results file or folder: {p}")
        if p.is_dir():
            found = [*p.rglob("*.jsonl"), *p.rglob("*.json")]
            files.extend(sorted(f for f in found if _is_record_file(f)))
        else:
            files.append(p)
    unique: dict[Path, Path] = {}  # resolved -> as named; a file named twice is read once
    for f in files:
        unique.setdefault(f.resolve(), f)
    folders = {r.parent for r in unique}
    return [f for r, f in unique.items() if not _is_gathered(r, folders)]


def _strip(message: str, path: Path) -> str:
    prefix = f"{path}:"
    return message[len(prefix) :].strip() if message.startswith(prefix) else message


def _jsonl_rows(path: Path) -> tuple[list[dict[str, Any]], list[Problem]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SkippedLineWarning)
        records = read_records(path, errors="warn")
    # Only our own warnings: others (e.g. a ResourceWarning from garbage collection meanwhile)
    # are not bad lines of this file.
    bad = [_strip(str(w.message), path) for w in caught if w.category is SkippedLineWarning]
    for w in caught:
        if w.category is not SkippedLineWarning:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    problems = []
    if bad:
        what = (
            "line is not a jaxbench record" if len(bad) == 1 else "lines are not jaxbench records"
        )
        kept = f"{len(records)} records loaded" if records else "nothing loaded"
        problems.append(Problem(str(path), f"{len(bad)} {what} (first: line {bad[0]}); {kept}"))
    return [record_row(r, path) | {"source": "jaxbench"} for r in records], problems


def _json_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of one ``.json`` file: a sweep record or an asv result file.

    Raises:
        ResultsFormatError: Neither, or a corrupt one of them.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ResultsFormatError(f"{path}: not JSON: {exc}") from exc
    if isinstance(data, dict) and "schema_version" in data:
        return [record_row(read_record_file(path), path) | {"source": "jaxbench"}]
    if isinstance(data, dict) and "result_columns" in data:
        return [record_row(r, path) | {"source": "asv"} for r in read_asv_file(path)]
    raise ResultsFormatError(f"{path}: neither a jaxbench record nor an asv result file")


def load_results(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    condition_fields: tuple[str, ...] = DEFAULT_FIELDS,
) -> tuple[pd.DataFrame, list[Problem]]:
    """Load jaxbench JSON Lines runs, sweep record files and asv results into one frame.

    Folders are searched recursively for ``*.jsonl`` (runs) and ``*.json`` (one sweep record, or
    one asv result file); asv's ``benchmarks.json`` and ``machine.json``, a sweep's ``sweep.json``,
    hidden files and the files of :data:`OTHER_KINDS` are skipped. A file that cannot be read, is
    not JSON, is some other JSON, or holds bad lines is reported in ``problems`` by name;
    everything else still loads. Bad lines of a JSON Lines file are skipped and the good ones
    kept. A sweep's gathered ``results.jsonl`` is skipped where its ``records/`` is read, and a
    file named twice (or inside two named folders) is read once.

    Records without a JAX version (e.g. asv's ``existing`` environments, which do not record
    it) are kept, with ``version`` missing, and reported in ``problems`` once per file: a
    comparison by version leaves them out, so compare such files by path.

    Args:
        paths: Files or folders.
        condition_fields: Fixed fields of the ``condition`` column
            (:func:`jaxbench.analysis.conditions.condition_fields`).

    Returns:
        ``(frame, problems)``: one row per record (columns as the module docstring says; empty,
        without columns, when nothing loaded) and a list of :class:`Problem`.

    Raises:
        FileNotFoundError: A named path does not exist (a typo should not pass as "no results").
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    rows: list[dict[str, Any]] = []
    problems: list[Problem] = []
    for path in _files(map(Path, paths)):
        try:
            if path.suffix == ".jsonl":
                more, bad = _jsonl_rows(path)
                problems.extend(bad)
            else:
                more = _json_rows(path)
        except (ResultsFormatError, OSError) as exc:
            problems.append(Problem(str(path), _strip(str(exc), path)))
            continue
        rows.extend(more)
    for row in rows:
        row["process"] = process_unit(row)
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame, problems
    problems.extend(_unversioned(frame))
    frame["version"] = version_categorical(frame["jax"])
    frame["case"] = [
        case_label(b, p) for b, p in zip(frame["benchmark"], frame["params"], strict=True)
    ]
    return add_conditions(frame, condition_fields), problems


def _unversioned(frame: pd.DataFrame) -> list[Problem]:
    """One :class:`Problem` per file whose records have no JAX version."""
    missing = frame.loc[frame["jax"].isna(), "file"]
    return [
        Problem(
            file,
            f"{n} record{'s' if n > 1 else ''} without a JAX version: kept, but comparisons by "
            "version leave them out (compare this file by path)",
        )
        for file, n in missing.value_counts(sort=False).items()
    ]


def process_unit(row: Mapping[str, Any]) -> str:
    """The process that took a record: the unit that the statistics treat as independent.

    Args:
        row: A row of the frame, as a mapping: ``env``, ``source``, ``run_id`` and ``file``.

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
    env = env if isinstance(env, dict) else {}
    if row.get("source") == "asv":
        return f"asv:{row.get('file')}"
    if env.get("process_id"):
        return str(env["process_id"])
    sweep = env.get("sweep")
    if isinstance(sweep, dict):
        slurm = env.get("slurm") if isinstance(env.get("slurm"), dict) else {}
        array = (slurm.get("SLURM_ARRAY_JOB_ID"), slurm.get("SLURM_ARRAY_TASK_ID"))
        if all(array):
            task = f"{array[0]}_{array[1]}"
        elif slurm.get("SLURM_JOB_ID"):
            task = str(slurm["SLURM_JOB_ID"])
        elif sweep.get("task") is not None:
            task = f"index-{sweep['task']}"
        else:
            file = Path(str(row.get("file")))
            task = f"{file.parent.name}/{file.name}"
        return f"{row.get('run_id')}/task:{task}"
    return f"run:{row.get('run_id')}"


def case_label(benchmark: str, params: dict[str, Any]) -> str:
    """``"<benchmark> name=value ..."`` with parameters sorted by name."""
    return " ".join([benchmark, *(f"{k}={params[k]}" for k in sorted(params))])


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
