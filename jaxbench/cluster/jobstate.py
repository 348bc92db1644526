"""Where one submitted task stands, judged from its result file first.

A task that pickled a result is ``completed`` or ``failed``/``timed out`` by what submitit's
``job.exception()`` says of that result, never by the scheduler's state. Only a task without a
result is looked up in the scheduler: ``squeue`` for one still queued or running, then ``sacct``
for why it ended without one (cancelled, timed out, node failure). A task in neither, or one
``sacct`` still calls pending although ``squeue`` no longer lists it (an array task cancelled
while pending), is ``lost``.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import submitit

STATES = (
    "pending",
    "running",
    "completed",
    "failed",
    "timed out",
    "cancelled",
    "lost",
    "not submitted",
)
"""Every state :func:`job_state` gives (``not submitted``: no job yet)."""


RESULT_GRACE_S = 3.0
"""How long a task that left the queue gets for its result file to appear (network filesystems)."""


class _SweepSlurmJob(submitit.SlurmJob):  # type: ignore[type-arg]
    """A ``SlurmJob`` that waits 3 s, not 15 s, for a result file the task never wrote."""

    _results_timeout_s = 3


def queued_states(job_ids: Iterable[str]) -> dict[str, str]:
    """Job id (``123`` or ``123_4``) -> Slurm state, for the jobs ``squeue`` still lists."""
    ids = sorted(set(job_ids))
    if not ids:
        return {}
    try:
        proc = subprocess.run(
            ["squeue", "--noheader", "--array", "--format=%i|%T", f"--jobs={','.join(ids)}"],
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = (line.split("|", 1) for line in proc.stdout.splitlines() if "|" in line)
    return {job.strip(): state.strip() for job, state in lines}


def job_state(
    submitit_dir: Path, executor: str, job_id: str, queued: dict[str, str] | None = None
) -> tuple[str, str]:
    """State and a one-line detail of one task's job.

    Args:
        submitit_dir: The sweep's submitit folder.
        executor: ``"slurm"`` or ``"local"``.
        job_id: The job (for local jobs, the PID of submitit's controller process).
        queued: :func:`queued_states` for this sweep's jobs (asked here if ``None``).

    Returns:
        One of :data:`STATES` and a detail (error line, scheduler state), possibly empty.
    """
    folder = submitit_dir / "%j"
    if executor == "local":
        job: submitit.Job[Any] = submitit.LocalJob(folder, job_id)
        if job.paths.result_pickle.exists():
            return _from_result(job)
        if _pid_running(int(job_id)):
            return "running", ""
        return "lost", "ended without a result file (killed?)"
    job = _SweepSlurmJob(folder, job_id)
    if job.paths.result_pickle.exists():
        return _from_result(job)
    queued = queued_states([job_id]) if queued is None else queued
    if job_id in queued:
        state = queued[job_id]
        return ("pending" if state == "PENDING" else "running"), state
    if _appears(job.paths.result_pickle, RESULT_GRACE_S):  # written just before leaving squeue
        return _from_result(job)
    state = (job.get_info(mode="force").get("State") or "UNKNOWN").split()[0]
    if state == "CANCELLED":
        return "cancelled", "cancelled (scancel), no result"
    if state in ("TIMEOUT", "DEADLINE"):
        return "timed out", f"Slurm {state}, no result"
    if state in ("COMPLETED", "FAILED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "PREEMPTED"):
        return "failed", f"Slurm {state}, no result"
    # Not queued, yet sacct has no end state: an array task cancelled while pending has no
    # record of its own, and sacct may keep showing the array's pending remainder.
    return "lost", f"not in squeue; sacct says {state} (cancelled while pending?)"


def _appears(path: Path, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _from_result(job: submitit.Job[Any]) -> tuple[str, str]:
    error = job.exception()
    if error is None:
        return "completed", ""
    message = str(error)
    reason = re.search(r"Job not requeued because: (.+?)\.?$", message, re.MULTILINE)
    if reason:
        state = "timed out" if "timed-out" in reason.group(1) else "failed"
        return state, f"not requeued: {reason.group(1)}"
    # A traceback's last line names the exception, maybe with its module
    # ("subprocess.CalledProcessError: ..."), and a message after ": ".
    raised = re.findall(r"^((?:\w+\.)*\w+(?::\s.*|(?:Error|Exception|Interrupt)))$", message,
                        re.MULTILINE)  # fmt: skip
    return "failed", (raised[-1] if raised else message.strip().splitlines()[0])[:200]


def _pid_running(pid: int) -> bool:
    try:
        reaped, _ = os.waitpid(pid, os.WNOHANG)
        if reaped:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True
