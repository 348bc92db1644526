"""The sweep manifest (kind ``sweep``): a sweep's profile, timing, tasks and job ids.

:mod:`jaxbench.cluster.sweep` keeps it as ``sweep.json`` in the sweep folder, beside one record
file per case. Schema versions: 1 (no ``kind``; still read) and 2.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field

SCHEMA_VERSION = 2


class CaseSpec(BaseModel):
    """A case as plain data (the worker must not import the workload registry to unpickle it)."""

    workload: str
    params: dict[str, Any]

    def file_stem(self, jax_version: str | None) -> str:
        """Record file name without suffix: JAX version, workload and parameters."""
        parts = [f"jax-{jax_version or 'env'}", self.workload.replace("/", "-")]
        parts += [f"{k}-{v}" for k, v in sorted(self.params.items())]
        return re.sub(r"[^A-Za-z0-9._-]+", "_", "__".join(parts))


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
