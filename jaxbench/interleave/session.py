"""Drive two worker processes: interleaved blocks (A B / B A per round) or back to back.

Each variant of a comparison (a JAX version in its own venv, or another build of a workload) is a
persistent :mod:`jaxbench.interleave.worker` process. :func:`run_interleaved` prepares both, runs
``warmup_rounds`` untimed rounds, then ``rounds`` rounds of one block each, in an order drawn
afresh every round from a seeded generator; while one worker is timed the other sleeps on its
input. :func:`run_back_to_back` is the sequential design for contrast: the whole of the baseline
in one process, then the whole of the candidate in another, as two ``jaxbench run`` calls would.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from jaxbench.analysis.paired import MIN_ROUNDS
from jaxbench.interleave.result import CaseComparison, Round, SideInfo

DEFAULT_ROUNDS = 100
DEFAULT_CALLS_PER_BLOCK = 10
DEFAULT_WARMUP_ROUNDS = 3
DEFAULT_WARMUP_CALLS = 10


class WorkerError(RuntimeError):
    """A worker failed a request; the message has its error."""


class WorkerDied(WorkerError):
    """A worker process ended; the message has the end of its stderr or its exit code."""


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
        rounds: Timed rounds (one block per side each), at least
            :data:`jaxbench.analysis.paired.MIN_ROUNDS`.
        calls_per_block: Timed calls per block; each block is preceded by one untimed call.
        warmup_rounds: Untimed rounds after preparation, before the first timed round.
        warmup_calls: Warm-up calls at preparation (:func:`jaxbench.prepared.prepare`).
        seed: Seed of the per-round order.
    """

    rounds: int = DEFAULT_ROUNDS
    calls_per_block: int = DEFAULT_CALLS_PER_BLOCK
    warmup_rounds: int = DEFAULT_WARMUP_ROUNDS
    warmup_calls: int = DEFAULT_WARMUP_CALLS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.rounds < MIN_ROUNDS:
            raise ValueError(
                f"rounds must be >= {MIN_ROUNDS} (paired statistics need them), got {self.rounds!r}"
            )
        if self.calls_per_block < 1:
            raise ValueError(f"calls_per_block must be >= 1, got {self.calls_per_block!r}")
        for name in ("warmup_rounds", "warmup_calls"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)!r}")


class Worker:
    """A running :mod:`jaxbench.interleave.worker` process; use as a context manager.

    Args:
        python: Interpreter to start it with.
        backend: Backend name (:data:`jaxbench.backends.BACKENDS`), set before JAX loads.

    Raises:
        WorkerError: The interpreter cannot be started.
    """

    def __init__(self, python: str, backend: str) -> None:
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115 (closed in close())
        cmd = [python, "-m", "jaxbench.interleave.worker", "--backend", backend]
        try:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, text=True
            )
        except OSError as exc:
            raise WorkerError(f"cannot start a worker with {python}: {exc}") from exc
        self.python = python

    def request(self, **request: Any) -> dict[str, Any]:
        """Send one request and wait for its answer.

        Raises:
            WorkerError: The answer is ``ok: false``.
            WorkerDied: The process ended.
        """
        assert self._proc.stdin and self._proc.stdout
        try:
            self._proc.stdin.write(json.dumps(request) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except (BrokenPipeError, OSError):
            line = ""
        if not line:
            raise WorkerDied(f"worker ({self.python}) ended: {self._stderr_tail()}")
        answer = json.loads(line)
        if not answer.get("ok"):
            raise WorkerError(f"worker ({self.python}): {answer.get('error')}")
        return answer

    def _stderr_tail(self, lines: int = 8) -> str:
        self._stderr.seek(0)
        text = self._stderr.read().decode(errors="replace").strip().splitlines()
        return " | ".join(text[-lines:]) or f"exit code {self._proc.poll()}"

    def close(self) -> None:
        """Ask the worker to quit, then make sure it is gone (a dead worker is just reaped)."""
        proc = self._proc
        assert proc.stdin and proc.stdout
        try:
            if proc.poll() is None:
                proc.stdin.write('{"op": "quit"}\n')
                proc.stdin.flush()
        except OSError:
            pass
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


def prepare_side(
    worker: Worker, workload: str, params: dict[str, Any], backend: str, s: Schedule
) -> dict[str, Any]:
    """Have ``worker`` build, compile, gate and warm a case; returns its answer."""
    return worker.request(
        op="prepare", workload=workload, params=params, backend=backend, warmup=s.warmup_calls
    )


def timed_block(worker: Worker, calls: int) -> tuple[list[float], bool]:
    """One block: ``(latencies in seconds, whether anything compiled or traced meanwhile)``."""
    answer = worker.request(op="block", calls=calls)
    return answer["samples_s"], bool(answer["compiles_timed"] or answer["traces_timed"])


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
    )


OnCase = Callable[[CaseComparison], None]


def run_interleaved(
    baseline: Variant,
    candidate: Variant,
    cases: Sequence[tuple[str, dict[str, Any]]],
    backend: str = "default",
    schedule: Schedule | None = None,
    on_case: OnCase | None = None,
) -> list[CaseComparison]:
    """Compare two variants case by case, their blocks strictly interleaved.

    Args:
        baseline: Side A.
        candidate: Side B.
        cases: ``(workload, params)`` pairs; each side applies its ``params`` overrides.
        backend: Backend of both workers.
        schedule: Rounds and block sizes; default :class:`Schedule`.
        on_case: Called with each case as it finishes (e.g. to save it at once, so a worker
            that dies later loses nothing already measured).

    Returns:
        One :class:`~jaxbench.interleave.result.CaseComparison` per case (mode
        ``interleaved``); a case that fails to prepare or recompiles while timed is returned
        with that status and its error, and the others still run.

    Raises:
        WorkerError: A worker could not be started.
        WorkerDied: A worker ended (every case after it would fail the same way).
    """
    s = schedule or Schedule()
    rng = np.random.default_rng(s.seed)
    out = []
    with Worker(baseline.python, backend) as wa, Worker(candidate.python, backend) as wb:
        for workload, params in cases:
            out.append(
                interleave_case(wa, wb, baseline, candidate, workload, params, backend, s, rng)
            )
            if on_case:
                on_case(out[-1])
    return out


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
) -> CaseComparison:
    """One case of :func:`run_interleaved` on workers that are already running.

    Both workers prepare the case (each with its variant's overrides), run ``s.warmup_rounds``
    untimed rounds, then ``s.rounds`` timed rounds in an order drawn from ``rng``.
    """
    pa, pb = params | a.params, params | b.params
    base = CaseComparison.start("interleaved", workload, params, s)
    try:
        sides = (
            side_info(a, prepare_side(wa, workload, pa, backend, s), pa),
            side_info(b, prepare_side(wb, workload, pb, backend, s), pb),
        )
    except WorkerDied:
        raise
    except WorkerError as exc:
        return base.failed(str(exc))
    workers = (wa, wb)
    rounds: list[Round] = []
    for r in range(s.warmup_rounds + s.rounds):
        order = rng.permutation(2)
        blocks: list[list[float]] = [[], []]
        for i in order:
            samples, recompiled = timed_block(workers[i], s.calls_per_block)
            if recompiled:
                return base.with_sides(*sides).failed(
                    f"{sides[i].label}: a compile or trace inside the timed block",
                    status="recompiled",
                )
            blocks[i] = samples
        if r >= s.warmup_rounds:
            rounds.append(
                Round(
                    order="AB" if order[0] == 0 else "BA",
                    baseline_s=blocks[0],
                    candidate_s=blocks[1],
                )
            )
    return base.with_sides(*sides).finished(rounds)


def run_side(
    variant: Variant,
    cases: Sequence[tuple[str, dict[str, Any]]],
    backend: str,
    s: Schedule,
) -> list[tuple[SideInfo | str, list[list[float]]]]:
    """Every case of one variant in one fresh worker: prepare, warm-up rounds, timed blocks.

    Returns:
        Per case, ``(side info, timed blocks)``, or ``(error, [])`` when the case failed to
        prepare or something compiled while it was timed.

    Raises:
        WorkerError: The worker could not be started.
        WorkerDied: The worker ended.
    """
    out: list[tuple[SideInfo | str, list[list[float]]]] = []
    with Worker(variant.python, backend) as w:
        for workload, params in cases:
            p = params | variant.params
            try:
                info = side_info(variant, prepare_side(w, workload, p, backend, s), p)
                blocks = [
                    timed_block(w, s.calls_per_block) for _ in range(s.warmup_rounds + s.rounds)
                ]
            except WorkerDied:
                raise
            except WorkerError as exc:
                out.append((str(exc), []))
                continue
            if any(recompiled for _, recompiled in blocks):
                out.append((f"{variant.label}: a compile or trace inside a timed block", []))
                continue
            out.append((info, [b for b, _ in blocks[s.warmup_rounds :]]))
    return out


def run_back_to_back(
    baseline: Variant,
    candidate: Variant,
    cases: Sequence[tuple[str, dict[str, Any]]],
    backend: str = "default",
    schedule: Schedule | None = None,
    on_case: OnCase | None = None,
) -> list[CaseComparison]:
    """The sequential design: every case of the baseline in one process, then the candidate.

    Each side gets the same preparation, warm-up rounds and number of blocks as
    :func:`run_interleaved` (:func:`run_side`), so the two designs differ only in when the
    calls happen. Blocks are paired by index in the result, but the pairing means nothing:
    :meth:`CaseComparison.figures` compares them as independent samples. ``on_case`` is called
    once both sides are done.

    Args, returns and raises as :func:`run_interleaved` (mode ``back_to_back``).
    """
    s = schedule or Schedule()
    per_side = [run_side(v, cases, backend, s) for v in (baseline, candidate)]
    out = []
    for (workload, params), (ia, ba), (ib, bb) in zip(cases, *per_side, strict=True):
        base = CaseComparison.start("back_to_back", workload, params, s)
        if isinstance(ia, str) or isinstance(ib, str):
            out.append(base.failed(ia if isinstance(ia, str) else str(ib)))
        else:
            rounds = [
                Round(order="AB", baseline_s=x, candidate_s=y) for x, y in zip(ba, bb, strict=True)
            ]
            out.append(base.with_sides(ia, ib).finished(rounds))
        if on_case:
            on_case(out[-1])
    return out


def write_comparisons(path: str | Path, comparisons: Sequence[CaseComparison]) -> Path:
    """Write comparisons as JSON Lines (one :class:`CaseComparison` per line), atomically."""
    from jaxbench.interleave.result import write_jsonl

    return write_jsonl(Path(path), comparisons)


def append_comparison(path: str | Path, comparison: CaseComparison) -> None:
    """Append one comparison to a JSON Lines file and fsync it (a crash keeps earlier lines)."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(comparison.model_dump_json() + "\n")
        f.flush()
        os.fsync(f.fileno())
