"""A sweep on disk: its manifest, its tasks, and one record file per case.

Layout of ``<sweeps_dir>/<sweep id>/``::

    sweep.json          the manifest (:class:`SweepManifest`): profile, timing, tasks, job ids
    records/<case>.json one record per case and JAX version, written atomically by the worker
    results.jsonl       every record, gathered by ``jaxbench collect``
    submitit/           submitit's pickles and the tasks' logs

A case's record file is named by the case and the JAX version, so a re-run replaces an earlier
``failed`` record of the same case instead of adding a duplicate, and an ``ok`` record is never
run again.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from jaxbench.results import Record, ResultsFormatError, ResultsWriter, read_record_file

MANIFEST = "sweep.json"
RECORDS = "records"
RESULTS = "results.jsonl"
SUBMITIT = "submitit"


class CaseSpec(BaseModel):
    """A case as plain data (the worker must not import the workload registry to unpickle it)."""

    workload: str
    params: dict[str, Any]

    def file_stem(self, jax_version: str | None) -> str:
        """Record file name without suffix: JAX version, workload and parameters."""
        parts = [f"jax-{jax_version or 'env'}", self.workload.replace("/", "-")]
        parts += [f"{k}-{v}" for k, v in sorted(self.params.items())]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))

    @property
    def label(self) -> str:
        """``workload k=v ...`` as in ``jaxbench run``."""
        return " ".join([self.workload, *(f"{k}={v}" for k, v in self.params.items())])


class TaskSpec(BaseModel):
    """One array task: a shard of cases under one JAX version.

    Attributes:
        index: Task number within the sweep, from 0.
        jax: JAX version the task's Python has (``None``: the profile's own environment).
        python: Interpreter command on the node.
        cases: The shard.
        time_limit_min: Time limit asked of the scheduler, minutes.
        requeueable: Whether a pre-empted or timed-out task is requeued (see
            :func:`jaxbench.cluster.executors.is_requeueable`).
    """

    index: int
    jax: str | None
    python: str
    cases: list[CaseSpec]
    time_limit_min: int
    requeueable: bool


class Submission(BaseModel):
    """One ``submit`` (or ``--resume``): which job runs which task."""

    submitted_at: str
    executor: str
    job_ids: dict[int, str]


class SweepManifest(BaseModel):
    """``sweep.json``: everything needed to run, resume, follow and collect a sweep."""

    sweep_id: str
    created_at: str
    profile_path: str | None
    profile: dict[str, Any]
    backend: str
    timing: dict[str, Any]
    worker_env: dict[str, str]
    env_root: str
    tasks: list[TaskSpec]
    submissions: list[Submission] = Field(default_factory=list)

    def latest_jobs(self) -> dict[int, str]:
        """Task index -> the job id of its latest submission."""
        jobs: dict[int, str] = {}
        for sub in self.submissions:
            jobs.update(sub.job_ids)
        return jobs

    @property
    def executor(self) -> str:
        """Executor of the latest submission (the profile's otherwise)."""
        return self.submissions[-1].executor if self.submissions else self.profile["executor"]


class Sweep:
    """A sweep's folder (see the module docstring for its layout)."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(root).resolve()

    @property
    def records_dir(self) -> Path:
        """Where the workers write one file per case."""
        return self.root / RECORDS

    @property
    def submitit_dir(self) -> Path:
        """The submitit folder (pickles and logs, ``%j`` per job)."""
        return self.root / SUBMITIT

    @property
    def results_path(self) -> Path:
        """The gathered JSON Lines file."""
        return self.root / RESULTS

    def load(self) -> SweepManifest:
        """Read ``sweep.json``.

        Raises:
            FileNotFoundError: The folder has no ``sweep.json``.
            ValueError: It is not a valid manifest (names the file and the first bad field).
        """
        path = self.root / MANIFEST
        if not path.is_file():
            raise FileNotFoundError(f"{self.root} is not a sweep folder: it has no {MANIFEST}")
        try:
            return SweepManifest.model_validate_json(path.read_text())
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "top level"
            raise ValueError(
                f"{path}: not a valid sweep manifest ({where}: {first['msg']})"
            ) from None

    def save(self, manifest: SweepManifest) -> None:
        """Write ``sweep.json`` atomically."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.root / f".{MANIFEST}.{os.getpid()}.tmp"
        tmp.write_text(manifest.model_dump_json(indent=2))
        os.replace(tmp, self.root / MANIFEST)

    def record_path(self, case: CaseSpec, jax_version: str | None) -> Path:
        """The file a case's record goes to."""
        return self.records_dir / f"{case.file_stem(jax_version)}.json"

    def read_record(self, case: CaseSpec, jax_version: str | None) -> Record | None:
        """The case's record, or ``None`` if it has none (or an unreadable one)."""
        try:
            return read_record_file(self.record_path(case, jax_version))
        except (OSError, ResultsFormatError):
            return None

    def has_ok_record(self, case: CaseSpec, jax_version: str | None) -> bool:
        """Whether the case already has a record with status ``ok``."""
        record = self.read_record(case, jax_version)
        return record is not None and record.status == "ok"

    def missing_cases(self, task: TaskSpec) -> list[CaseSpec]:
        """The task's cases without an ``ok`` record (what ``--resume`` runs again)."""
        return [c for c in task.cases if not self.has_ok_record(c, task.jax)]

    def collect(self, manifest: SweepManifest) -> CollectResult:
        """Gather every case's record into ``results.jsonl`` (rewritten whole, atomically).

        Records are written in task and case order, one per case and JAX version. Unreadable
        record files are reported, not fatal.
        """
        result = CollectResult(path=self.results_path)
        tmp = self.root / f".{RESULTS}.{os.getpid()}.tmp"
        tmp.unlink(missing_ok=True)
        with ResultsWriter(tmp) as writer:
            for task in manifest.tasks:
                for case in task.cases:
                    path = self.record_path(case, task.jax)
                    if not path.exists():
                        result.missing.append((task.index, case))
                        continue
                    try:
                        record = read_record_file(path)
                    except (OSError, ResultsFormatError) as exc:
                        result.unreadable.append(str(exc))
                        continue
                    writer.write(record)
                    result.records.append(record)
        os.replace(tmp, self.results_path)
        return result


class CollectResult(BaseModel):
    """What :meth:`Sweep.collect` found."""

    path: Path
    records: list[Record] = Field(default_factory=list)
    missing: list[tuple[int, CaseSpec]] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list)


def shard(cases: Iterable[CaseSpec], per_task: int) -> list[list[CaseSpec]]:
    """Consecutive groups of ``per_task`` cases (neighbours share sizes, so compiles overlap).

    Raises:
        ValueError: ``per_task`` < 1.
    """
    if per_task < 1:
        raise ValueError(f"cases per task must be >= 1, got {per_task}")
    cases = list(cases)
    return [cases[i : i + per_task] for i in range(0, len(cases), per_task)]


def new_sweep_id() -> str:
    """``sweep-YYYYmmddTHHMMSSZ-<8 hex>`` (the run id of its records)."""
    from jaxbench.results import new_run_id

    return f"sweep-{new_run_id()}"


def utc_now() -> str:
    """ISO-8601 UTC timestamp."""
    return _dt.datetime.now(_dt.UTC).isoformat()
