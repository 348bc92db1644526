"""Result records: the one schema that the CLI, asv, the Slurm runner and the analysis share.

A run writes one JSON Lines file; each line is one :class:`Record`, appended and flushed to disk as
soon as its case finishes, so a run killed part-way keeps every case it finished. Records are read
back with :func:`load_records` into a tidy :class:`pandas.DataFrame`. Results are JSON only: never
pickled.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import uuid
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError

SCHEMA_VERSION = 1

Status = Literal["ok", "failed", "skipped", "recompiled"]
#: Name prefix of the JSON Lines files of ``jaxbench drift`` (:mod:`jaxbench.drift`).
DRIFT_FILE_PREFIX = "drift-"
#: Prefixes of jaxbench files that are not timing records, each read by its own loader: numerical
#: drift checks (:func:`jaxbench.drift.load_drift`), live comparisons
#: (:func:`jaxbench.interleave.load_comparisons`) and sensitivity studies. Folder scans for
#: records skip them.
OTHER_KINDS = (DRIFT_FILE_PREFIX, "interleave-", "sensitivity-", "calibration-")


class Record(BaseModel):
    """One measured case.

    Times are in seconds, sizes in bytes, work in FLOP. ``None`` means "not available on this
    backend" (for example device memory on CPU), never zero.

    Attributes:
        schema_version: Version of this schema (:data:`SCHEMA_VERSION`).
        run_id: Identifier shared by every record of one run.
        benchmark: Workload and strategy name, e.g. ``"train_step"`` or ``"forward/vmap_jvp"``.
        params: Case parameters (size, dtype, K, ...), JSON scalars only.
        status: ``ok``; ``failed`` (gate or error, see ``error``); ``skipped`` (not applicable or
            backend absent, see ``error``); ``recompiled`` (a compile happened inside the timed
            region, so ``samples_s`` are not steady state).
        error: Reason for any status other than ``ok``.
        samples_s: Every timed per-call latency, in seconds, in call order.
        lower_s: Tracing plus lowering to StableHLO, seconds.
        compile_s: XLA compile of the lowered module, seconds.
        first_call_s: First call through the jitted callable, blocked, seconds.
        compiles_setup: XLA compiles seen from the start of the case to the end of warm-up.
        compiles_timed: XLA compiles seen inside the timed region (0 for a valid steady state).
        traces_timed: Jaxpr traces seen inside the timed region.
        flops: FLOP per timed call from XLA's cost analysis.
        bytes_accessed: Bytes accessed per timed call from XLA's cost analysis.
        device_peak_bytes: Device ``peak_bytes_in_use`` after the case, where the backend has it.
            It is the process's peak so far (JAX has no public reset), so a case's own peak is
            exact only for the largest case of a run, or with one case per process.
        host_peak_rss_bytes: Peak resident set size of this process after the case.
        memory: ``compiled.memory_analysis()`` fields, bytes.
        compilation_cache: Persistent cache settings and whether the compile was a cache hit.
        gate: Correctness gate facts: tolerances used and the largest errors seen.
        metrics: Workload-specific figures (e.g. ``linearization_held_bytes``).
        noise: Noise indicators of the timed region (:class:`jaxbench.measure.noise.NoiseProbe`):
            ``wall_s``, ``cpu_s`` (seconds), ``cpu_share`` (CPU over wall time; above 1 with
            several busy threads), ``ctx_involuntary``, ``ctx_voluntary``, ``gc_collections``,
            ``loadavg_start``, ``loadavg_end``, ``steal_share`` (fraction), ``usable_cpus``.
            Empty where nothing was timed, and in files written before it was recorded.
        env: Versions, backend, device kind and host facts (:func:`jaxbench.env.collect`); the
            process (``process_id``, ``pid``) and, for jaxbench runs, the timing settings
            (``timing``: :class:`jaxbench.measure.TimingConfig` fields).
        started_at: ISO-8601 UTC time at which the case started.
    """

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    run_id: str
    benchmark: str
    params: dict[str, Any]
    status: Status
    error: str | None = None
    samples_s: list[float] = Field(default_factory=list)
    lower_s: float | None = None
    compile_s: float | None = None
    first_call_s: float | None = None
    compiles_setup: int | None = None
    compiles_timed: int | None = None
    traces_timed: int | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    device_peak_bytes: int | None = None
    host_peak_rss_bytes: int | None = None
    memory: dict[str, int] = Field(default_factory=dict)
    compilation_cache: dict[str, Any] = Field(default_factory=dict)
    gate: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    noise: dict[str, Any] = Field(default_factory=dict)
    env: dict[str, Any]
    started_at: str | None = None


def new_run_id() -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex>``: sortable by time, unique across hosts."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


class SkippedLineWarning(UserWarning):
    """A bad line of a results file was skipped (``errors="warn"``); the message names it."""


class ResultsFormatError(ValueError):
    """A results file holds a line that is not a valid record; the message names file and line."""


class ResultsWriter:
    """Append records to one JSON Lines file, each durable on disk before the next case starts.

    Each record is written with a single ``write`` on a file opened with ``O_APPEND`` and then
    ``fsync``-ed, so a crash never leaves half of an earlier record behind.

    Raises:
        OSError: The folder cannot be created or the file cannot be opened for appending.
    """

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, record: Record) -> None:
        """Append ``record`` as one line and flush it to disk."""
        line = (record.model_dump_json() + "\n").encode()
        os.write(self._fd, line)
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the file; further writes raise ``OSError``."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_record_file(path: str | os.PathLike[str], record: Record) -> Path:
    """Write one record as its own JSON file, atomically: readers see all of it or nothing.

    See :func:`write_bytes_atomic`. Many processes may write different files of one folder at
    once.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: The folder cannot be created or written.
    """
    return write_bytes_atomic(path, record.model_dump_json().encode())


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically: readers see the old file, or all of the new one.

    The bytes go to a temporary file in the same folder, are ``fsync``-ed, then renamed over
    ``path`` (``os.replace``, atomic on POSIX and on NFS for a rename within one folder); the
    folder is ``fsync``-ed too.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OSError: The folder cannot be created or written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def read_record_file(path: str | os.PathLike[str]) -> Record:
    """Read a file written by :func:`write_record_file`.

    Raises:
        ResultsFormatError: The file is not one valid record of this schema (names the file).
        OSError: The file cannot be read.
    """
    try:
        return _parse_record(Path(path).read_bytes())
    except (ValueError, ValidationError) as exc:
        raise ResultsFormatError(f"{path}: {str(exc).splitlines()[0]}") from exc


def _parse_record(data: bytes) -> Record:
    raw = json.loads(data.decode("utf-8"))
    if not isinstance(raw, dict):
        raise ValueError("expected a JSON object")
    version = raw.get("schema_version")
    if version != SCHEMA_VERSION:
        raise ValueError(f"schema_version {version!r} is not supported (expected {SCHEMA_VERSION})")
    return Record.model_validate(raw)


def read_records(
    path: str | os.PathLike[str], errors: Literal["raise", "warn"] = "raise"
) -> list[Record]:
    """Read every record of one JSON Lines file.

    Args:
        path: A file written by :class:`ResultsWriter`.
        errors: ``"raise"`` stops at the first bad line; ``"warn"`` skips it with a warning.

    Returns:
        The records in file order.

    Raises:
        ResultsFormatError: A line is not JSON or not a valid record (``errors="raise"``); the
            message is ``"<file>:<line>: <reason>"``.
    """
    out: list[Record] = []
    with open(path, "rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                out.append(_parse_record(line))
            except (ValueError, ValidationError) as exc:  # UnicodeDecodeError is a ValueError
                reason = str(exc).splitlines()[0]
                err = ResultsFormatError(f"{path}:{lineno}: {reason}")
                if errors == "raise":
                    raise err from exc
                warnings.warn(str(err), SkippedLineWarning, stacklevel=2)
    return out


def result_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Expand files and folders (searched recursively for ``*.jsonl``) into a sorted file list.

    Files of :data:`OTHER_KINDS` (drift checks, live comparisons) found in folders are left out;
    a file named explicitly is always kept.
    """
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = p.rglob("*.jsonl")
            files.extend(sorted(f for f in found if not f.name.startswith(OTHER_KINDS)))
        else:
            files.append(p)
    return files


def load_records(
    paths: Iterable[str | os.PathLike[str]] | str | os.PathLike[str],
    errors: Literal["raise", "warn"] = "raise",
) -> pd.DataFrame:
    """Load result files into a tidy frame, one row per record.

    Columns are the :class:`Record` fields, with ``params`` spread into one column per parameter
    (``param.size``, ``param.dtype``, ...) and the most used ``env`` keys spread into
    ``jax``, ``jaxlib``, ``backend`` and ``device_kind``, plus ``machine`` (host name) and
    ``commit`` (git). ``samples_s`` stays a list per row; use :func:`samples_frame` for one row
    per sample. Also has ``file`` (the source path). See :func:`record_row`.

    Raises:
        ResultsFormatError: As :func:`read_records`.
        FileNotFoundError: A named path does not exist.
    """
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    rows = []
    for file in result_files(paths):
        for rec in read_records(file, errors=errors):
            rows.append(record_row(rec, file))
    return pd.DataFrame(rows)


def record_row(rec: Record, file: str | os.PathLike[str]) -> dict[str, Any]:
    """One row of the :func:`load_records` frame: the record's fields plus spread columns.

    Spread columns: ``param.<name>`` per parameter; ``jax``, ``jaxlib``, ``backend``,
    ``device_kind`` from ``env``; ``machine`` (``env.host.hostname``) and ``commit``
    (``env.git.commit``); ``file``.
    """
    row = rec.model_dump()
    for key, value in rec.params.items():
        row[f"param.{key}"] = value
    for key in ("jax", "jaxlib", "backend", "device_kind"):
        row[key] = rec.env.get(key)
    row["machine"] = (rec.env.get("host") or {}).get("hostname")
    row["commit"] = (rec.env.get("git") or {}).get("commit")
    row["file"] = str(file)
    return row


def samples_frame(records: pd.DataFrame) -> pd.DataFrame:
    """One row per timed sample: the frame from :func:`load_records` exploded on ``samples_s``.

    The sample column is renamed ``latency_s`` (seconds) and ``sample`` numbers calls from 0.
    Records without samples (failed, skipped) are dropped.
    """
    frame = records[records["samples_s"].map(len) > 0].drop(columns=["env"], errors="ignore")
    frame = frame.assign(sample=frame["samples_s"].map(lambda s: list(range(len(s)))))
    frame = frame.explode(["samples_s", "sample"], ignore_index=True)
    return frame.rename(columns={"samples_s": "latency_s"}).astype({"latency_s": float})
