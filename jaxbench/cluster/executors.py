"""submitit executors from a profile; task time limits; the sbatch script a submission makes.

Time limits come from the shard's expected duration (worker start-up plus, per case, a set-up
estimate by model size and the timing budget), doubled, plus two minutes, and never under three
minutes: submitit asks Slurm to signal a task ``signal_delay_s`` (90 s) before its limit, and
Slurm may signal up to 60 s early (``man sbatch``, ``--signal``).
"""

from __future__ import annotations

import math
import shlex
from pathlib import Path
from typing import Any

import submitit

from jaxbench.cluster.profile import Profile
from jaxbench.cluster.sweep import CaseSpec
from jaxbench.live_defaults import DEFAULT_CASE_TIMEOUT_S

SETUP_S_BY_SIZE = {"tiny": 5.0, "small": 5.0, "medium": 20.0, "large": 60.0, "xl": 180.0}
"""Expected seconds to build, compile, gate and warm up one case, by size (measured on the CPU
for tiny to medium, see docs/performance.md; guessed for the GPU sizes)."""
UNKNOWN_SIZE_SETUP_S = 60.0
MARGIN = 2.0
MARGIN_MIN = 2
FLOOR_MIN = 3
REQUEUE_MIN_TIME_MIN = 10
"""submitit counts a signal as a time-out, not a pre-emption, once a task has run
``min(0.8 T, T - 10 min)`` of its limit ``T`` (``submitit/core/job_environment.py``,
``SignalHandler.has_timed_out``); for ``T <= 10`` min that is from the start, so such tasks
cannot tell a pre-emption from a time-out and are not made requeueable."""


def expected_case_s(case: CaseSpec, timing: dict[str, Any]) -> float:
    """Seconds one case is expected to take: set-up by size plus the timing budget."""
    setup = SETUP_S_BY_SIZE.get(str(case.params.get("size")), UNKNOWN_SIZE_SETUP_S)
    return setup + float(timing.get("budget_s", 1.0))


def time_limit_min(cases: list[CaseSpec], timing: dict[str, Any], startup_s: float) -> int:
    """Time limit for a shard, whole minutes: ``2 x expected + 2``, at least 3."""
    expected_s = startup_s + sum(expected_case_s(c, timing) for c in cases)
    return max(FLOOR_MIN, math.ceil(expected_s * MARGIN / 60) + MARGIN_MIN)


#: Seconds a sweep's case may run beyond ``MARGIN`` times its expected duration.
CASE_EXTRA_S = 60.0


def case_timeouts_s(
    cases: list[CaseSpec], timing: dict[str, Any], limit_min: int, startup_s: float,
    signal_s: float,
) -> list[float]:  # fmt: skip
    """Seconds each case of a sweep task may take before it is recorded ``failed`` (timed out).

    A case's own share is ``MARGIN`` times its expected duration (:func:`expected_case_s`)
    plus :data:`CASE_EXTRA_S`, at most ``run``'s default case time-out. Where the shares add up
    to more than the task has (its limit less its start-up and the ``signal_s`` before the
    limit at which it is signalled), each is cut in the same proportion, never below ``MARGIN``
    times its expected duration: so cases that hang, however many, are ended with time left
    for the rest of the shard, where under ``run``'s 30 minutes one would outlast the task and
    keep every later case from running, on every resume.

    Args:
        cases: The task's cases, in order.
        timing: The sweep's timing fields (its ``budget_s``).
        limit_min: The task's time limit, minutes.
        startup_s: The profile's expected worker start-up, seconds.
        signal_s: Seconds before the limit at which the task is signalled.

    Returns:
        One time-out a case, seconds, in the order of ``cases``.
    """
    expected = [expected_case_s(c, timing) for c in cases]
    own = [min(MARGIN * e + CASE_EXTRA_S, DEFAULT_CASE_TIMEOUT_S) for e in expected]
    room = max(0.0, limit_min * 60 - startup_s - signal_s)
    cut = min(1.0, room / sum(own)) if own else 1.0
    return [max(MARGIN * e, share * cut) for e, share in zip(expected, own, strict=True)]


def is_requeueable(limit_min: int) -> bool:
    """Whether a task with this time limit may be requeued (see :data:`REQUEUE_MIN_TIME_MIN`)."""
    return limit_min > REQUEUE_MIN_TIME_MIN


def slurm_parameters(profile: Profile, limit_min: int, job_name: str) -> dict[str, Any]:
    """``SlurmExecutor.update_parameters`` arguments for one array of a profile.

    Raises:
        ValueError: The profile has no ``[slurm]`` table.
    """
    s = profile.slurm
    if s is None:
        raise ValueError(f"profile {profile.name!r} has no [slurm] table")
    params: dict[str, Any] = {
        "job_name": job_name,
        "partition": s.partition,
        "time": limit_min,
        "nodes": s.nodes,
        "ntasks_per_node": s.tasks_per_node,
        "cpus_per_task": s.cpus_per_task,
        "signal_delay_s": s.signal_delay_s,
        "array_parallelism": s.array_parallelism,
    }
    optional = {
        "gpus_per_node": s.gpus_per_node or None,
        "gres": s.gres,
        "mem": _sbatch_mem(s.mem_gb),
        "exclusive": True if s.exclusive else None,
        "account": s.account,
        "qos": s.qos,
        "constraint": s.constraint,
        "setup": list(profile.environment.setup) or None,
        "srun_args": _srun_args(s.srun_args, s.cpus_per_task),
        "additional_parameters": dict(s.sbatch_args) or None,
    }
    params.update({k: v for k, v in optional.items() if v is not None})
    return params


def _srun_args(given: list[str], cpus_per_task: int) -> list[str]:
    """The profile's ``srun`` arguments, with ``--cpus-per-task`` added unless it sets it.

    Since Slurm 22.05, ``srun`` does not inherit ``sbatch``'s ``--cpus-per-task`` (Slurm's
    22.05 release notes; ``SRUN_CPUS_PER_TASK``), so without it the step may be bound to one
    core of the job's.
    """
    if any(a == "-c" or a.startswith(("--cpus-per-task", "-c")) for a in given):
        return list(given)
    return [*given, f"--cpus-per-task={cpus_per_task}"]


def _sbatch_mem(mem_gb: float | None) -> str | None:
    """``--mem`` value: whole gigabytes as ``NGB``, else megabytes (``man sbatch``)."""
    if mem_gb is None:
        return None
    return f"{int(mem_gb)}GB" if mem_gb == int(mem_gb) else f"{round(mem_gb * 1024)}MB"


def make_executor(
    profile: Profile, folder: Path, python: str, limit_min: int, job_name: str
) -> submitit.Executor:
    """The submitit executor for one array: Slurm or local, per the profile.

    Args:
        profile: The cluster profile.
        folder: submitit's folder (``<sweep>/submitit/%j``).
        python: Interpreter command for the job (submitit's ``python``).
        limit_min: Time limit, minutes.
        job_name: Slurm job name.

    Raises:
        RuntimeError: ``executor = "slurm"`` but ``srun`` is not on ``PATH`` (from submitit).
    """
    max_timeouts = profile.slurm.max_num_timeout if profile.slurm is not None else 3
    if profile.executor == "local":
        local = profile.local
        assert local is not None
        executor: submitit.Executor = submitit.LocalExecutor(
            folder, max_num_timeout=max_timeouts, python=python
        )
        executor.update_parameters(
            timeout_min=limit_min,
            signal_delay_s=local.signal_delay_s,
            gpus_per_node=local.gpus_per_node,
            visible_gpus=tuple(local.visible_gpus),
            setup=list(profile.environment.setup),
        )
        return executor
    executor = submitit.SlurmExecutor(folder, max_num_timeout=max_timeouts, python=python)
    executor.update_parameters(**slurm_parameters(profile, limit_min, job_name))
    return executor


class _PreviewSlurmExecutor(submitit.SlurmExecutor):
    """A ``SlurmExecutor`` that builds scripts where there is no ``srun``; never submits."""

    @classmethod
    def affinity(cls) -> int:
        return 1


def sbatch_script(
    profile: Profile, folder: Path, python: str, n_tasks: int, limit_min: int, job_name: str
) -> str:
    """The sbatch script submitit writes for an array of ``n_tasks`` tasks of this profile.

    Built by submitit's own code (``SlurmExecutor._make_submission_file_text``) with the same
    parameters as :func:`make_executor`, so it shows what a submission sends; it works where
    Slurm is absent (``jaxbench submit --dry-run``, the golden-file test).
    """
    executor = _PreviewSlurmExecutor(folder, python=python)
    executor.update_parameters(**slurm_parameters(profile, limit_min, job_name))
    if n_tasks > 1:
        executor.parameters["map_count"] = n_tasks
    return executor._make_submission_file_text(executor._submitit_command_str, uid="preview")


def python_command(python: str) -> str:
    """A shell-quoted interpreter path for submitit's ``python`` parameter."""
    return shlex.quote(python)
