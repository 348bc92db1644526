"""Cluster profiles: where and how a sweep's tasks run, read from a TOML file.

A profile names the executor (``slurm`` or ``local``), the Slurm resources of one task, how the
node gets its Python, and the environment variables the worker sets before JAX starts. The
files live in ``slurm/`` (see ``slurm/README.md``); a bare name such as ``local`` means
``slurm/local.toml``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from jaxbench.backends import check_backend

REPO_ROOT = Path(__file__).resolve().parents[2]


class ProfileError(ValueError):
    """A profile is missing, not TOML, or has a wrong key or type; the message names it."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SlurmSection(_Strict):
    """Resources of one array task on Slurm (``sbatch`` options; see ``man sbatch``).

    Attributes:
        partition: Slurm partition (``--partition``).
        nodes: Nodes per array task (``--nodes``).
        tasks_per_node: Slurm tasks per node (``--ntasks-per-node``), one JAX process each.
            With more than one task in all (``nodes * tasks_per_node`` > 1) every case runs as
            one program over all of them (:mod:`jaxbench.distributed`: ``jax.distributed``
            from the Slurm environment; each process takes the GPU of its local rank), and
            task 0 writes the record.
        gpus_per_node: GPUs per node (``--gpus-per-node``); 0 for CPU nodes.
        gres: A raw ``--gres`` string (e.g. ``"gpu:h100:1"``) instead of ``gpus_per_node``.
        cpus_per_task: CPU cores per task (``--cpus-per-task``).
        mem_gb: Memory per node in GB (``--mem``); ``None`` takes the partition default.
        max_time_min: Longest time limit to ask for, minutes; a shard that needs more is an
            error at submission.
        array_parallelism: Array tasks running at once (the ``%N`` of ``--array``).
        exclusive: Whole node to one task (``--exclusive``), so no other job shares it. A GPU
            profile without it may share its GPUs and host with other jobs: ``submit`` warns.
        account: ``--account``.
        qos: ``--qos``.
        constraint: ``--constraint`` (node features, e.g. a GPU model).
        signal_delay_s: Seconds before the time limit at which Slurm signals the task (USR2).
        max_num_timeout: Requeues allowed after a time-out (tasks over 10 minutes only).
        sbatch_args: Further ``#SBATCH`` options, name to value (``true`` for a bare flag).
        srun_args: Further ``srun`` arguments.
    """

    partition: str = Field(min_length=1)
    nodes: int = Field(1, ge=1)
    tasks_per_node: int = Field(1, ge=1)
    gpus_per_node: int = Field(0, ge=0)
    gres: str | None = None
    cpus_per_task: int = Field(1, ge=1)
    mem_gb: float | None = Field(None, gt=0)
    max_time_min: int = Field(60, ge=1)
    array_parallelism: int = Field(64, ge=1)
    exclusive: bool = False
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    signal_delay_s: int = Field(90, ge=0)
    max_num_timeout: int = Field(3, ge=0)
    sbatch_args: dict[str, str | int | bool] = Field(default_factory=dict)
    srun_args: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _gpus_one_way(self) -> SlurmSection:
        if self.gres is not None and self.gpus_per_node:
            raise ValueError("set gpus_per_node or gres, not both")
        return self


class LocalSection(_Strict):
    """Tasks as processes on this machine (submitit's ``LocalExecutor``), one after another.

    Attributes:
        max_time_min: Longest time limit to ask for a task, minutes (the local executor kills
            a task after its own limit); a shard that needs more is an error.
        signal_delay_s: Seconds before the time limit at which the local executor signals the
            task (USR2), which then abandons the case it is timing and ends as timed out
            (submitit's default, 30 s).
        gpus_per_node: GPUs given to each task through ``CUDA_VISIBLE_DEVICES``.
        visible_gpus: Which GPU indices the tasks may use.
        concurrent: Start every task (and every ``--jax`` version) at once. They then time
            each other: ``submit`` warns, each record says ``env.sweep.exclusive: false``, and
            concurrent GPU tasks get ``gpus_per_node`` GPUs of ``visible_gpus`` each, in turn.
    """

    max_time_min: int = Field(60, ge=1)
    signal_delay_s: int = Field(30, ge=0)
    gpus_per_node: int = Field(0, ge=0)
    visible_gpus: list[int] = Field(default_factory=list)
    concurrent: bool = False


class EnvironmentSection(_Strict):
    """How a node gets its Python.

    Attributes:
        python: Command that runs the worker's Python: ``"current"`` (the interpreter running
            ``jaxbench submit``, so its environment must be on a filesystem the nodes share), a
            path, or a wrapper such as ``"apptainer exec jax.sif python"``.
        setup: Shell lines run before the worker (e.g. ``module load cuda/12.4``).
        env_root: Folder (shared by the nodes) where ``--jax`` environments are built; default
            ``<sweeps_dir>/envs``.
        jax_extra: Extra of the ``jax`` package for ``--jax`` environments (``cuda12``,
            ``cuda13``, ``tpu``), or none for CPU.
        base_python: Interpreter the ``--jax`` environments are made from; default: the one
            running ``jaxbench submit``.
    """

    python: str = "current"
    setup: list[str] = Field(default_factory=list)
    env_root: str | None = None
    jax_extra: Literal["cuda12", "cuda13", "tpu"] | None = None
    base_python: str | None = None


class WorkerSection(_Strict):
    """What the worker does.

    Attributes:
        backend: JAX backend the cases are timed on (one of :data:`jaxbench.backends.BACKENDS`).
        env: Environment variables set before JAX is imported (``XLA_FLAGS``, allocator
            settings, ...). ``JAX_PLATFORMS`` follows ``backend`` unless set here.
        cases_per_task: Cases per array task.
        startup_s: Expected seconds for a task to start Python and JAX (for its time limit).
    """

    backend: str = "default"
    env: dict[str, str] = Field(default_factory=dict)
    cases_per_task: int = Field(4, ge=1)
    startup_s: float = Field(30.0, ge=0)

    @model_validator(mode="after")
    def _known_backend(self) -> WorkerSection:
        try:
            check_backend(self.backend)
        except ValueError as exc:  # the profile's key, not run's option
            raise ValueError(str(exc).removeprefix(f"--backend {self.backend!r}: ")) from None
        return self


class Profile(_Strict):
    """A whole profile file.

    Attributes:
        executor: ``"slurm"`` (needs a ``[slurm]`` table) or ``"local"``.
        sweeps_dir: Folder that holds one folder per sweep; on Slurm it must be shared by the
            nodes. Relative paths are taken from the folder ``jaxbench submit`` runs in.
        description: One line for people.
        slurm: See :class:`SlurmSection`.
        local: See :class:`LocalSection`.
        environment: See :class:`EnvironmentSection`.
        worker: See :class:`WorkerSection`.
        path: The file it was read from (set by :func:`load_profile`).
    """

    executor: Literal["slurm", "local"]
    sweeps_dir: str = "sweeps"
    description: str = ""
    slurm: SlurmSection | None = None
    local: LocalSection | None = None
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)
    worker: WorkerSection = Field(default_factory=WorkerSection)
    path: str | None = None

    @model_validator(mode="after")
    def _section_for_executor(self) -> Profile:
        if self.executor == "slurm" and self.slurm is None:
            raise ValueError("executor 'slurm' needs a [slurm] table (at least 'partition')")
        if self.executor == "local" and self.local is None:
            self.local = LocalSection()
        return self

    @property
    def name(self) -> str:
        """The file's stem (``gpu`` for ``slurm/gpu.toml``)."""
        return Path(self.path).stem if self.path else "profile"

    @property
    def max_time_min(self) -> int:
        """Longest time limit a task may ask for, minutes."""
        section = self.slurm if self.executor == "slurm" else self.local
        assert section is not None
        return section.max_time_min


def find_profile(name_or_path: str) -> Path:
    """The file a ``--profile`` value names: a path, or a name in ``slurm/``.

    ``slurm/<name>.toml`` is looked for in the current folder, then in the checkout jaxbench
    runs from.

    Raises:
        ProfileError: No such file; the message lists the profiles found.
    """
    given = Path(name_or_path)
    if given.is_file():
        return given
    if given.suffix != ".toml" and given.parent == Path("."):
        for folder in (Path.cwd() / "slurm", REPO_ROOT / "slurm"):
            candidate = folder / f"{name_or_path}.toml"
            if candidate.is_file():
                return candidate
    known = sorted({p.stem for d in (Path.cwd(), REPO_ROOT) for p in (d / "slurm").glob("*.toml")})
    raise ProfileError(
        f"profile {name_or_path!r} not found (a TOML file, or one of: {', '.join(known) or 'none'})"
    )


def load_profile(name_or_path: str) -> Profile:
    """Read and validate a profile.

    Raises:
        ProfileError: Missing file, bad TOML, an unknown key or a value of the wrong type; the
            message names the file and the key (e.g. ``slurm.gpus_per_node``).
    """
    path = find_profile(name_or_path)
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read profile: {exc}") from None
    try:
        return Profile.model_validate({**data, "path": str(path)})
    except ValidationError as exc:
        raise ProfileError(f"{path}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "profile"
        if err["type"] == "extra_forbidden":
            parts.append(f"unknown key {key!r}")
        elif err["type"] == "missing":
            parts.append(f"missing key {key!r}")
        elif err["type"] == "value_error":
            parts.append(f"{key}: {err['msg'].removeprefix('Value error, ')}")
        else:
            parts.append(f"{key}: {err['msg']} (got {err.get('input')!r})")
    return "; ".join(parts)
