"""A persistent worker process for interleaved comparisons: one prepared case, timed in blocks.

Started by :class:`jaxbench.interleave.session.Worker` as ``python -m jaxbench.interleave.worker``
with any interpreter that has jaxbench installed (e.g. a venv of another JAX version). It reads
one JSON request per line on stdin and answers each with one JSON line:

- ``{"op": "prepare", "workload": ..., "params": {...}, "backend": ..., "warmup": N,
  "gated": [hash, ...]}``: build, compile, gate and warm the case
  (:func:`jaxbench.prepared.prepare`), answering the environment (:func:`jaxbench.env.collect`,
  with this process's ``process_id``), compile time and FLOP, ``programs_hash`` (the content
  hash of the compiled programs), ``gate_mode`` and ``compilation_cache_dir`` (the persistent
  compilation cache's folder, ``null`` when off). ``gated`` (optional) lists program hashes that
  already passed this case's full gate in an earlier worker of the same side: when
  ``programs_hash`` is one of them the op-by-op gate is skipped and only one call's output is
  checked to be finite (``gate_mode: "reused"``); otherwise the gate runs in full
  (``gate_mode: "run"``);
- ``{"op": "block", "calls": N}``: one untimed call (to refill caches the other worker may have
  evicted), then ``N`` timed calls, answering ``samples_s`` (seconds), the compiles and traces
  seen while timing, and ``noise``: the indicators of the block's timed calls
  (:mod:`jaxbench.measure.noise`: ``wall_s``, ``cpu_s``, ``cpu_share``, context switches, GC
  collections, load average, steal, usable CPUs). Blocks do not collect garbage first (a
  ``gc.collect`` costs 25-40 ms with JAX loaded; preparation did one); collections that happen
  inside a block are counted in its noise;
- ``{"op": "programs"}``: the prepared case's programs at each level (jaxpr, StableHLO,
  optimized HLO, XLA's cost and memory figures; :func:`jaxbench.explain.capture`), for
  ``jaxbench explain``;
- ``{"op": "trace", "calls": N}``: a profiler trace of ``N`` steady-state calls of the prepared
  case (after any timing, never inside it), answered as its per-op table
  (:func:`jaxbench.measure.trace.op_table`), the trace's size in bytes and the wall seconds
  per call untraced and traced (:class:`jaxbench.measure.trace.TakenTrace`), for ``jaxbench
  explain --trace``;
- ``{"op": "join", "coordinator": ..., "count": N, "index": i, "timeout_s": S}``: join a
  program over ``N`` JAX processes as process ``i`` (:func:`jaxbench.distributed.join`; before
  any other request, as JAX's backend must not have started), answering ``jax_processes``
  (:func:`jaxbench.distributed.facts`). It writes the phase ``joining`` first;
- ``{"op": "facts", "backend": ..., "timing": {...}, "compilation_cache": MODE,
  "cache_min_compile_time_s": S}``: for ``jaxbench run`` (:mod:`jaxbench.supervised`), set the
  persistent compilation cache (:func:`jaxbench.measure.configure_compilation_cache`) and
  answer the backend's ``platform`` (``null`` when absent), the ``env`` a record of this
  process carries (:func:`jaxbench.runner.case_env`) and the ``compilation_cache`` settings;
- ``{"op": "record", "workload": ..., "params": {...}, "backend": ..., "timing": {...},
  "run_id": ..., "programs_dir": ..., "trace_calls": N, "sweep": {...}}``: measure one case as
  ``jaxbench run`` and a sweep's task do (``sweep``: the task's placement, or absent)
  (:func:`jaxbench.runner.measure_case`) and answer its ``record``. While it runs, each phase
  it enters is written to stderr as a line ``PHASE_MARK + phase``, so the watcher can say
  where a case hung;
- ``{"op": "quit"}``.

Every answer has ``ok``; a failed request answers ``{"ok": false, "error": "..."}`` and the
worker stays up. Between requests it sleeps on stdin, so it never competes with the other
worker for the CPU while that one is timed.

The answers go to the original stdout; file descriptor 1 is pointed at stderr first, so
anything JAX or XLA prints cannot corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

from jaxbench.backends import JAX_PLATFORMS

#: How a ``record`` request marks the phase it enters on stderr (followed by the phase).
PHASE_MARK = "jaxbench-worker phase: "


def _timing(request: dict[str, Any]) -> Any:
    from jaxbench.measure.harness import TimingConfig

    return TimingConfig(**request["timing"])


class _Case:
    def __init__(self) -> None:
        self.prepared: Any = None

    def prepare(self, request: dict[str, Any]) -> dict[str, Any]:
        import jax

        from jaxbench import env
        from jaxbench.prepared import prepare
        from jaxbench.workloads.source import source_of, user_workload_names

        p = prepare(
            request["workload"],
            request["params"],
            request.get("backend", "default"),
            keep=False,
            warmup_calls=int(request.get("warmup", 10)),
            gated=frozenset(request.get("gated") or ()),
        )
        self.prepared = p
        facts = env.collect(p.device)
        if user_workload_names([request["workload"]]):  # the code this side measured
            facts["workload_source"] = source_of(request["workload"]).model_dump(mode="json")
        return {
            "env": facts,
            "benchmark": _benchmark(request["workload"], request["params"]),
            "compile_s": p.stats.compile_s,
            "lower_s": p.stats.lower_s,
            "flops": p.stats.flops,
            "gate": p.gate,
            "gate_mode": p.gate_mode,
            "programs_hash": p.programs_hash,
            "compilation_cache_dir": jax.config.jax_compilation_cache_dir,
            "warmup_compiles": p.warmup.compiles_setup,
        }

    def block(self, request: dict[str, Any]) -> dict[str, Any]:
        from jaxbench.measure.harness import TimingConfig

        if self.prepared is None:
            raise RuntimeError("block before prepare: send a prepare request first")
        calls = int(request["calls"])
        timing = TimingConfig(budget_s=0.0, min_samples=calls, max_samples=calls)
        m = self.prepared.steady_state(timing, collect_garbage=False)
        return {
            "samples_s": m.samples_s,
            "compiles_timed": m.compiles_timed,
            "traces_timed": m.traces_timed,
            "noise": m.noise,
        }

    def programs(self, request: dict[str, Any]) -> dict[str, Any]:
        if self.prepared is None:
            raise RuntimeError("programs before prepare: send a prepare request first")
        stats = self.prepared.stats
        return {"programs": [p | {"phases_s": stats.phases_s.get(p["name"], {})}
                             for p in stats.programs]}  # fmt: skip

    def trace(self, request: dict[str, Any]) -> dict[str, Any]:
        from dataclasses import asdict

        from jaxbench.measure.trace import op_table, take_trace

        if self.prepared is None:
            raise RuntimeError("trace before prepare: send a prepare request first")
        calls = int(request.get("calls", 5))
        taken = take_trace(self.prepared.call_once, calls)
        return {"ops": [asdict(r) for r in op_table(taken.xspace, calls, self.prepared.devices)],
                "bytes": len(taken.xspace), "untraced_s": taken.untraced_s,
                "traced_s": taken.traced_s}  # fmt: skip

    def join(self, request: dict[str, Any]) -> dict[str, Any]:
        from jaxbench.distributed import ProcessGroup, join

        print(f"{PHASE_MARK}joining", file=sys.stderr, flush=True)
        group = ProcessGroup(request["coordinator"], int(request["count"]),
                             int(request["index"]), int(request["timeout_s"]))  # fmt: skip
        return {"jax_processes": join(group)}

    def facts(self, request: dict[str, Any]) -> dict[str, Any]:
        from jaxbench.cases import resolve_device
        from jaxbench.measure.cache import cache_settings, configure_compilation_cache
        from jaxbench.runner import case_env

        configure_compilation_cache(request.get("compilation_cache", "off"),
                                    request.get("cache_min_compile_time_s"))  # fmt: skip
        try:
            device = resolve_device(request["backend"])
        except RuntimeError:
            device = None
        env = case_env(device, request["backend"], _timing(request))
        return {
            "platform": None if device is None else device.platform,
            "env": env.model_dump(mode="json"),
            "compilation_cache": cache_settings(),
        }

    def record(self, request: dict[str, Any]) -> dict[str, Any]:
        from jaxbench.cases import Case
        from jaxbench.runner import measure_case

        def phase(name: str) -> None:
            print(f"{PHASE_MARK}{name}", file=sys.stderr, flush=True)

        case = Case(request["workload"], request["params"])
        record = measure_case(case, request["backend"], _timing(request), request["run_id"],
                              request.get("programs_dir"), sweep=request.get("sweep"),
                              on_phase=phase,
                              trace_calls=int(request.get("trace_calls", 0)))  # fmt: skip
        return {"record": record.model_dump(mode="json")}


def _benchmark(workload: str, params: dict[str, Any]) -> str:
    from jaxbench.workloads import get_workload

    return get_workload(workload).benchmark(params)


OPS = ("prepare", "block", "programs", "trace", "join", "facts", "record")


def serve(requests: IO[str], answers: IO[str]) -> None:
    """Answer requests until ``quit`` or end of input (see the module docstring)."""
    case = _Case()
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            op = request["op"]
            if op == "quit":
                return
            if op not in OPS:
                raise ValueError(f"unknown op {op!r}; expected {', '.join(OPS)} or quit")
            answer = {"ok": True, **getattr(case, op)(request)}
        except Exception as exc:
            from jaxbench.store.record import error_text

            answer = {"ok": False, "error": error_text(exc, whole_to=sys.stderr)}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


def _ignore_signals() -> None:
    """Ignore the signals named by ``--ignore-signals SIGTERM,SIGUSR2`` (none without it).

    A sweep task's scheduler signals every process of the task (Slurm's ``scancel`` and time
    limit: SIGTERM, then SIGKILL; a pre-emption warning: SIGUSR2); the task's own process
    decides what they mean (:mod:`jaxbench.cluster.worker`), so the case it is measuring is
    not cut short and recorded as a crash. SIGKILL, and the end of the parent, still end it.
    """
    if "--ignore-signals" not in sys.argv:
        return
    import signal

    for name in sys.argv[sys.argv.index("--ignore-signals") + 1].split(","):
        signal.signal(getattr(signal, name), signal.SIG_IGN)


def _end_with_parent() -> None:
    """On Linux, be killed when the process that started this worker ends (``--parent PID``).

    A ``run`` or comparison that is killed (``kill -9``, a ``timeout``) then leaves no worker
    measuring on, holding a core or a GPU's memory: ``PR_SET_PDEATHSIG`` (prctl(2)) asks the
    kernel for SIGKILL when the parent ends. Elsewhere, or without ``--parent``, nothing.
    """
    if "--parent" not in sys.argv:
        return
    parent = int(sys.argv[sys.argv.index("--parent") + 1])
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):  # not Linux
        return
    if os.getppid() != parent:  # it ended before the request above
        os._exit(1)


def main() -> None:
    """Entry point: set ``JAX_PLATFORMS`` from ``--backend`` before JAX loads, then serve.

    JAX and the preparation code are imported before the first request is read, so a worker
    started beside another imports while the other prepares. After ``quit`` (or the end of
    input) the process ends with ``os._exit(0)``, once its answers and stderr are flushed and
    its ``fresh`` cache folder removed: no interpreter teardown.
    """
    _end_with_parent()
    _ignore_signals()
    backend = sys.argv[sys.argv.index("--backend") + 1] if "--backend" in sys.argv else None
    if backend in JAX_PLATFORMS:
        os.environ["JAX_PLATFORMS"] = JAX_PLATFORMS[backend]
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import jax  # noqa: F401

    import jaxbench.env
    import jaxbench.prepared  # noqa: F401
    from jaxbench.measure.cache import remove_fresh

    serve(sys.stdin, answers)
    # Everything is answered: end at once, without the interpreter's teardown of JAX (its
    # backends, thread pools and modules), which the session would otherwise wait for after
    # every pair. Only this process's own temporary cache folder needs removing.
    answers.flush()
    sys.stderr.flush()
    remove_fresh()
    os._exit(0)


if __name__ == "__main__":
    main()
