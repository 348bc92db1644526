"""``jaxbench run``'s cases measured in a watched worker process: time limits and crash isolation.

:class:`Supervised` keeps one :mod:`jaxbench.interleave.worker` process (the interpreter that
runs ``jaxbench``, with this process's environment and import path) and sends it one case at a
time (its ``record`` request: :func:`jaxbench.runner.measure_case` there, the same code as an
in-process run). This process writes the records (:func:`jaxbench.runner.run`), so a worker that
dies cannot cut a record short. A program over several JAX processes (``run --jax-processes``,
a Slurm job of several tasks) has one worker per process here, each joined to the program
before its backend starts (:mod:`jaxbench.distributed`), sent the same requests.

- A case that gives no record within ``case_timeout_s`` (preparation and timing together) is
  killed and recorded ``failed`` with ``timed out`` and the phase it was in (``preparing``:
  build, compile, gate, warm-up; ``timing``; ``tracing``).
- A case that ends its process (an XLA abort, a segfault, the OOM killer) is recorded ``failed``
  with the signal or exit code and the last lines of the process's stderr.
- Either way the next case runs in a fresh worker. The records already written are untouched.

Whatever the worker writes on stderr (warnings of JAX, XLA and the workloads) is passed on to
this process's stderr after each case. JAX starts its backend in the worker; in this process
only where a user factory makes arrays while cases are selected, and then without taking a
GPU's memory up front (:func:`spare_the_device`). A worker ends with this process, however this
one ends (:mod:`jaxbench.interleave.worker`, ``--parent``).
"""

from __future__ import annotations

import dataclasses
import os
import select
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jaxbench.interleave.worker import PHASE_MARK
from jaxbench.live_defaults import DEFAULT_CASE_TIMEOUT_S

if TYPE_CHECKING:  # imported where used
    from jaxbench.cases import Case
    from jaxbench.distributed import ProcessGroup
    from jaxbench.interleave.session import Worker, WorkerDied
    from jaxbench.measure.harness import TimingConfig
    from jaxbench.store import Record


#: The line Gloo writes as each process of a program meets the others (left out of stderr).
GLOO_CONNECTED = "[Gloo] Rank "
#: JAX's switch for taking most of a GPU's memory at its first use (``false``: as needed).
PREALLOCATE_VAR = "XLA_PYTHON_CLIENT_PREALLOCATE"
#: Seconds the workers may take to start (import JAX, join their peers, say their facts) when
#: the case time-out is shorter: starting is no case's, and a case time-out below it (``run
#: --case-timeout 0.3``) would end every run before its first case. A start that hangs longer
#: (a driver that never answers) still ends.
WORKER_START_TIMEOUT_S = 300.0


def spare_the_device() -> dict[str, str]:
    """This process's environment as it was, then no GPU memory preallocated by this process.

    Selecting cases calls user factories here (to check their parameters), and a factory may
    make arrays, which starts JAX's backend in this process; on a GPU that would take JAX's
    default share of the memory from the worker. Call before any case is selected; pass the
    returned environment to :class:`Supervised`, so the worker starts with the user's own
    settings. A setting the user made is kept.
    """
    before = dict(os.environ)
    os.environ.setdefault(PREALLOCATE_VAR, "false")
    return before


def with_import_path(environ: dict[str, str], path: list[str]) -> dict[str, str]:
    """``environ`` with ``PYTHONPATH`` led by ``path`` (this process's ``sys.path``).

    The worker then imports the same user workload modules this process found (a
    ``module:factory`` on a path added at run time, the current folder), as a ``spawn``-ed
    :mod:`multiprocessing` child does.
    """
    entries = [p for p in path if p] + [p for p in environ.get("PYTHONPATH", "").split(os.pathsep)
                                        if p]  # fmt: skip
    return {**environ, "PYTHONPATH": os.pathsep.join(dict.fromkeys(entries))}


class Supervised:
    """Measure cases in a watched worker process; use as a context manager.

    Args:
        backend: Backend name, as for :func:`jaxbench.runner.run`.
        timing: The timing of every case.
        case_timeout_s: Seconds a case may take (preparation and timing); ``None`` or 0: no limit.
        compilation_cache: ``--compilation-cache`` (``off``, ``fresh`` or a folder), set in each
            worker; ``fresh`` is a new folder per worker.
        cache_min_compile_time_s: ``--cache-min-compile-time``, or ``None``.
        on_stderr: Called with what the worker wrote on stderr, after each case (its phase
            lines left out); default: written to this process's stderr.
        trace_calls: Steady-state calls to trace after each case's samples (``--trace``;
            :func:`jaxbench.runner.measure_case`); 0: none.
        environ: The environment workers start from (:func:`spare_the_device`'s); default
            this process's.
        ignore_signals: Signals the workers ignore (a sweep task's:
            :class:`jaxbench.interleave.session.Worker`).
        groups: Measure each case as one program over several JAX processes: one worker per
            :class:`~jaxbench.distributed.ProcessGroup` given (all of them:
            :func:`jaxbench.distributed.local_groups`; this task's only, in a Slurm job of
            several tasks: :func:`jaxbench.distributed.from_slurm`), each joined before its
            backend starts. Every process then takes exactly ``timing.min_samples`` samples
            (the budget is set to 0), so all make the same calls. :meth:`measure` returns the
            first worker's record, ``failed`` if any process's was not ``ok``.

    Raises:
        jaxbench.interleave.WorkerError: A worker cannot be started, or dies before it has
            measured anything (from :meth:`platform` and :meth:`measure`).
    """

    def __init__(
        self,
        backend: str,
        timing: TimingConfig,
        case_timeout_s: float | None = DEFAULT_CASE_TIMEOUT_S,
        compilation_cache: str = "off",
        cache_min_compile_time_s: float | None = None,
        on_stderr: Callable[[str], None] | None = None,
        trace_calls: int = 0,
        environ: dict[str, str] | None = None,
        ignore_signals: tuple[str, ...] = (),
        groups: list[ProcessGroup] | tuple[ProcessGroup, ...] = (),
    ) -> None:
        self.backend = backend
        self.ignore_signals = ignore_signals
        self.timing = timing
        self.case_timeout_s = case_timeout_s or None
        self.cache = {"compilation_cache": compilation_cache,
                      "cache_min_compile_time_s": cache_min_compile_time_s}  # fmt: skip
        self.on_stderr = on_stderr or (lambda text: sys.stderr.write(text))
        self.trace_calls = trace_calls
        self.environ = environ
        self.groups = list(groups)
        if self.groups:  # every process must make the same calls: a fixed count of samples
            self.timing = dataclasses.replace(timing, budget_s=0.0)
        self._workers: list[Worker] = []
        self._facts: dict[str, Any] = {}
        self._offsets: list[int] = []
        self._failed = 0  # the worker whose answer was read last (the one that failed)
        self._case_limit = ""  # what set the time-out of the case being measured, if not ours

    def _start(self) -> Worker:
        """The worker that reports (process 0), started with any others and asked for facts."""
        from jaxbench.interleave.session import Worker

        if not self._workers:
            environ = with_import_path(dict(self.environ or os.environ), sys.path)
            # JAX_PLATFORMS stays as it is ("default"), as in an in-process run: a backend that
            # is not here gives skipped records, where naming it would stop JAX from starting.
            self._workers = [Worker(sys.executable, "default", timeout_s=self.case_timeout_s,
                                    environ=environ, ignore_signals=self.ignore_signals)
                             for _ in self.groups or [None]]  # fmt: skip
            self._offsets = [0] * len(self._workers)
            try:
                start = self.case_timeout_s and max(self.case_timeout_s, WORKER_START_TIMEOUT_S)
                if self.groups:
                    join = start and max(start, *(g.timeout_s + 60 for g in self.groups))
                    self._ask_all([{"op": "join", **g.as_request()} for g in self.groups],
                                  join, joining=True)  # fmt: skip
                request = {"op": "facts", "backend": self.backend, "timing": self._timing(),
                           **self.cache}  # fmt: skip
                self._facts = self._ask_all([request] * len(self._workers), start)[0]
            except BaseException:
                self._stop()
                raise
        return self._workers[0]

    def _ask_all(
        self, requests: list[dict[str, Any]], timeout_s: float | None, joining: bool = False
    ) -> list[Any]:
        """Send each worker its request, then read the answers as they come.

        ``timeout_s``: how long to wait for an answer (``None``: no limit).

        The workers of one program wait on each other, so a worker that dies is seen when it
        dies, not after the others (which may wait for it until JAX gives up on it).

        Raises:
            jaxbench.interleave.WorkerError: A worker answered an error, died, or none answered
                within ``timeout_s`` (the first still waited for is killed). Its index is
                :attr:`_failed`; while ``joining``, the message says which process did not meet
                the others.
        """
        from jaxbench.interleave.session import WorkerDied, WorkerError

        for worker, request in zip(self._workers, requests, strict=True):
            worker.send(**request)
        answers: dict[int, Any] = {}
        pending = dict(enumerate(self._workers))
        while pending:
            ready, _, _ = select.select([w.answer_fd() for w in pending.values()], [], [],
                                        timeout_s)  # fmt: skip
            index = next((i for i, w in pending.items() if w.answer_fd() in ready),
                         next(iter(pending)))  # fmt: skip
            self._failed = index
            try:
                answers[index] = pending.pop(index).answer(wait=bool(ready))
            except WorkerError as exc:
                if not joining:
                    raise
                group = self.groups[index]
                where = group.coordinator or "the coordinator JAX found from the Slurm step"
                limit = "--join-timeout" if group.coordinator else "the sweep's join time-out"
                # JAX ends a process whose peers do not all arrive with a fatal error and a
                # stack: its ending says enough. The one that gives up first is named; the one
                # that never arrived may be another.
                why = f"was {exc.how}" if isinstance(exc, WorkerDied) else f"failed: {exc}"
                raise WorkerError(f"the {group.count} JAX processes did not all meet at {where} "
                                  f"within {group.timeout_s} s ({limit}): process {group.index} "
                                  f"gave up and {why}") from None  # fmt: skip
        return [answers[i] for i in range(len(self._workers))]

    def _timing(self) -> dict[str, Any]:
        return dataclasses.asdict(self.timing)

    def platform(self) -> str | None:
        """The platform the worker's backend runs on (``cpu``, ``gpu``, ...); ``None`` if absent."""
        self._start()
        return self._facts["platform"]

    def measure(
        self,
        case: Case,
        run_id: str,
        programs_dir: Path | None,
        sweep: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> Record:
        """Measure ``case`` in the worker; a case that hangs or kills it is recorded ``failed``.

        ``programs_dir`` is where the case's programs and trace are saved (``None``: nowhere,
        for a process whose record is not kept). ``sweep`` is a sweep task's placement,
        recorded as ``env.sweep`` (:func:`jaxbench.runner.measure_case`). ``timeout_s``, where
        given, is this case's time-out (seconds) in place of ``case_timeout_s``: a sweep task
        gives each case its share of the task's time limit.
        """
        from jaxbench.interleave.session import WorkerDied
        from jaxbench.runner import ended_record
        from jaxbench.store import Env, Record

        self._start()
        self._case_limit = "" if timeout_s is None else " (the case's share of the task's limit)"
        if timeout_s is not None:
            self.case_timeout_s = timeout_s
            for worker in self._workers:
                worker.timeout_s = timeout_s
        folder = None if programs_dir is None else str(programs_dir)
        request = {"op": "record", "workload": case.workload, "params": dict(case.params),
                   "backend": self.backend, "timing": self._timing(), "run_id": run_id,
                   "programs_dir": folder, "sweep": sweep,
                   "trace_calls": self.trace_calls}  # fmt: skip
        # process 0 saves the programs and the trace its record names; the others save none
        others = [request | {"programs_dir": None}] * (len(self._workers) - 1)
        try:
            answers = self._ask_all([request, *others], self.case_timeout_s)
        except KeyboardInterrupt:  # the case is lost; the workers go at once, not after it
            for worker in self._workers:
                worker.kill()
            self._workers = []
            raise
        except WorkerDied as exc:
            error = self._ended(exc, self._last_phase())
            self._pass_stderr()
            self._stop(abandon=True)  # the other processes of its program cannot go on
            placed = {"sweep": sweep} if sweep is not None else {}
            return ended_record(case, run_id, error,
                                Env.model_validate(self._facts["env"] | placed),
                                self._facts["compilation_cache"])  # fmt: skip
        self._pass_stderr()
        records = [Record.model_validate(a["record"]) for a in answers]
        return _of_all_processes(records)

    def _ended(self, exc: WorkerDied, phase: str | None) -> str:
        where = f" while {phase}" if phase else ""
        lines = [ln for ln in exc.stderr_tail.split(" | ") if not ln.startswith(PHASE_MARK)]
        tail = " | ".join(lines) or "nothing on stderr"
        which = (f"JAX process {self._failed} of {len(self._workers)}: "
                 if len(self._workers) > 1 else "")  # fmt: skip
        if exc.timed_out:
            limit = self._case_limit or " (--case-timeout)"
            return (f"{which}timed out: no record within {self.case_timeout_s:g} s{limit}; "
                    f"killed{where}; last stderr: {tail}")  # fmt: skip
        return (f"{which}its process was {exc.how}{where} (the next case runs in a fresh one); "
                f"last stderr: {tail}")  # fmt: skip

    def _last_phase(self) -> str | None:
        worker = self._workers[self._failed]
        text, _ = worker.stderr_from(self._offsets[self._failed])
        marks = [ln[len(PHASE_MARK) :] for ln in text.splitlines() if ln.startswith(PHASE_MARK)]
        return marks[-1].strip() if marks else None

    def _pass_stderr(self) -> None:
        """Pass on what each worker wrote since the last time (phase and Gloo lines left out)."""
        for i, worker in enumerate(self._workers):
            text, self._offsets[i] = worker.stderr_from(self._offsets[i])
            kept = "".join(ln for ln in text.splitlines(keepends=True)
                           if not ln.startswith((PHASE_MARK, GLOO_CONNECTED)))  # fmt: skip
            if kept:
                self.on_stderr(kept)

    def _stop(self, abandon: bool = False) -> None:
        """Close the workers; ``abandon``: kill them first (they may be mid-request)."""
        for worker in self._workers:
            worker.kill() if abandon else worker.close()
        self._workers = []

    def __enter__(self) -> Supervised:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop()


def _of_all_processes(records: list[Record]) -> Record:
    """The first process's record; ``failed`` if another process's case was not ``ok``.

    The reason is that of the first such process, so nothing wrong is recorded ``ok``.
    """
    first, others = records[0], records[1:]
    bad = next((r for r in others if r.status != "ok"), None)
    if bad is None or first.status != "ok":
        return first
    index = records.index(bad)
    error = f"JAX process {index} of {len(records)}: {bad.status}: {bad.error}"
    return first.model_copy(update={"status": "failed", "samples_s": [], "error": error})
