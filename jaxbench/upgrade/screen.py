"""Screening: recorded runs of each side, several processes each, alternating in time; resumable.

Each process is one ``jaxbench run`` in the side's interpreter (its JAX version's venv), writing
its records and program artifacts into the side's folder. The unit of the recorded verdict is
the process, so a side needs several; running the sides in turn (A, B, A, B, ...) spreads a slow
change of the machine over both. What is on disk counts: a process that recorded every selected
case is complete, and a second review starts only the processes still missing.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jaxbench.store import case_label, load


class ScreenError(RuntimeError):
    """A ``jaxbench run`` process ended with a status other than 0 or 1 (message: its log)."""


@dataclass(frozen=True)
class Side:
    """One side of a review.

    Attributes:
        name: What the user named it (a JAX version).
        python: Its interpreter.
        folder: Where its records, artifacts and drift checks go.
    """

    name: str
    python: str
    folder: Path


def complete_processes(folder: Path, labels: set[str]) -> int:
    """How many processes under ``folder`` recorded every case of ``labels`` (any status)."""
    if not folder.is_dir():
        return 0
    seen: dict[str, set[str]] = {}
    for item in load([folder], kinds={"record"}).of("record"):
        rec = item.model
        process = rec.env.process_id or rec.run_id
        seen.setdefault(process, set()).add(case_label(rec.benchmark, rec.params))
    return sum(labels <= cases for cases in seen.values())


def other_code(folder: Path, digests: Mapping[str, str | None]) -> str | None:
    """One line where ``folder`` holds a user workload measured from other code, else ``None``.

    A review reuses what its folder holds (processes, live comparisons, drift); a model whose
    files changed since would be judged on its old code. Compared by
    :attr:`~jaxbench.store.record.WorkloadSource.digest` (records and live sides that have
    one; older ones, without, are not held to it).

    Args:
        folder: The review's folder.
        digests: User workload name -> the digest of its code now (``None``: unknown, not
            checked).
    """
    if not folder.is_dir() or not any(digests.values()):
        return None
    loaded = load([folder], kinds={"record", "live-comparison"})
    sources = [r.env.workload_source for r in loaded.models("record")]
    sources += [side.env.get("workload_source") for c in loaded.models("live-comparison")
                for side in (c.baseline, c.candidate) if side is not None]  # fmt: skip
    for source in sources:
        source = source.model_dump() if hasattr(source, "model_dump") else source or {}
        now = digests.get(source.get("workload") or "")
        if now and source.get("digest") and source["digest"] != now:
            return (f"{folder} holds runs of {source['workload']} measured from other code (its "
                    f"files' digest {source['digest'][:12]} then, {now[:12]} now): a review "
                    "reuses what its folder holds, so give another --out for this code (or "
                    "remove that folder)")  # fmt: skip
    return None


def run_logged(command: Sequence[str], log: Path) -> tuple[int, float]:
    """Run ``command`` with its output appended to ``log``; its exit status and wall seconds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with log.open("ab") as out:
        code = subprocess.run(list(command), stdout=out, stderr=subprocess.STDOUT, check=False)
    return code.returncode, time.perf_counter() - start


def run_process(side: Side, run_args: Sequence[str], log: Path) -> tuple[int, float]:
    """One ``jaxbench run`` process of ``side`` into its folder, output appended to ``log``.

    Returns:
        Its exit status (1: some case failed, its record says why) and wall time, seconds.
    """
    command = [side.python, "-m", "jaxbench", "run", *run_args, "-o", str(side.folder)]
    return run_logged(command, log)


def screen(
    sides: Sequence[Side],
    processes: int,
    labels: set[str],
    run_args: Sequence[str],
    logs: Path,
    on_process: Callable[[Side, int, float, bool], None] | None = None,
) -> dict[str, int]:
    """Bring every side to ``processes`` complete processes, the sides in turn each round.

    Args:
        sides: The sides, in the order each round runs them.
        processes: Complete processes wanted per side.
        labels: The selected cases' record labels (:attr:`jaxbench.cases.Case.label`).
        run_args: ``jaxbench run`` options selecting them (and the backend).
        logs: Folder of each side's ``run-<side>.log``.
        on_process: Called with ``(side, round, seconds, reused)`` per side and round.

    Returns:
        Side name -> complete processes on disk at the end.

    Raises:
        ScreenError: A process exited with a status other than 0 or 1, or completed nothing
            (the message names its log).
    """
    have = {side.name: complete_processes(side.folder, labels) for side in sides}
    for number in range(1, processes + 1):
        for side in sides:
            if have[side.name] >= number:
                if on_process is not None:
                    on_process(side, number, 0.0, True)
                continue
            log = logs / f"run-{side.name}.log"
            code, seconds = run_process(side, run_args, log)
            done = complete_processes(side.folder, labels)
            if code not in (0, 1) or done <= have[side.name]:
                raise ScreenError(f"jaxbench run under {side.name} exited {code} without "
                                  f"recording every case; see {log}")  # fmt: skip
            have[side.name] = done
            if on_process is not None:
                on_process(side, number, seconds, False)
    return have
