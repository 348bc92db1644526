"""Drive pairs of worker processes: interleaved blocks (A B / B A per round) or back to back.

Each variant of a comparison (a JAX version in its own venv, or another build of a workload) runs
in a :mod:`jaxbench.interleave.worker` process. A comparison is made of several independent
**pairs** of fresh processes, since the process, not the call or the round, is the unit that
repeats (:mod:`jaxbench.inference.verdicts`). Within a pair, :func:`interleave_case` prepares both
workers, runs ``warmup_rounds`` untimed rounds, then ``rounds`` rounds of one block each, in an
order drawn afresh every round from a seeded generator; while one worker is timed the other
sleeps on its input. :func:`run_pairs` runs either design; its ``back_to_back`` mode is the
sequential design for contrast: per pair, the whole of the baseline in one process, then the
whole of the candidate in another.

Pairs come in batches (:class:`Schedule`): ``pairs`` first, then ``pairs_step`` more while some
case is still undecided, up to ``max_pairs`` or until a case has had ``max_time_s`` of pairs.
Each look reads a repeated confidence interval (:mod:`jaxbench.inference.sequential`), so
looking after every pair keeps the error rate: a large change stops after a few pairs, a small
one runs on towards the cap.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any, NoReturn

import numpy as np

from jaxbench.inference import verdicts
from jaxbench.inference.paired import MIN_ROUNDS
from jaxbench.interleave.verdict import estimate
from jaxbench.live_defaults import (
    DEFAULT_CALLS_PER_BLOCK,
    DEFAULT_MAX_PAIRS,
    DEFAULT_MAX_TIME_S,
    DEFAULT_PAIRS,
    DEFAULT_PAIRS_STEP,
    DEFAULT_ROUNDS,
    DEFAULT_WARMUP_CALLS,
    DEFAULT_WARMUP_ROUNDS,
)
from jaxbench.store import case_label
from jaxbench.store.live import CaseComparison, Mode, PairRun, Round, SideInfo, now
from jaxbench.store.record import Trace

if TYPE_CHECKING:  # imported where used
    from jaxbench.explain.ops import OpTable


class WorkerError(RuntimeError):
    """A worker failed a request; the message has its error."""


class WorkerDied(WorkerError):
    """A worker process ended or hung; the message names how, its request and case, and stderr.

    How: the signal that killed it (``killed by SIGKILL``) or its exit code. ``timed_out`` is
    true when it was killed for giving no answer in time; ``how`` is the ending alone
    (``killed by SIGABRT``, ``exited with code 1``, ``hung``) and ``stderr_tail`` its last lines.
    """

    def __init__(self, message: str, how: str = "", stderr_tail: str = "",
                 timed_out: bool = False) -> None:  # fmt: skip
        super().__init__(message)
        self.how = how
        self.stderr_tail = stderr_tail
        self.timed_out = timed_out


@dataclass(frozen=True)
class Variant:
    """One side of a comparison.

    Attributes:
        label: Name in tables and records, e.g. ``"0.11.2"`` or ``"small*1.05"``.
        python: Interpreter that runs the worker (must have jaxbench and JAX installed).
        params: Parameter overrides applied to every case for this side, e.g.
            ``{"size": "small*1.05"}``; empty for none.
    """

    label: str
    python: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Schedule:
    """How much to time.

    Attributes:
        pairs: Process pairs of the first batch (the first look).
        max_pairs: Most pairs in all; ``pairs`` alone when equal (one look). It is the
            information at fraction 1 of the error spending: fix it before the first pair.
        pairs_step: Pairs added per further look while a case is undecided.
        max_time_s: Seconds of pairs a case may take (the wall time of the pairs it ran in,
            preparation included) before it gets no more; ``None``: no limit. Stopping on
            time never raises the error rate (:mod:`jaxbench.inference.sequential`).
        rounds: Timed rounds per pair (one block per side each), at least
            :data:`jaxbench.inference.paired.MIN_ROUNDS`.
        calls_per_block: Timed calls per block; each block is preceded by one untimed call.
        warmup_rounds: Untimed rounds after preparation, before the first timed round.
        warmup_calls: Warm-up calls at preparation (:func:`jaxbench.prepared.prepare`).
        seed: Seed of the per-round order.
        trace_calls: Steady-state calls each worker of an interleaved pair traces after the
            pair's timed rounds (never inside them); 0: none. Each side's trace is kept in its
            :class:`~jaxbench.store.live.SideInfo`, one per pair: the unit of the op diff.
    """

    pairs: int = DEFAULT_PAIRS
    max_pairs: int = DEFAULT_MAX_PAIRS
    pairs_step: int = DEFAULT_PAIRS_STEP
    max_time_s: float | None = DEFAULT_MAX_TIME_S
    rounds: int = DEFAULT_ROUNDS
    calls_per_block: int = DEFAULT_CALLS_PER_BLOCK
    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    warmup_calls: int = DEFAULT_WARMUP_CALLS
    seed: int = 0
    trace_calls: int = 0
    looks: int = field(init=False)

    def __post_init__(self) -> None:
        if self.rounds < MIN_ROUNDS:
            raise ValueError(f"--rounds must be >= {MIN_ROUNDS}, got {self.rounds!r}")
        if self.pairs < 1:
            raise ValueError(f"--pairs must be >= 1, got {self.pairs!r}")
        if self.max_pairs < self.pairs:
            raise ValueError(
                f"--max-pairs ({self.max_pairs!r}) must be >= --pairs ({self.pairs!r})"
            )
        if self.pairs_step < 1:
            raise ValueError(f"--pairs-step must be >= 1, got {self.pairs_step!r}")
        if self.max_time_s is not None and not self.max_time_s > 0:
            raise ValueError(f"--max-time must be > 0 seconds, got {self.max_time_s!r}")
        if self.calls_per_block < 1:
            raise ValueError(f"--calls-per-block must be >= 1, got {self.calls_per_block!r}")
        for name in ("warmup_rounds", "warmup_calls", "trace_calls"):
            if getattr(self, name) < 0:
                option = "--" + name.replace("_", "-")
                raise ValueError(f"{option} must be >= 0, got {getattr(self, name)!r}")
        extra = self.max_pairs - self.pairs
        object.__setattr__(self, "looks", 1 + -(-extra // self.pairs_step))

    def batches(self) -> list[int]:
        """Pairs per look: ``[pairs, step, step, ..., rest]`` adding up to ``max_pairs``."""
        out, total = [self.pairs], self.pairs
        while total < self.max_pairs:
            out.append(min(self.pairs_step, self.max_pairs - total))
            total += out[-1]
        return out


#: The worker requests that begin a case (:mod:`jaxbench.interleave.worker`): a worker's
#: stderr tail in an error starts at the last of them.
CASE_OPS = ("prepare", "record")
#: Seconds a worker may take over one answer before it is taken for hung (a large case's compile
#: and gate on a CPU take minutes; an hour is far beyond any case of the grids).
WORKER_TIMEOUT_S = 3600.0


MEM_FRACTION_VARS = ("XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
"""The variable that caps the share of a GPU's memory JAX preallocates (default 75 %), by its
current name and the older one (JAX docs, "GPU memory allocation")."""
LIVE_MEM_FRACTION = "0.45"
"""Each of the two live workers of a pair may take 45 % of one GPU, so both fit beside the
driver's own memory; the CPU ignores it."""


CACHE_DIR_VAR = "JAX_COMPILATION_CACHE_DIR"
"""The variable that turns JAX's persistent compilation cache on; live workers start without it."""


def live_worker_environ(environ: dict[str, str]) -> dict[str, str]:
    """The environment a live worker starts with: ``environ`` plus a GPU memory fraction each.

    A fraction the user set (either name of :data:`MEM_FRACTION_VARS`) is kept as it is, and
    given under both names, so JAX releases that read either see it. :data:`CACHE_DIR_VAR` is
    left out: a persistent compilation cache shared by the two workers of a pair (and by every
    pair) would let one process's compiles serve the other's, so their preparations would
    depend on each other. Each worker answers its cache folder (``None`` when off) and the
    record keeps it (``SideInfo.compilation_cache_dir``).
    """
    given = next((environ[v] for v in MEM_FRACTION_VARS if environ.get(v)), LIVE_MEM_FRACTION)
    kept = {k: v for k, v in environ.items() if k != CACHE_DIR_VAR}
    return {**kept, **dict.fromkeys(MEM_FRACTION_VARS, given)}


class Worker:
    """A running :mod:`jaxbench.interleave.worker` process; use as a context manager.

    The two workers of a pair run at once, so each starts with its own share of a GPU's memory
    (:func:`live_worker_environ`), not JAX's default 75 % each.

    Args:
        python: Interpreter to start it with.
        backend: Backend name (:data:`jaxbench.backends.BACKENDS`), set before JAX loads.
        timeout_s: Seconds to wait for any one answer (preparing a case includes its compile
            and gate) before the worker is taken for hung, killed, and :class:`WorkerDied`
            raised; ``None`` waits for ever.
        environ: The worker's environment; default :func:`live_worker_environ` of this one (a
            pair's share of a GPU, no shared compilation cache). ``jaxbench run``'s lone
            worker passes its own.
        ignore_signals: Signal names (``"SIGTERM"``) the worker ignores: a sweep task's, whose
            scheduler signals every process of the task and lets the task decide
            (:mod:`jaxbench.cluster.worker`); the worker still ends with its parent.

    Raises:
        WorkerError: The interpreter cannot be started.
    """

    def __init__(
        self,
        python: str,
        backend: str,
        timeout_s: float | None = WORKER_TIMEOUT_S,
        environ: dict[str, str] | None = None,
        ignore_signals: tuple[str, ...] = (),
    ) -> None:
        self.timeout_s = timeout_s
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        cmd = [python, "-m", "jaxbench.interleave.worker", "--backend", backend,
               "--parent", str(os.getpid())]  # fmt: skip
        if ignore_signals:
            cmd += ["--ignore-signals", ",".join(ignore_signals)]
        if environ is None:
            environ = live_worker_environ(dict(os.environ))
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                text=True, env=environ,
            )  # fmt: skip
        except OSError as exc:
            raise WorkerError(f"cannot start a worker with {python}: {exc}") from exc
        self.python = python
        self._quit_sent = False
        self._case = ""
        self._op: str | None = None
        self._case_start = 0  # where on stderr the current case began (its first request)

    def request(self, **request: Any) -> dict[str, Any]:
        """Send one request and wait for its answer (:meth:`send`, then :meth:`answer`).

        Raises:
            WorkerError: The answer is ``ok: false``.
            WorkerDied: The process ended, or gave no answer within ``timeout_s`` (it is
                killed).
        """
        self.send(**request)
        return self.answer()

    def send(self, **request: Any) -> None:
        """Send one request without waiting; :meth:`answer` reads its answer.

        Raises:
            WorkerDied: The process has ended (its input is closed).
        """
        assert self._proc.stdin
        if request.get("op") in CASE_OPS:  # a new case: what an earlier one wrote is not its
            self._case = case_label(request["workload"], request["params"])
            self._case_start = os.fstat(self._stderr.fileno()).st_size
        self._op = request.get("op")
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self._died()

    def answer_fd(self) -> int:
        """The file descriptor its answers arrive on (to wait on several workers at once)."""
        assert self._proc.stdout
        return self._proc.stdout.fileno()

    def answer(self, wait: bool = True) -> dict[str, Any]:
        """Wait for the answer to the request :meth:`send` sent.

        Args:
            wait: Wait up to ``timeout_s``; ``False``: the caller has waited that long already,
                so no answer now means hung.

        Raises:
            WorkerError: The answer is ``ok: false``.
            WorkerDied: The process ended, or gave no answer within ``timeout_s`` (it is
                killed).
        """
        assert self._proc.stdout
        case = f", case {self._case}" if self._case else ""
        try:
            ready, _, _ = select.select([self._proc.stdout], [], [],
                                        self.timeout_s if wait else 0)  # fmt: skip
            if not ready:
                self._proc.kill()
                self._proc.wait()
                tail = self._stderr_tail()
                raise WorkerDied(
                    f"worker ({self.python}) gave no answer to {self._op!r} within "
                    f"{self.timeout_s:g} s; killed it{case}: {tail}",
                    how="hung", stderr_tail=tail, timed_out=True,
                )  # fmt: skip
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            self._died()
        answer = json.loads(line)
        if not answer.get("ok"):
            raise WorkerError(f"worker ({self.python}): {answer.get('error')}")
        return answer

    def _died(self) -> NoReturn:
        case = f", case {self._case}" if self._case else ""
        how, tail = self._end(), self._stderr_tail()
        raise WorkerDied(
            f"worker ({self.python}) {how} during {self._op!r}{case}: {tail}",
            how=how, stderr_tail=tail,
        )  # fmt: skip

    def _stderr_tail(self, lines: int = 8) -> str:
        """The last ``lines`` lines it wrote on stderr since the current case began."""
        text, _ = self.stderr_from(self._case_start)
        return " | ".join(text.strip().splitlines()[-lines:]) or "nothing on stderr"

    def stderr_from(self, offset: int) -> tuple[str, int]:
        """What the worker wrote on stderr from byte ``offset`` on, and the offset after it.

        Read with ``pread``: the file's position, which the worker's writes share, stays put.
        """
        fd = self._stderr.fileno()
        data = os.pread(fd, max(os.fstat(fd).st_size - offset, 0), offset)
        return data.decode(errors="replace"), offset + len(data)

    def _end(self) -> str:
        """How the process ended: ``killed by SIGKILL``, ``exited with code 1``.

        Its output closed first; the process is waited for (up to 5 s) for its status.
        """
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "closed its output but did not end"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exited with code {code}"

    def quit(self) -> None:
        """Ask the worker to quit, without waiting for it to end (once; :meth:`close` waits)."""
        proc = self._proc
        assert proc.stdin
        if self._quit_sent:
            return
        self._quit_sent = True
        try:
            if proc.poll() is None:
                proc.stdin.write('{"op": "quit"}\n')
                proc.stdin.flush()
        except OSError:
            pass

    def kill(self) -> None:
        """End the worker at once (SIGKILL) and reap it: for an interrupted command."""
        with contextlib.suppress(OSError):
            self._proc.kill()
        self.close()

    def close(self) -> None:
        """Ask the worker to quit, then make sure it is gone (a dead worker is just reaped)."""
        proc = self._proc
        assert proc.stdin and proc.stdout
        self.quit()
        for stream in (proc.stdin, proc.stdout):
            with contextlib.suppress(OSError):  # unflushed input to a process that is gone
                stream.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self._stderr.close()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Program hashes that passed the full gate, per side (0 baseline, 1 candidate) and case
#: (workload and that side's parameters as sorted JSON); kept over the pairs of a comparison.
Gated = dict[tuple[int, str, str], set[str]]


def _prepare_request(
    workload: str,
    params: dict[str, Any],
    backend: str,
    s: Schedule,
    gated: Gated | None,
    side: int,
) -> tuple[dict[str, Any], tuple[int, str, str]]:
    """The ``prepare`` request of one side, and its key in ``gated``."""
    key = (side, workload, json.dumps(params, sort_keys=True, default=str))
    known = sorted(gated.get(key, ())) if gated is not None else []
    request: dict[str, Any] = {"op": "prepare", "workload": workload, "params": params,
                               "backend": backend, "warmup": s.warmup_calls}  # fmt: skip
    if known:
        request["gated"] = known
    return request, key


def _note_gated(answer: dict[str, Any], gated: Gated | None, key: tuple[int, str, str]) -> None:
    """Add the hash of a program the worker gated in full to ``gated``."""
    digest = answer.get("programs_hash")
    if gated is not None and digest and answer.get("gate_mode") == "run":
        gated.setdefault(key, set()).add(digest)


def prepare_side(
    worker: Worker,
    workload: str,
    params: dict[str, Any],
    backend: str,
    s: Schedule,
    gated: Gated | None = None,
    side: int = 0,
) -> dict[str, Any]:
    """Have ``worker`` build, compile, gate and warm a case; returns its answer.

    With ``gated``, the worker is sent the hashes of this side and case that passed the full
    gate in earlier pairs (none in the first pair, so it always gates in full), and the hash
    of a program it gated in full is added for the pairs after.
    """
    request, key = _prepare_request(workload, params, backend, s, gated, side)
    answer = worker.request(**request)
    _note_gated(answer, gated, key)
    return answer


def prepare_pair(
    wa: Worker,
    wb: Worker,
    workload: str,
    params: tuple[dict[str, Any], dict[str, Any]],
    backend: str,
    s: Schedule,
    gated: Gated | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both sides of a pair prepare a case (:func:`prepare_side`); returns their answers.

    On the ``cpu`` backend both prepare at once: preparation is never timed (the timed rounds
    start after both answered and after the untimed warm-up rounds), and a CPU compile does
    not depend on the machine's load. On any other backend they prepare one after the other:
    a GPU compiler times candidate kernels while it compiles (autotuning), and the other
    side's work on the same device would change what it picks.

    Raises:
        WorkerError: A side's answer is ``ok: false`` (both answers are read first).
        WorkerDied: A worker ended or hung.
    """
    if backend != "cpu":
        return (prepare_side(wa, workload, params[0], backend, s, gated, 0),
                prepare_side(wb, workload, params[1], backend, s, gated, 1))  # fmt: skip
    requests = [_prepare_request(workload, p, backend, s, gated, side)
                for side, p in enumerate(params)]  # fmt: skip
    for worker, (request, _) in zip((wa, wb), requests, strict=True):
        worker.send(**request)
    answers: list[dict[str, Any]] = []
    error: WorkerError | None = None
    for worker, (_, key) in zip((wa, wb), requests, strict=True):
        try:
            answers.append(worker.answer())
        except WorkerDied:
            raise
        except WorkerError as exc:
            error = error or exc
            answers.append({})
            continue
        _note_gated(answers[-1], gated, key)
    if error is not None:
        raise error
    return answers[0], answers[1]


def timed_block(worker: Worker, calls: int) -> tuple[list[float], dict[str, Any], bool]:
    """One block: latencies (seconds), its noise indicators, and whether anything compiled."""
    answer = worker.request(op="block", calls=calls)
    recompiled = bool(answer["compiles_timed"] or answer["traces_timed"])
    return answer["samples_s"], answer.get("noise") or {}, recompiled


def side_info(variant: Variant, prepared: dict[str, Any], params: dict[str, Any]) -> SideInfo:
    """The :class:`SideInfo` of a side from its ``prepare`` answer."""
    env = prepared["env"]
    return SideInfo(
        label=variant.label,
        python=variant.python,
        params=params,
        benchmark=prepared["benchmark"],
        jax=env.get("jax"),
        jaxlib=env.get("jaxlib"),
        backend=env.get("backend"),
        device_kind=env.get("device_kind"),
        compile_s=prepared["compile_s"],
        flops=prepared["flops"],
        env=env,
        gate=prepared.get("gate_mode"),
        programs_hash=prepared.get("programs_hash"),
        compilation_cache_dir=prepared.get("compilation_cache_dir"),
    )


#: Called with every case's comparison so far after each pair (e.g. to save them at once, so
#: an interruption or a worker that dies later loses nothing already measured).
OnPair = Callable[[list[CaseComparison]], None]
Case = tuple[str, dict[str, Any]]
RunPair = Callable[[Variant, Variant, Sequence[Case], str, Schedule, int, np.random.Generator,
                    Gated], list[PairRun]]  # fmt: skip


def decided(
    comparison: CaseComparison, threshold: float, alpha: float, strict: bool = False
) -> bool:
    """True when a case needs no more pairs: it failed, or it is ``slower``, ``faster`` or ``same``.

    An ``unstable`` or ``inconclusive`` case goes on: more pairs may settle it or outlast the
    disturbance.
    """
    if comparison.status != "ok":
        return True
    return estimate(comparison, threshold, alpha, strict=strict).verdict in (
        "slower", "faster", "same")  # fmt: skip


def out_of_time(comparison: CaseComparison, limit: float | None) -> bool:
    """True when the comparison's pairs took ``limit`` seconds or more (``None``: no limit)."""
    spent = sum(p.seconds or 0.0 for p in comparison.pairs)
    return limit is not None and spent >= limit


def run_pairs(
    baseline: Variant,
    candidate: Variant,
    cases: Sequence[Case],
    backend: str = "default",
    schedule: Schedule | None = None,
    on_pair: OnPair | None = None,
    threshold: float = verdicts.DEFAULT_THRESHOLD,
    alpha: float = verdicts.DEFAULT_ALPHA,
    strict: bool = False,
    mode: Mode = "interleaved",
) -> list[CaseComparison]:
    """Compare two variants case by case over pairs of fresh worker processes.

    Each pair starts two fresh workers and runs every case still undecided on them; see
    :class:`Schedule` for how many pairs. ``mode`` is the design within a pair:

    - ``interleaved``: blocks strictly interleaved between the two workers
      (:func:`interleave_case`);
    - ``back_to_back``: the sequential design, all of the baseline in one process, then the
      candidate (:func:`run_side`: the same preparation, warm-up rounds and number of blocks,
      so the two designs differ only in when the calls happen). Blocks are stored by index as
      rounds, but the pairing means nothing: the processes are compared as independent
      (:meth:`CaseComparison.estimate`).

    The first pair gates every case in full on each side; a later worker whose compiled
    programs hash to ones that side already gated for that case skips the op-by-op gate
    (:func:`prepare_side`; the record says ``gate: reused`` with the hash).

    Args:
        baseline: Side A.
        candidate: Side B.
        cases: ``(workload, params)`` pairs; each side applies its ``params`` overrides.
        backend: Backend of both workers.
        schedule: Pairs, rounds and block sizes; default :class:`Schedule`.
        on_pair: Called after each pair (see :data:`OnPair`).
        threshold: Threshold of the verdict that decides whether a case needs more pairs.
        alpha: Its level (spent over the schedule's looks).
        strict: Decide by the minimum-effect rule.
        mode: ``interleaved`` or ``back_to_back``.

    Returns:
        One :class:`~jaxbench.store.CaseComparison` per case (of ``mode``); a case that fails
        to prepare or recompiles while timed is marked so with its error, gets no more pairs,
        and the others still run.

    Raises:
        WorkerError: A worker could not be started.
        WorkerDied: A worker ended (every case after it would fail the same way).
    """
    run_pair: RunPair = {"interleaved": _interleaved_pair, "back_to_back": _back_to_back_pair}[mode]
    s = schedule or Schedule()
    rng = np.random.default_rng(s.seed)
    out = [CaseComparison.start(mode, w, p, s) for w, p in cases]
    gated: Gated = {}
    index = 0
    for batch in s.batches():
        active = [i for i, c in enumerate(out)
                  if not (index and decided(c, threshold, alpha, strict))
                  and not out_of_time(c, s.max_time_s)]  # fmt: skip
        if not active:
            break
        for _ in range(batch):
            todo = [cases[i] for i in active]
            start = time.monotonic()
            runs = run_pair(baseline, candidate, todo, backend, s, index, rng, gated)
            seconds = time.monotonic() - start
            for i, run in zip(active, runs, strict=True):
                out[i] = out[i].with_pair(run.model_copy(update={"seconds": seconds}))
            index += 1
            if on_pair:
                on_pair(out)
            active = [i for i in active if out[i].status == "ok"
                      and not out_of_time(out[i], s.max_time_s)]  # fmt: skip
            if not active:
                break
    return out


def _interleaved_pair(
    a: Variant,
    b: Variant,
    cases: Sequence[Case],
    backend: str,
    s: Schedule,
    index: int,
    rng: np.random.Generator,
    gated: Gated | None = None,
) -> list[PairRun]:
    with Worker(a.python, backend) as wa, Worker(b.python, backend) as wb:
        try:
            return [interleave_case(wa, wb, a, b, w, p, backend, s, rng, index, gated)
                    for w, p in cases]  # fmt: skip
        finally:  # both end at once, not one after the other
            wa.quit()
            wb.quit()


def interleave_case(
    wa: Worker,
    wb: Worker,
    a: Variant,
    b: Variant,
    workload: str,
    params: dict[str, Any],
    backend: str,
    s: Schedule,
    rng: np.random.Generator,
    index: int = 0,
    gated: Gated | None = None,
) -> PairRun:
    """One case on one pair of workers that are already running.

    Both workers prepare the case (each with its variant's overrides; ``gated`` as
    :func:`prepare_side`; at once on the CPU, :func:`prepare_pair`), run ``s.warmup_rounds``
    untimed rounds, then ``s.rounds`` timed
    rounds in an order drawn from ``rng``.
    """
    pa, pb = params | a.params, params | b.params
    run = PairRun(index=index, started_at=now())
    try:
        ready = prepare_pair(wa, wb, workload, (pa, pb), backend, s, gated)
        sides = (side_info(a, ready[0], pa), side_info(b, ready[1], pb))
    except WorkerDied:
        raise
    except WorkerError as exc:
        return run.model_copy(update={"status": "failed", "error": str(exc)})
    run = run.model_copy(update={"baseline": sides[0], "candidate": sides[1]})
    workers = (wa, wb)
    rounds: list[Round] = []
    for r in range(s.warmup_rounds + s.rounds):
        order = rng.permutation(2)
        blocks: list[tuple[list[float], dict[str, Any]]] = [([], {}), ([], {})]
        for i in order:
            samples, noise, recompiled = timed_block(workers[i], s.calls_per_block)
            if recompiled:
                error = f"{sides[i].label}: a compile or trace inside the timed block"
                return run.model_copy(update={"status": "recompiled", "error": error})
            blocks[i] = (samples, noise)
        if r >= s.warmup_rounds:
            rounds.append(
                Round(
                    order="AB" if order[0] == 0 else "BA",
                    baseline_s=blocks[0][0],
                    candidate_s=blocks[1][0],
                    baseline_noise=blocks[0][1],
                    candidate_noise=blocks[1][1],
                )
            )
    if s.trace_calls:  # after the timed rounds, one side at a time
        traced = [side_trace(w, s.trace_calls) for w in workers]
        run = run.model_copy(update={
            "baseline": sides[0].model_copy(update={"trace": traced[0]}),
            "candidate": sides[1].model_copy(update={"trace": traced[1]})})  # fmt: skip
    return run.model_copy(update={"rounds": rounds})


def side_trace(worker: Worker, calls: int) -> Trace:
    """A trace of ``calls`` steady-state calls of the case ``worker`` has prepared.

    A trace that cannot be taken is said in its ``error`` (the timings stand).

    Raises:
        WorkerDied: The worker ended while tracing.
    """
    try:
        answer = worker.request(op="trace", calls=calls)
    except WorkerDied:
        raise
    except WorkerError as exc:
        return Trace(calls=calls, error=f"no trace: {exc}")
    return Trace(calls=calls, bytes=answer["bytes"], ops=answer["ops"],
                 untraced_s=answer.get("untraced_s"), traced_s=answer.get("traced_s"))  # fmt: skip


def run_side(
    variant: Variant,
    cases: Sequence[Case],
    backend: str,
    s: Schedule,
    gated: Gated | None = None,
    side: int = 0,
) -> list[tuple[SideInfo | str, list[tuple[list[float], dict[str, Any]]]]]:
    """Every case of one variant in one fresh worker: prepare, warm-up rounds, timed blocks.

    ``gated`` and ``side`` as :func:`prepare_side`.

    Returns:
        Per case, ``(side info, timed blocks as (latencies, noise))``, or ``(error, [])`` when
        the case failed to prepare or something compiled while it was timed.

    Raises:
        WorkerError: The worker could not be started.
        WorkerDied: The worker ended.
    """
    out: list[tuple[SideInfo | str, list[tuple[list[float], dict[str, Any]]]]] = []
    with Worker(variant.python, backend) as w:
        for workload, params in cases:
            p = params | variant.params
            try:
                answer = prepare_side(w, workload, p, backend, s, gated, side)
                info = side_info(variant, answer, p)
                blocks = [
                    timed_block(w, s.calls_per_block) for _ in range(s.warmup_rounds + s.rounds)
                ]
            except WorkerDied:
                raise
            except WorkerError as exc:
                out.append((str(exc), []))
                continue
            if any(recompiled for *_, recompiled in blocks):
                out.append((f"{variant.label}: a compile or trace inside a timed block", []))
                continue
            out.append((info, [(x, n) for x, n, _ in blocks[s.warmup_rounds :]]))
    return out


def _back_to_back_pair(
    a: Variant,
    b: Variant,
    cases: Sequence[Case],
    backend: str,
    s: Schedule,
    index: int,
    rng: np.random.Generator,
    gated: Gated | None = None,
) -> list[PairRun]:
    del rng  # nothing to order: one side after the other
    runs = []
    sides = (run_side(v, cases, backend, s, gated, i) for i, v in enumerate((a, b)))
    for (ia, ba), (ib, bb) in zip(*sides, strict=True):
        run = PairRun(index=index, started_at=now())
        if isinstance(ia, str) or isinstance(ib, str):
            error = ia if isinstance(ia, str) else str(ib)
            runs.append(run.model_copy(update={"status": "failed", "error": error}))
            continue
        rounds = [
            Round(order="AB", baseline_s=x, candidate_s=y, baseline_noise=nx, candidate_noise=ny)
            for (x, nx), (y, ny) in zip(ba, bb, strict=True)
        ]
        runs.append(run.model_copy(update={"baseline": ia, "candidate": ib, "rounds": rounds}))
    return runs


#: Warm-up calls when a worker prepares a case only to capture its programs (nothing is timed).
CAPTURE_WARMUP_CALLS = 1


def capture_programs(
    python: str, workload: str, params: dict[str, Any], backend: str
) -> tuple[str, list[dict]]:
    """Prepare one case in a fresh worker of ``python``; its JAX version and compiled programs.

    Args:
        python: The interpreter of the worker (must have jaxbench and JAX).
        workload: The workload's name.
        params: The case's parameters.
        backend: ``cpu``, ``gpu`` or ``tpu``.

    Returns:
        ``(jax_version, programs)``: the worker's ``programs`` reply, one dict per compiled
        target with its program at each level and its compile phases (``worker.py``).

    Raises:
        WorkerError: The worker could not start, prepare or capture.
    """
    with Worker(python, backend) as worker:
        ready = worker.request(op="prepare", workload=workload, params=params, backend=backend,
                               warmup=CAPTURE_WARMUP_CALLS)  # fmt: skip
        return str(ready["env"].get("jax")), worker.request(op="programs")["programs"]


def capture_ops(
    python: str, workload: str, params: dict[str, Any], backend: str, calls: int
) -> OpTable:
    """Prepare one case in a fresh worker of ``python`` and trace ``calls`` warmed calls.

    Returns:
        The trace's per-op table and the profiler's cost
        (:class:`jaxbench.explain.ops.OpTable`): one process's figures, for
        :func:`jaxbench.explain.ops.op_report`.

    Raises:
        WorkerError: The worker could not start, prepare or trace.
    """
    from jaxbench.explain.ops import OpTable
    from jaxbench.measure.trace import OpTime

    with Worker(python, backend) as worker:
        worker.request(op="prepare", workload=workload, params=params, backend=backend,
                       warmup=CAPTURE_WARMUP_CALLS)  # fmt: skip
        answer = worker.request(op="trace", calls=calls)
        return OpTable([OpTime(**row) for row in answer["ops"]], answer.get("untraced_s"),
                       answer.get("traced_s"))  # fmt: skip
