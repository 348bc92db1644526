"""What runs on a node: set the environment, then time a shard, one record file per case.

submitit pickles a :class:`ShardTask` and unpickles it in the job's Python, which imports this
module; neither imports JAX. :meth:`ShardTask.__call__` sets the variables JAX reads at start-up
(``XLA_FLAGS``, allocator settings, ``JAX_PLATFORMS``, ...), keeps one GPU per task where
several share a node (:func:`local_gpu`), and only then imports the runner, and with it JAX.
Each finished case's record is written atomically into the sweep's ``records/`` at once, so a
task that is killed, cancelled or timed out keeps every case it finished.

When the scheduler signals the end of the time limit (or a pre-emption), the case being timed is
abandoned, not recorded, and submitit decides what follows: a requeue of a
:class:`RequeueableShardTask` (which skips the cases that already have an ``ok`` record), or
the end of the task with submitit's "timed-out" error.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxbench.cluster.sweep import CaseSpec, Sweep, utc_now
from jaxbench.distributed import ProcessGroup, from_slurm


class JaxImportedTooEarly(RuntimeError):
    """JAX was already imported when the worker started, so its environment would be ignored."""


class _Signalled(BaseException):
    """Raised from the scheduler's signal handler; a ``BaseException`` so no case catches it."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@dataclass
class ShardTask:
    """A picklable shard of a sweep, run as one array task.

    Attributes:
        sweep_dir: The sweep folder (on a filesystem the nodes share).
        task_index: The task's number in the manifest.
        cases: The cases to run, in order.
        jax_version: JAX version the task's Python is meant to have (``None``: any); the
            records carry the version actually imported.
        backend: Backend name (see :data:`jaxbench.backends.BACKENDS`).
        timing: :class:`jaxbench.measure.TimingConfig` fields.
        env: Variables set before JAX is imported.
        exclusive: Whether the task has its machine to itself
            (:func:`jaxbench.cluster.preflight.exclusive`); ``None``: not known.
        case_timeouts_s: Per case, the seconds it may take before it is recorded ``failed``
            (:func:`jaxbench.cluster.executors.case_timeouts_s`); empty: ``run``'s default.
    """

    sweep_dir: str
    task_index: int
    cases: list[CaseSpec]
    jax_version: str | None
    backend: str
    timing: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    exclusive: bool | None = None
    case_timeouts_s: list[float] = field(default_factory=list)

    def __call__(self) -> dict[str, Any]:
        """Run the shard; returns a summary: task, host, JAX version, status per case.

        Raises:
            JaxImportedTooEarly: JAX was imported before ``env`` could be set.
            submitit.core.utils.UncompletedJobError: The task was signalled for its time limit
                and is not requeued (raised by submitit's handler).
        """
        if self.env and "jax" in sys.modules:
            raise JaxImportedTooEarly(
                f"jax was imported before the worker set {', '.join(sorted(self.env))}; they "
                "would be ignored. Do not import jax in the job's setup or sitecustomize."
            )
        started_at = utc_now()
        os.environ.update(self.env)
        # in a job of several JAX processes, JAX gives each the GPU of its local rank
        group = from_slurm(os.environ)
        keep = "CUDA_VISIBLE_DEVICES" in self.env or group is not None
        pinned = {} if keep else local_gpu(os.environ)
        os.environ.update(pinned)
        placement = {"task_started_at": started_at, "exclusive": self.exclusive,
                     "pinned": pinned or None} | cpu_placement(os.environ)  # fmt: skip
        if placement["cpu_mismatch"]:
            print(f"warning: {placement['cpu_mismatch']}", file=sys.stderr, flush=True)
        usr_sig = getattr(signal, "SIG" + os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2"))
        stopper = _StopOnSignal(usr_sig)
        try:
            with stopper:
                return self._run_cases(placement, group)
        except _Signalled as stop:
            if callable(stopper.submitit_handler):
                _requeue_or_end(stopper.submitit_handler, stop.signum)
            raise RuntimeError(f"task stopped by signal {stop.signum}") from None

    def _run_cases(self, placement: dict[str, Any], group: ProcessGroup | None) -> dict[str, Any]:
        import jax

        from jaxbench.cases import Case
        from jaxbench.measure import TimingConfig
        from jaxbench.store import write_json
        from jaxbench.supervised import Supervised

        sweep = Sweep(self.sweep_dir)
        timing = TimingConfig(**self.timing)
        run_id = Path(self.sweep_dir).name
        statuses: dict[str, str] = {}
        # Each case is measured in a watched worker process, as `jaxbench run` measures: a
        # case that aborts its process or hangs past the case time-out is recorded `failed`,
        # and the next case runs in a fresh worker; this process writes every record. The
        # worker ignores the scheduler's signals to the task (scancel's SIGTERM, the
        # pre-emption warning): this process handles them, and SIGKILL ends both.
        stop = ("SIGTERM", "SIGUSR1", "SIGUSR2")
        # In a job of several tasks each task is one process of the case's program; all of
        # them measure, and task 0 writes the record. Which cases are done is read once,
        # before the processes meet, so all of them measure the same cases.
        writes = group is None or group.index == 0
        done = [sweep.has_ok_record(spec, self.jax_version) for spec in self.cases]
        with Supervised(self.backend, timing, environ=dict(os.environ), ignore_signals=stop,
                        groups=[group] if group else []) as watched:  # fmt: skip
            limits = self.case_timeouts_s or [None] * len(self.cases)
            for spec, earlier, limit in zip(self.cases, done, limits, strict=True):
                case = Case(spec.workload, spec.params)
                if earlier:
                    statuses[case.label] = "ok (earlier)"
                    continue
                path = sweep.record_path(spec, self.jax_version)
                # the sweep's copy of the timing settings is the same as env.timing (a
                # condition field)
                sweep_facts = {"task": self.task_index, "requested_jax": self.jax_version,
                               "worker_env": dict(self.env), "timing": timing.recorded(),
                               **placement}  # fmt: skip
                record = watched.measure(case, run_id, path.parent if writes else None,
                                         sweep=sweep_facts, timeout_s=limit)  # fmt: skip
                if writes:
                    write_json(path, record)
                statuses[case.label] = record.status
        return {
            "task": self.task_index,
            "host": socket.gethostname(),
            "jax": jax.__version__,
            "finished_at": utc_now(),
            "statuses": statuses,
        }


def cpu_placement(environ: Mapping[str, str]) -> dict[str, Any]:
    """The CPUs the job asked for per task and those this process may use, and any mismatch.

    Slurm 22.05 and later no longer pass ``--cpus-per-task`` from ``sbatch`` to ``srun``
    (its ``SRUN_CPUS_PER_TASK``), so a step can be bound to fewer cores than the job holds;
    the profiles pass it (:func:`jaxbench.cluster.executors.slurm_parameters`) and this
    checks it.

    Returns:
        ``cpus_asked`` (``SLURM_CPUS_PER_TASK``, ``None`` outside Slurm), ``cpus_usable``
        (:func:`jaxbench.measure.noise.usable_cpus`) and ``cpu_mismatch``: a sentence when
        they differ, else ``None``.
    """
    from jaxbench.measure.noise import usable_cpus

    text = environ.get("SLURM_CPUS_PER_TASK", "")
    asked = int(text) if text.isdigit() else None
    usable = usable_cpus()
    mismatch = None
    if asked is not None and usable is not None and usable != asked:
        mismatch = (f"the job asked for {asked} CPUs per task (SLURM_CPUS_PER_TASK) but this "
                    f"task can use {usable}; its timings are of {usable}")  # fmt: skip
    return {"cpus_asked": asked, "cpus_usable": usable, "cpu_mismatch": mismatch}


def local_gpu(environ: Mapping[str, str]) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for one of several tasks on a node: GPU ``SLURM_LOCALID``.

    Slurm starts every task of a step with the same list of the step's GPUs
    (``CUDA_VISIBLE_DEVICES``, else ``SLURM_STEP_GPUS`` or ``SLURM_JOB_GPUS``), so without this
    they would all run on the first. Task ``SLURM_LOCALID = i`` keeps entry ``i`` (modulo the
    list's length). Set before JAX is imported: CUDA reads it once, at start-up.

    Args:
        environ: The process environment.

    Returns:
        ``{"CUDA_VISIBLE_DEVICES": <one GPU>}``; empty where no local id is set or at most one
        GPU is listed.

    Raises:
        ValueError: ``SLURM_LOCALID`` is not a whole number.
    """
    local_id = environ.get("SLURM_LOCALID")
    listed = next(
        (environ[k] for k in ("CUDA_VISIBLE_DEVICES", "SLURM_STEP_GPUS", "SLURM_JOB_GPUS")
         if environ.get(k)), "",
    )  # fmt: skip
    gpus = [g.strip() for g in listed.split(",") if g.strip()]
    if local_id is None or len(gpus) <= 1:
        return {}
    if not local_id.strip().isdigit():
        raise ValueError(f"SLURM_LOCALID={local_id!r}: expected a whole number")
    return {"CUDA_VISIBLE_DEVICES": gpus[int(local_id) % len(gpus)]}


@dataclass
class RequeueableShardTask(ShardTask):
    """A :class:`ShardTask` that submitit requeues when pre-empted or timed out.

    On requeue the same task runs again and skips every case that has an ``ok`` record.
    """

    def checkpoint(self) -> Any:
        """Called by submitit on pre-emption or time-out: resubmit this same task."""
        import submitit

        return submitit.helpers.DelayedSubmission(self)


#: How often the worker asks submitit to requeue before the job ends as failed, and the wait
#: between tries, in seconds.
REQUEUE_TRIES = 3
REQUEUE_RETRY_S = 5.0


def _requeue_or_end(submitit_handler: Any, signum: int) -> None:
    """Let submitit checkpoint and requeue the job (exits) or end it (raises).

    A pre-emption sends ``SIGTERM`` to every process of the job, and the pre-emption signal may
    come first: the ``scontrol requeue`` that submitit's handler starts would die of it and the
    job would end as failed instead of requeued. So ``SIGTERM`` is ignored from here on (an
    ignored signal stays ignored in a child; submitit's own handler only logs it). A requeue
    that fails for another reason (``slurmctld`` busy) is tried ``REQUEUE_TRIES`` times; each
    try checkpoints again, which is idempotent.

    Raises:
        submitit.core.utils.UncompletedJobError: submitit will not requeue (not checkpointable,
            or timed out too many times).
        subprocess.SubprocessError: ``scontrol requeue`` failed ``REQUEUE_TRIES`` times.
    """
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for attempt in range(1, REQUEUE_TRIES + 1):
        try:
            submitit_handler(signum, None)
            return
        except subprocess.SubprocessError:
            if attempt == REQUEUE_TRIES:
                raise
            time.sleep(REQUEUE_RETRY_S)


class _StopOnSignal:
    """Turn the scheduler's signal into :class:`_Signalled`, raised in the main flow.

    A signal handler's exception is lost when the signal lands inside a garbage-collection or
    ``__del__`` callback (JAX registers one), so after the first attempt an interval timer
    (``SIGALRM``, every 0.2 s) raises it again until it reaches the case loop.
    """

    RETRY_S = 0.2

    def __init__(self, usr_sig: signal.Signals):
        self.usr_sig = usr_sig
        self.signum: int | None = None
        self.submitit_handler: Any = None
        self._alarm_handler: Any = None

    def __enter__(self) -> _StopOnSignal:
        self.submitit_handler = signal.getsignal(self.usr_sig)
        self._alarm_handler = signal.getsignal(signal.SIGALRM)
        signal.signal(self.usr_sig, self._caught)
        signal.signal(signal.SIGALRM, self._retry)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._alarm_handler)
        signal.signal(self.usr_sig, self.submitit_handler)

    def _caught(self, signum: int, frame: object) -> None:
        self.signum = signum
        signal.setitimer(signal.ITIMER_REAL, self.RETRY_S, self.RETRY_S)
        raise _Signalled(signum)

    def _retry(self, signum: int, frame: object) -> None:
        if self.signum is not None:
            raise _Signalled(self.signum)
