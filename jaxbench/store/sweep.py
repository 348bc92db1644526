"""The sweep manifest (kind ``sweep``): a sweep's profile, timing, tasks and job ids.

:mod:`jaxbench.cluster.sweep` keeps it as ``sweep.json`` in the sweep folder, beside one record
file per case. Schema versions: 1 (no ``kind``; still read) and 2.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 2
#: Characters of a record file name's readable part (:meth:`CaseSpec.file_stem`).
STEM_TEXT = 150


class CaseSpec(BaseModel):
    """A case as plain data (the worker must not import the workload registry to unpickle it)."""

    workload: str
    params: dict[str, Any]

    def legacy_file_stem(self, jax_version: str | None) -> str:
        """The record file name (no suffix) of sweeps made before :meth:`file_stem` had a digest.

        JAX version, workload and parameters, every other character than letters, digits,
        ``.``, ``_`` and ``-`` made ``_``: two cases could share it (``tag=a b``, ``tag=a_b``),
        and many parameters made it too long for a file name.
        """
        parts = [f"jax-{jax_version or 'env'}", self.workload.replace("/", "-")]
        parts += [f"{k}-{v}" for k, v in sorted(self.params.items())]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))

    def file_stem(self, jax_version: str | None) -> str:
        """Record file name without suffix, one per case and JAX version.

        The readable part (:meth:`legacy_file_stem`, cut to :data:`STEM_TEXT` characters), then
        the first 16 hex digits of the SHA-256 of the JAX version, workload and parameters as
        JSON (keys sorted): distinct cases get distinct files whatever their values, and the
        name stays under the 255 bytes a file name may have.
        """
        key = json.dumps([jax_version, self.workload, self.params], sort_keys=True, default=str)
        digest = hashlib.sha256(key.encode()).hexdigest()[:16]
        return f"{self.legacy_file_stem(jax_version)[:STEM_TEXT]}__{digest}"

    def is_case_of(self, params: dict[str, Any]) -> bool:
        """Whether a record's ``params`` are this case's (each of the case's, the same value)."""
        return all(k in params and params[k] == v for k, v in self.params.items())


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
    """``sweep.json``: everything needed to run, resume, follow and collect a sweep.

    ``kind`` is ``sweep``; ``schema_version`` :data:`SCHEMA_VERSION` (1 in files without
    ``kind``).
    """

    kind: Literal["sweep"] = "sweep"
    schema_version: Literal[1, 2] = SCHEMA_VERSION
    sweep_id: str
    created_at: str
    profile_path: str | None
    profile: dict[str, Any]
    backend: str
    timing: dict[str, Any]
    worker_env: dict[str, str]
    env_root: str
    tasks: list[TaskSpec]
    #: More ``pip install`` arguments of the ``--jax`` environments (``--with``, the user
    #: workloads' distributions); they name the environments' folders.
    requirements: list[str] = Field(default_factory=list)
    #: User workloads the ``--jax`` environments must find.
    user_workloads: list[str] = Field(default_factory=list)
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
