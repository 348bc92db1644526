"""Submit a sweep as submitit job arrays, resume it, follow it, and collect its records.

A task's outcome is judged from submitit's ``job.exception()`` (the result the task itself
pickled, or the scheduler's reason it has none), never from the scheduler state alone: a local
job that was killed at its time limit can read ``FINISHED``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import submitit

from jaxbench.backends import JAX_PLATFORMS
from jaxbench.cluster import jobstate, preflight, pyenvs
from jaxbench.cluster.executors import (
    case_timeouts_s,
    is_requeueable,
    make_executor,
    python_command,
    time_limit_min,
)
from jaxbench.cluster.profile import Profile
from jaxbench.cluster.sweep import Sweep, new_sweep_id, shard, utc_now
from jaxbench.cluster.worker import RequeueableShardTask, ShardTask
from jaxbench.store.sweep import CaseSpec, Submission, SweepManifest, TaskSpec

ACTIVE = ("pending", "running")


@dataclass
class SweepRequest:
    """What ``jaxbench submit`` was asked for.

    Attributes:
        profile: The cluster profile.
        cases: The selected cases.
        timing: :class:`jaxbench.measure.TimingConfig` fields.
        jax_versions: JAX versions, each in its own environment; empty for the profile's own.
        cases_per_task: Shard size; ``None`` takes the profile's.
        time_limit_min: Time limit per task; ``None`` derives it from the shard.
        sweeps_dir: Folder for the sweep; ``None`` takes the profile's.
        requirements: More ``pip install`` arguments for the ``jax_versions`` environments
            (:func:`jaxbench.cluster.pyenvs.ensure_env`).
        user_workloads: User workloads those environments must find before anything is
            submitted (:meth:`jaxbench.cluster.pyenvs.VersionEnvs.check`).
    """

    profile: Profile
    cases: list[CaseSpec]
    timing: dict[str, Any]
    jax_versions: list[str]
    cases_per_task: int | None = None
    time_limit_min: int | None = None
    sweeps_dir: Path | None = None
    requirements: tuple[str, ...] = ()
    user_workloads: tuple[str, ...] = ()


def worker_env(profile: Profile) -> dict[str, str]:
    """Variables the worker sets before importing JAX: the profile's, plus ``JAX_PLATFORMS``.

    Only a ``cpu`` backend is pinned (``JAX_PLATFORMS=cpu``, so a CPU sweep on a GPU node does
    not start the GPU): an accelerator named there that the node lacks stops JAX from starting,
    and the task would fail whole, where unpinned its cases are ``skipped``, as in ``run``.
    """
    env = dict(profile.worker.env)
    if profile.worker.backend == "cpu" and "JAX_PLATFORMS" not in env:
        env["JAX_PLATFORMS"] = JAX_PLATFORMS["cpu"]
    return env


def plan(request: SweepRequest) -> tuple[Sweep, SweepManifest]:
    """Shard the cases into tasks, one array per JAX version, and run every check.

    Nothing is written or submitted (except the probe of the results folder).

    Raises:
        preflight.PreflightError: A check failed (folder, partition, GPUs, time, interpreter).
        ValueError: A requested JAX version is not on the package index, or no cases.
        pyenvs.PyEnvError: The index or the base interpreter cannot be asked.
    """
    profile = request.profile
    if not request.cases:
        raise ValueError("the selection has no cases")
    sweeps_dir = Path(request.sweeps_dir or profile.sweeps_dir).absolute()
    per_task = request.cases_per_task
    if per_task is None:
        per_task = profile.worker.cases_per_task
    env_root = Path(profile.environment.env_root or sweeps_dir / "envs").absolute()
    base = pyenvs.base_python(profile.environment.base_python)
    if request.time_limit_min is not None and request.time_limit_min < 1:
        raise ValueError(f"--time-limit must be >= 1 minute, got {request.time_limit_min}")
    tasks: list[TaskSpec] = []
    versions = list(dict.fromkeys(request.jax_versions))
    for version in versions or [None]:
        if version is None and profile.environment.python == "current":
            python = python_command(sys.executable)
        elif version is None:
            python = profile.environment.python  # may be a wrapper: "apptainer exec img python"
        else:
            folder = pyenvs.env_dir(env_root, version, profile.environment.jax_extra,
                                    pyenvs.python_tag(base), request.requirements)  # fmt: skip
            python = python_command(str(pyenvs.env_python(folder)))
        shards, limit, per_task = _fitting(request, profile, per_task)
        if limit > profile.max_time_min:
            raise preflight.PreflightError(_over_limit(limit, profile, request, per_task))
        for cases in shards:
            tasks.append(
                TaskSpec(
                    index=len(tasks),
                    jax=version,
                    python=python,
                    cases=cases,
                    time_limit_min=limit,
                    requeueable=is_requeueable(limit),
                )
            )
    preflight.check_writable(sweeps_dir, "--sweeps-dir")
    if profile.executor == "slurm":
        preflight.check_slurm(profile, max(t.time_limit_min for t in tasks))
    if not request.jax_versions:
        preflight.check_python(tasks[0].python)
    else:
        pyenvs.check_versions(base, versions)
    sweep_id = new_sweep_id()
    manifest = SweepManifest(
        sweep_id=sweep_id,
        created_at=utc_now(),
        profile_path=profile.path,
        profile=profile.model_dump(),
        backend=profile.worker.backend,
        timing=request.timing,
        worker_env=worker_env(profile),
        env_root=str(env_root),
        tasks=tasks,
        requirements=list(request.requirements),
        user_workloads=list(request.user_workloads),
    )
    return Sweep(sweeps_dir / sweep_id), manifest


def _fitting(
    request: SweepRequest, profile: Profile, per_task: int
) -> tuple[list[list[CaseSpec]], int, int]:
    """The shards, their time limit (minutes) and cases a task.

    The profile's ``cases_per_task``, halved as often as it takes while a task would need more
    than the profile's ``max_time_min``, unless ``--cases-per-task`` or ``--time-limit`` was
    given (then it is the user's to change).
    """
    while True:
        shards = shard(request.cases, per_task)
        limit = request.time_limit_min or max(
            time_limit_min(s, request.timing, profile.worker.startup_s) for s in shards
        )
        chosen = request.cases_per_task is not None or request.time_limit_min is not None
        if chosen or limit <= profile.max_time_min or per_task == 1:
            return shards, limit, per_task
        per_task = max(1, per_task // 2)


def _over_limit(limit: int, profile: Profile, request: SweepRequest, per_task: int) -> str:
    section = "slurm" if profile.executor == "slurm" else "local"
    where = f"the profile's max_time_min ({profile.max_time_min}, [{section}] in {profile.path})"
    if request.time_limit_min is not None:
        return f"--time-limit {limit} is over {where}"
    fix = "use fewer --cases-per-task, or raise it" if per_task > 1 else "raise it"
    return f"a task needs a {limit} min time limit, over {where}: {fix}"


def submit(
    sweep: Sweep,
    manifest: SweepManifest,
    only: dict[int, list[CaseSpec]] | None = None,
    on_progress: Callable[[str], None] = lambda _: None,
) -> Submission:
    """Build missing ``--jax`` environments, then submit the tasks of each JAX version.

    On Slurm each version is one job array, split into arrays of at most ``MaxArraySize``
    tasks (``scontrol show config``: indices ``0 .. MaxArraySize - 1``). A local sweep runs its
    tasks one after another, and this call waits for each; with ``[local] concurrent = true``
    they all start at once. A submission that fails before any job was submitted removes the
    sweep folder it made, so a refused submission leaves nothing behind.

    Args:
        sweep: The sweep folder (created here).
        manifest: From :func:`plan` (or loaded, for a resume); saved before, and after each
            array or local task is submitted.
        only: Task index -> cases to run (a resume); ``None`` runs every task whole.
        on_progress: Called with one line per step (environment built, array submitted).

    Returns:
        The submission, also appended to the manifest.

    Raises:
        pyenvs.PyEnvError: An environment could not be built, or cannot find a user workload
            (:class:`jaxbench.cluster.pyenvs.WorkloadNotFound`); nothing was submitted.
        submitit.core.utils.FailedSubmissionError: ``sbatch`` refused a job.
    """
    profile = Profile.model_validate(manifest.profile)
    made_here = not sweep.root.exists()
    submission = Submission(submitted_at=utc_now(), executor=profile.executor, job_ids={})
    try:
        _submit_tasks(sweep, manifest, profile, submission, only, on_progress)
    except BaseException:
        if made_here and not submission.job_ids:
            shutil.rmtree(sweep.root, ignore_errors=True)
        raise
    finally:  # submitit's staging folder, empty once jobs have ids (also after a Ctrl-C)
        with contextlib.suppress(OSError):
            (sweep.submitit_dir / "%j").rmdir()
    return submission


def _submit_tasks(
    sweep: Sweep,
    manifest: SweepManifest,
    profile: Profile,
    submission: Submission,
    only: dict[int, list[CaseSpec]] | None,
    on_progress: Callable[[str], None],
) -> None:
    todo = [t for t in manifest.tasks if only is None or t.index in only]
    versions = list(dict.fromkeys(t.jax for t in todo))
    base = pyenvs.base_python(profile.environment.base_python)
    envs = pyenvs.VersionEnvs(Path(manifest.env_root), profile.environment.jax_extra,
                              requirements=tuple(manifest.requirements),
                              workloads=tuple(manifest.user_workloads))  # fmt: skip
    for version in versions:
        if version is not None:
            on_progress(f"environment for jax {version} in {manifest.env_root}")
            envs.python(version, base)
    exclusive = preflight.exclusive(profile)
    in_turn = profile.executor == "local" and exclusive
    array_size = (preflight.max_array_size() or 0) if profile.executor == "slurm" else 0
    sweep.save(manifest)
    sweep.records_dir.mkdir(parents=True, exist_ok=True)
    manifest.submissions.append(submission)
    for version in versions:
        group = [t for t in todo if t.jax == version]
        executor = make_executor(
            profile,
            sweep.submitit_dir / "%j",
            python=group[0].python,
            limit_min=group[0].time_limit_min,
            job_name=f"jaxbench-{manifest.sweep_id[-8:]}",
        )
        name = f"jax {version or 'of the profile'}"
        if in_turn:
            for task in group:
                before = _record_stamps(sweep, task)  # what this submission finds there
                (job,) = _submit_array(
                    executor, sweep, manifest, [task], only, submission, exclusive
                )
                on_progress(f"{name}: task {task.index} running (job {job.job_id}), in turn")
                prefix = f"task {task.index}: "
                runs = len(only[task.index]) if only is not None else len(task.cases)
                wait_reporting(job, lambda t=task, b=before: _recorded(sweep, t, b), runs,
                               lambda line, p=prefix: on_progress(p + line))  # fmt: skip
            continue
        chunk = array_size or len(group)  # indices 0 .. MaxArraySize - 1
        for start in range(0, len(group), chunk):
            part = group[start : start + chunk]
            jobs = _submit_array(executor, sweep, manifest, part, only, submission, exclusive)
            on_progress(f"{name}: {len(part)} task(s), jobs {_ids(jobs)}")


def _record_stamps(sweep: Sweep, task: TaskSpec) -> list[int | None]:
    """Per case of ``task``, its record file's modification stamp (ns), ``None`` without one."""
    stamps: list[int | None] = []
    for case in task.cases:
        try:
            stamps.append(sweep.record_path(case, task.jax).stat().st_mtime_ns)
        except OSError:  # no record (yet)
            stamps.append(None)
    return stamps


def _recorded(sweep: Sweep, task: TaskSpec, before: list[int | None]) -> int:
    """The cases of ``task`` whose record was written since ``before`` (:func:`_record_stamps`).

    A resumed task runs again cases that have a record (``failed``) already: only what this
    submission wrote counts. Stamps are compared with stamps, never with this machine's clock
    (a shared filesystem's may differ).
    """
    now = _record_stamps(sweep, task)
    return sum(1 for a, b in zip(now, before, strict=True) if a is not None and a != b)


def wait_reporting(
    job: Any,
    recorded: Callable[[], int],
    cases: int,
    say: Callable[[str], None],
    poll_s: float = 2.0,
) -> None:
    """Wait for a local task, saying each time a case is recorded, with the time left.

    ``3 of 8 case(s) recorded, 42 s so far, about 70 s left``: the time left is the mean time
    of the cases recorded so far in this wait, times the cases still to come (an estimate:
    cases differ); a last line says how many were recorded when the task ended, however it
    ended (``submit`` then reads how from its state).

    Args:
        job: A ``submitit`` job (``done()``, ``wait()``, ``cancel()``).
        recorded: How many of the task's cases have a record now.
        cases: The task's cases.
        say: Called with each line.
        poll_s: Seconds between looks.

    Raises:
        KeyboardInterrupt: Ctrl-C while waiting; the task was cancelled first (submitit sends
            its process SIGINT; the cases it recorded stay).
    """
    start, before = time.monotonic(), recorded()  # a resumed task's earlier records
    said = before
    try:
        while not job.done():
            n = recorded()
            if n > said:
                spent = time.monotonic() - start
                left = spent / (n - before) * (cases - n)
                tail = f", about {left:.0f} s left" if n < cases else ""
                say(f"{n} of {cases} case(s) recorded, {spent:.0f} s so far{tail}")
                said = n
            time.sleep(poll_s)
        job.wait()
    except KeyboardInterrupt:  # stop the task too, also where the signal reached this alone
        job.cancel(check=False)
        raise
    say(f"ended: {recorded()} of {cases} case(s) recorded, in {time.monotonic() - start:.0f} s")


def _submit_array(
    executor: submitit.Executor,
    sweep: Sweep,
    manifest: SweepManifest,
    tasks: list[TaskSpec],
    only: dict[int, list[CaseSpec]] | None,
    submission: Submission,
    exclusive: bool,
) -> list[submitit.Job[Any]]:
    """Submit ``tasks`` as one array (one job if one task); their job ids go in the manifest.

    A local task's controller (submitit's, a process of its own) writes its standard error to
    :data:`CONTROLLER_LOG` in the sweep's submitit folder, not to this terminal: Ctrl-C reaches
    it with the rest of the terminal's process group, and it dies with a ``KeyboardInterrupt``
    traceback of its own, after the one line this command says.
    """
    log = sweep.submitit_dir / CONTROLLER_LOG
    local = isinstance(executor, submitit.LocalExecutor)
    with _children_stderr(log) if local else contextlib.nullcontext(), executor.batch():
        jobs = [executor.submit(_shard_task(sweep, manifest, t, only, exclusive)) for t in tasks]
    for task, job in zip(tasks, jobs, strict=True):
        submission.job_ids[task.index] = job.job_id
    sweep.save(manifest)
    return jobs


#: Where the local executor's controllers write their standard error (in ``<sweep>/submitit``).
CONTROLLER_LOG = "local-controller.log"


@contextlib.contextmanager
def _children_stderr(path: Path) -> Iterator[None]:
    """Processes started inside inherit ``path`` (appended to) as their standard error.

    File descriptor 2 is pointed at ``path`` for the duration and put back after; what this
    process writes to ``sys.stderr`` meanwhile goes there too, so keep the block short.
    """
    sys.stderr.flush()
    path.parent.mkdir(parents=True, exist_ok=True)
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _shard_task(
    sweep: Sweep,
    manifest: SweepManifest,
    task: TaskSpec,
    only: dict[int, list[CaseSpec]] | None,
    exclusive: bool,
) -> ShardTask:
    cls = RequeueableShardTask if task.requeueable else ShardTask
    cases = list(only[task.index]) if only is not None else list(task.cases)
    profile = Profile.model_validate(manifest.profile)
    scheduler = profile.slurm if profile.executor == "slurm" else profile.local
    return cls(
        sweep_dir=str(sweep.root),
        task_index=task.index,
        cases=cases,
        jax_version=task.jax,
        backend=manifest.backend,
        timing=dict(manifest.timing),
        env=dict(manifest.worker_env) | _local_gpus(manifest, task),
        exclusive=exclusive,
        case_timeouts_s=case_timeouts_s(
            cases,
            manifest.timing,
            task.time_limit_min,
            profile.worker.startup_s,
            float(getattr(scheduler, "signal_delay_s", 0)),
        ),
    )


def _local_gpus(manifest: SweepManifest, task: TaskSpec) -> dict[str, str]:
    """``CUDA_VISIBLE_DEVICES`` for a concurrent local GPU task: its own share, in turn.

    submitit's ``LocalExecutor`` gives every job the same first ``gpus_per_node`` GPUs; tasks
    that start at once get ``visible_gpus[i*g : (i+1)*g]`` (wrapping round) instead.
    """
    profile = Profile.model_validate(manifest.profile)
    local = profile.local
    if local is None or not local.concurrent or not local.gpus_per_node or not local.visible_gpus:
        return {}
    gpus, per = local.visible_gpus, local.gpus_per_node
    mine = [gpus[(task.index * per + i) % len(gpus)] for i in range(per)]
    return {"CUDA_VISIBLE_DEVICES": ",".join(map(str, mine))}


def _ids(jobs: list[submitit.Job[Any]]) -> str:
    ids = [j.job_id for j in jobs]
    return ids[0] if len(ids) == 1 else f"{ids[0]} .. {ids[-1]}"


@dataclass
class TaskStatus:
    """Where one task stands.

    Attributes:
        task: The task.
        job_id: Its latest job (``None``: never submitted).
        state: One of :data:`jobstate.STATES` (see :func:`jobstate.job_state`).
        detail: First line of the job's error, if any; and the first record file that does
            not load, if any.
        ok: Cases with an ``ok`` record.
        other: Cases with a record of another status.
        missing: Cases without a record, or with one that does not load.
        failed: Of ``other``, the cases recorded ``failed`` (the rest ``skipped``: a backend
            or a mesh the node lacks).
    """

    task: TaskSpec
    job_id: str | None
    state: str
    detail: str
    ok: int
    other: int
    missing: int
    failed: int = 0


def status(sweep: Sweep, manifest: SweepManifest) -> list[TaskStatus]:
    """The state of every task of the sweep, and its records so far."""
    jobs = manifest.latest_jobs()
    queued = jobstate.queued_states(jobs.values()) if manifest.executor == "slurm" else {}
    out = []
    for task in manifest.tasks:
        found = [sweep.record_of(c, task.jax) for c in task.cases]
        records = [r for r, _ in found]
        unreadable = [why for _, why in found if why]
        ok = sum(1 for r in records if r is not None and r.status == "ok")
        missing = sum(1 for r in records if r is None)
        job_id = jobs.get(task.index)
        state, detail = ("not submitted", "")
        if job_id is not None:
            state, detail = jobstate.job_state(
                sweep.submitit_dir, manifest.executor, job_id, queued
            )
        if unreadable:  # counted as missing (a resume runs them again), and named
            more = f" (+{len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
            detail = "; ".join(filter(None, [detail, f"unreadable: {unreadable[0]}{more}"]))
        other = len(records) - ok - missing
        failed = sum(1 for r in records if r is not None and r.status == "failed")
        out.append(TaskStatus(task, job_id, state, detail, ok, other, missing, failed))
    return out


def resume_plan(sweep: Sweep) -> tuple[SweepManifest, dict[int, list[CaseSpec]]]:
    """What ``--resume`` would submit: task index -> its cases without an ``ok`` record.

    Runs the same checks as :func:`plan` (results folder, partition, GPUs, time limit), and
    imports the workloads of the cases left whose task runs in the profile's own environment,
    as selecting them for a new sweep does.

    Raises:
        preflight.PreflightError: A check failed, or a task of the sweep is still pending or
            running (its cases would run twice).
        FileNotFoundError: Not a sweep folder.
        ValueError: Its ``sweep.json`` is not a valid manifest, or a workload does not import
            here (one line, naming ``--workload``).
    """
    manifest = sweep.load()
    profile = Profile.model_validate(manifest.profile)
    preflight.check_writable(sweep.root, "sweep folder")
    if profile.executor == "slurm":
        preflight.check_slurm(profile, max(t.time_limit_min for t in manifest.tasks))
    busy = [s for s in status(sweep, manifest) if s.state in ACTIVE]
    if busy:
        names = ", ".join(f"task {s.task.index} (job {s.job_id}, {s.state})" for s in busy)
        stop = "kill -INT <job id>" if profile.executor == "local" else "scancel <job id>"
        raise preflight.PreflightError(
            f"{names} still active: wait for it or stop it ({stop}), then resume"
        )
    only = {t.index: sweep.missing_cases(t) for t in manifest.tasks}
    only = {i: cases for i, cases in only.items() if cases}
    from jaxbench.workloads import get_workload  # imports JAX, which status never needs

    # the check a new submit makes: a workload this process cannot import (run from another
    # folder, say) fails in a task of the profile's own environment too
    for name in sorted({c.workload for t in manifest.tasks if t.jax is None
                        for c in only.get(t.index, [])}):  # fmt: skip
        get_workload(name)
    return manifest, only


def resume(sweep: Sweep, on_progress: Callable[[str], None] = lambda _: None) -> Submission | None:
    """Submit again only the cases without an ``ok`` record; ``None`` if none are left.

    Raises:
        As :func:`resume_plan`; and as :func:`submit`.
    """
    manifest, only = resume_plan(sweep)
    if not only:
        return None
    return submit(sweep, manifest, only=only, on_progress=on_progress)


def wait(sweep: Sweep, poll_s: float = 5.0, timeout_s: float | None = None) -> list[TaskStatus]:
    """Poll :func:`status` until no task is pending or running.

    Raises:
        TimeoutError: ``timeout_s`` passed first.
    """
    start = time.monotonic()
    while True:
        states = status(sweep, sweep.load())
        if not any(s.state in ACTIVE for s in states):
            return states
        if timeout_s is not None and time.monotonic() - start > timeout_s:
            raise TimeoutError(f"sweep {sweep.root.name} still running after {timeout_s:.0f} s")
        time.sleep(poll_s)
