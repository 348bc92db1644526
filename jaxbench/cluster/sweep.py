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
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, Field

from jaxbench.store import (
    Record,
    StoreFormatError,
    SweepManifest,
    read_model,
    write_json,
    write_jsonl,
)
from jaxbench.store.sweep import CaseSpec, TaskSpec

MANIFEST = "sweep.json"
RECORDS = "records"
RESULTS = "results.jsonl"
SUBMITIT = "submitit"


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
        if not self.root.is_dir():
            what = "a file" if self.root.exists() else "no such folder"
            raise FileNotFoundError(f"{self.root}: {what} (expected a sweep folder)")
        if not path.is_file():
            raise FileNotFoundError(f"{self.root} is not a sweep folder: it has no {MANIFEST}")
        try:
            return read_model(path, SweepManifest)
        except StoreFormatError as exc:
            raise ValueError(f"not a valid sweep manifest: {exc}") from None

    def save(self, manifest: SweepManifest) -> None:
        """Write ``sweep.json`` atomically."""
        write_json(self.root / MANIFEST, manifest)

    def record_path(self, case: CaseSpec, jax_version: str | None) -> Path:
        """The file a case's record goes to."""
        return self.records_dir / f"{case.file_stem(jax_version)}.json"

    def read_record(self, case: CaseSpec, jax_version: str | None) -> Record | None:
        """The case's record, or ``None`` if it has none (or an unreadable one)."""
        return self.record_of(case, jax_version)[0]

    def record_of(
        self, case: CaseSpec, jax_version: str | None
    ) -> tuple[Record | None, str | None]:
        """The case's record, or ``None`` and why its file does not load (``None``: no file).

        The file is :meth:`record_path`, or in a sweep made before record names had a digest,
        the legacy name (:meth:`~jaxbench.store.sweep.CaseSpec.legacy_file_stem`); a record
        there of another case (two cases shared legacy names) is no record of this one.

        Returns:
            ``(record, None)``, ``(None, reason)`` or ``(None, None)``.
        """
        path = self.record_path(case, jax_version)
        legacy = self.records_dir / f"{case.legacy_file_stem(jax_version)}.json"
        if not path.exists() and len(legacy.name.encode()) <= 255 and legacy.exists():
            path = legacy  # a sweep made before the names had a digest
        try:
            record = read_model(path, Record)
        except StoreFormatError as exc:
            return None, (str(exc) if path.exists() else None)
        if not case.is_case_of(record.params):  # a legacy name two cases shared: not its record
            return None, None
        return record, None

    def has_ok_record(self, case: CaseSpec, jax_version: str | None) -> bool:
        """Whether the case already has a record with status ``ok``."""
        record = self.read_record(case, jax_version)
        return record is not None and record.status == "ok"

    def missing_cases(self, task: TaskSpec) -> list[CaseSpec]:
        """The task's cases without an ``ok`` record (what ``--resume`` runs again).

        Those without any record come first, then those recorded ``failed`` (or ``skipped``),
        each in task order: a case that failed (hung, say) in the task before is not put in
        the way of cases that never ran.
        """
        records = [self.read_record(c, task.jax) for c in task.cases]
        never = [c for c, r in zip(task.cases, records, strict=True) if r is None]
        failed = [c for c, r in zip(task.cases, records, strict=True)
                  if r is not None and r.status != "ok"]  # fmt: skip
        return never + failed

    def collect(self, manifest: SweepManifest) -> CollectResult:
        """Gather every case's record into ``results.jsonl`` (rewritten whole, atomically).

        Records are written in task and case order, one per case and JAX version. Unreadable
        record files are reported, not fatal; while one is, an existing ``results.jsonl`` is
        left as it is (:attr:`CollectResult.written` false), since it may hold that case's
        record from an earlier collect (``submit --resume`` runs the case again).
        """
        result = CollectResult(path=self.results_path)
        for task in manifest.tasks:
            for case in task.cases:
                record, why = self.record_of(case, task.jax)
                if record is not None:
                    result.records.append(record)
                elif why is not None:
                    result.unreadable.append(why)
                else:
                    result.missing.append((task.index, case))
        if result.unreadable and self.results_path.exists():
            return result
        write_jsonl(self.results_path, result.records)
        result.written = True
        return result


class CollectResult(BaseModel):
    """What :meth:`Sweep.collect` found."""

    path: Path
    records: list[Record] = Field(default_factory=list)
    missing: list[tuple[int, CaseSpec]] = Field(default_factory=list)
    unreadable: list[str] = Field(default_factory=list)
    #: Whether :attr:`records` were written to :attr:`path`.
    written: bool = False


def shard(cases: Iterable[CaseSpec], per_task: int) -> list[list[CaseSpec]]:
    """Consecutive groups of ``per_task`` cases (neighbours share sizes, so compiles overlap).

    Raises:
        ValueError: ``per_task`` < 1.
    """
    if per_task < 1:
        raise ValueError(f"--cases-per-task {per_task}: cases per task must be >= 1")
    cases = list(cases)
    return [cases[i : i + per_task] for i in range(0, len(cases), per_task)]


def new_sweep_id() -> str:
    """``sweep-YYYYmmddTHHMMSSZ-<8 hex>`` (the run id of its records)."""
    from jaxbench.store import new_run_id

    return f"sweep-{new_run_id()}"


def utc_now() -> str:
    """ISO-8601 UTC timestamp."""
    return _dt.datetime.now(_dt.UTC).isoformat()
