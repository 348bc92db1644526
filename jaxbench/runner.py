"""Run a selection of cases: prepare, time, and write one record per case.

A case that fails (gate, error, absent backend) is recorded with its reason and the run goes on;
each record is on disk before the next case starts.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxbench import env as env_mod
from jaxbench.cases import Case, check_backend, resolve_device
from jaxbench.measure.cache import cache_settings
from jaxbench.measure.gpu import GpuWatch, device_facts
from jaxbench.measure.harness import (
    TimingConfig,
    device_bytes_in_use,
    device_peak_bytes,
    reset_host_peak,
)
from jaxbench.prepared import PreparedCase, prepare
from jaxbench.store import Appender, Env, Record, Trace, new_run_id, save_programs, save_trace
from jaxbench.store.record import error_text
from jaxbench.workloads import GateFailure, NotApplicable, get_workload
from jaxbench.workloads.source import source_of, user_workload_names


def case_env(
    device: Any,
    backend: str,
    timing: TimingConfig,
    sweep: dict[str, Any] | None = None,
    workload: str | None = None,
) -> Env:
    """A record's ``env``: :func:`jaxbench.env.collect` of ``device`` and what the run was given.

    ``timing`` (:meth:`TimingConfig.recorded`), ``requested_backend``, ``sweep`` when given,
    on an NVIDIA GPU ``gpu`` (:func:`jaxbench.measure.gpu.device_facts`), and for a user
    ``workload`` the code behind it, ``workload_source``
    (:func:`jaxbench.workloads.source.source_of`).
    """
    gpu = {"gpu": device_facts(device)} if device is not None else {}
    placement = {"sweep": sweep} if sweep is not None else {}
    given = {"timing": dict(timing.recorded()), "requested_backend": backend} | placement | gpu
    if workload is not None and user_workload_names([workload]):
        given["workload_source"] = source_of(workload).model_dump()
    return Env.model_validate(env_mod.collect(device) | given)


def _base(case: Case, run_id: str, compilation_cache: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "benchmark": get_workload(case.workload).benchmark(case.params),
        "params": dict(case.params),
        "started_at": _dt.datetime.now(_dt.UTC).isoformat(),
        "compilation_cache": compilation_cache,
    }


def ended_record(
    case: Case, run_id: str, error: str, env: Env, compilation_cache: dict[str, Any]
) -> Record:
    """The ``failed`` record of a case that ended the process measuring it, or ran out of time.

    Built by the process that watched it (:mod:`jaxbench.supervised`), with the ``env`` and
    compilation cache settings its measuring process reported when it started.
    """
    return Record(**_base(case, run_id, compilation_cache), status="failed", error=error,
                  env=env)  # fmt: skip


def measure_case(
    case: Case,
    backend: str,
    timing: TimingConfig,
    run_id: str,
    programs_dir: str | Path | None = None,
    sweep: dict[str, Any] | None = None,
    on_phase: Callable[[str], None] | None = None,
    trace_calls: int = 0,
) -> Record:
    """Prepare (build, compile, gate, warm up) and time one case; never raises for its failure.

    With ``programs_dir``, a timed case's programs (every compiled target's jaxpr, StableHLO,
    optimized HLO, XLA's figures and flags) are saved there as one artifact,
    ``programs/<sha256>.json.gz`` (:func:`jaxbench.store.save_programs`), and the record names
    it (``programs``); pass the folder of the record's file. An artifact that cannot be
    written leaves ``programs`` empty and the record intact.

    The prepared case is not kept after (see :func:`jaxbench.prepared.prepare`), so a long run
    holds one case's arrays at a time; compiled programs and their compile figures stay cached.

    The record's ``env`` (:class:`jaxbench.store.Env`) is built here, and only here, for
    ``jaxbench run``, sweeps and the asv suite: :func:`jaxbench.env.collect`, ``requested_backend``
    (``backend``), ``sweep`` (the placement a sweep's worker gives, else absent), and
    ``timing``: the fields of ``timing`` (``budget_s``, ``min_samples``, ``max_samples``,
    ``warmup_calls``, and ``pipeline`` when pipelined; :meth:`TimingConfig.recorded`). A timed
    record has ``noise``, the indicators of its timed region (:mod:`jaxbench.measure.noise`);
    on an NVIDIA GPU also ``env.gpu`` and NVML's view before and after it
    (:mod:`jaxbench.measure.gpu`; ``env.gpu`` is ``None`` where NVML cannot say).

    With ``trace_calls``, after the samples (never inside the timed region) that many
    steady-state calls are traced with :func:`jax.profiler.trace`; the record's ``trace`` keeps
    the per-op table (:func:`jaxbench.measure.trace.op_table`) and names the trace, saved under
    ``programs_dir/traces/`` (:func:`jaxbench.store.save_trace`). A trace that fails or cannot
    be saved is said in ``trace.error``; the record's samples stand.

    ``on_phase`` is called with ``"preparing"`` (build, compile, gate, warm-up), ``"timing"``
    and, with ``trace_calls``, ``"tracing"`` as the case enters each, so a watcher can say
    where a case hung.

    Returns:
        A :class:`Record`: ``ok``; ``recompiled``; ``failed`` (gate or error, reason in
        ``error``); or ``skipped`` (not applicable, or backend absent).
    """

    def env(device: Any = None) -> Env:
        return case_env(device, backend, timing, sweep, case.workload)

    phase = on_phase or (lambda name: None)
    base = _base(case, run_id, cache_settings())
    try:
        device = resolve_device(backend)
    except RuntimeError as exc:
        return Record(**base, status="skipped", error=str(exc), env=env())
    base["host_peak_scope"] = "case" if reset_host_peak() else "process"
    peak_before = device_peak_bytes(device)
    base["device_bytes_in_use_before"] = device_bytes_in_use(device)
    try:
        phase("preparing")
        prepared = prepare(
            case.workload, case.params, backend, keep=False, warmup_calls=timing.warmup_calls
        )
        phase("timing")
        watch = GpuWatch.start(device)
        m = prepared.steady_state(timing)
        gpu_noise = watch.stop()
        if trace_calls:
            phase("tracing")
        trace = _trace(prepared, trace_calls, programs_dir) if trace_calls else None
    except NotApplicable as exc:
        return Record(**base, status="skipped", error=str(exc), env=env(device))
    except GateFailure as exc:  # what the failing comparison applied and found, as fields
        return Record(**base, status="failed", error=f"correctness gate: {exc}", env=env(device),
                      gate=exc.facts)  # fmt: skip
    except Exception as exc:  # a failing case must not stop the run
        error = error_text(exc, whole_to=sys.stderr, label=f"{case.label}: ")
        return Record(**base, status="failed", error=error, env=env(device))
    stats = prepared.stats
    base["compilation_cache"] |= {
        "cache_hits": stats.cache_hits,
        "cache_misses": stats.cache_misses,
        "compile_reused_in_process": stats.reused,
    }
    digest = None
    if programs_dir is not None:
        try:
            digest = save_programs(programs_dir, stats.programs)
        except (OSError, TypeError, ValueError):
            digest = None
    error = None
    if m.recompiled:
        error = (
            f"{m.compiles_timed} compiles and {m.traces_timed} traces inside the timed "
            f"region: samples are not steady state; {m.recompile_cause}"
        )
    return Record(
        **base,
        status="recompiled" if m.recompiled else "ok",
        error=error,
        samples_s=m.samples_s,
        lower_s=stats.lower_s,
        compile_s=stats.compile_s,
        first_call_s=prepared.warmup.first_call_s,
        compiles_setup=(
            prepared.warmup.compiles_setup + prepared.warmup.compiles_timed + m.compiles_setup
        ),
        compiles_timed=m.compiles_timed,
        traces_timed=m.traces_timed,
        flops=stats.flops,
        bytes_accessed=stats.bytes_accessed,
        device_peak_bytes=m.device_peak_bytes,
        device_peak_scope=_peak_scope(peak_before, m.device_peak_bytes),
        host_peak_rss_bytes=m.host_peak_rss_bytes,
        memory=stats.memory,
        gate=prepared.gate,
        metrics=prepared.metrics,
        noise=m.noise | gpu_noise,
        programs=digest,
        compile_phases_s=stats.phases_s,
        trace=trace,
        env=env(device),
    )


def _trace(prepared: PreparedCase, calls: int, folder: str | Path | None) -> Trace:
    """A trace of ``calls`` warmed calls of a case: its op table, saved under ``folder``."""
    from dataclasses import asdict

    from jaxbench.measure.trace import op_table, take_trace

    try:
        taken = take_trace(prepared.call_once, calls)
        ops = [asdict(row) for row in op_table(taken.xspace, calls, prepared.devices)]
    except (RuntimeError, ValueError) as exc:
        return Trace(calls=calls, error=f"no trace: {exc}")
    trace = Trace(calls=calls, bytes=len(taken.xspace), ops=ops, untraced_s=taken.untraced_s,
                  traced_s=taken.traced_s)  # fmt: skip
    if folder is not None:
        try:
            trace.file = save_trace(folder, taken.xspace)
        except (OSError, ValueError) as exc:
            trace.error = f"trace not saved: {getattr(exc, 'strerror', None) or exc}"
    return trace


def _peak_scope(before: int | None, after: int | None) -> str | None:
    """``case`` when the device peak rose during the case, ``process`` when it did not."""
    if after is None:
        return None
    return "case" if before is None or after > before else "process"


@dataclass
class RunResult:
    """Where a run wrote its records, and the records."""

    path: Path
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False
    #: Why the run stopped writing (``"<file>: <cause>"``, e.g. a full disk), else ``None``.
    write_error: str | None = None
    #: The file the run began writing, where it was removed or replaced as the run wrote it
    #: (its records were copied whole to :attr:`path`; :class:`~jaxbench.store.Appender`).
    moved_from: Path | None = None

    @property
    def failed(self) -> list[Record]:
        """Records with status ``failed``."""
        return [r for r in self.records if r.status == "failed"]


def run(
    cases: list[Case],
    out_dir: str | Path,
    backend: str = "default",
    timing: TimingConfig | None = None,
    on_case: Callable[[Case], None] | None = None,
    on_record: Callable[[Case, Record], None] | None = None,
    measure: Callable[[Case, str, Path], Record] | None = None,
    trace_calls: int = 0,
) -> RunResult:
    """Measure ``cases`` one after another, appending each record to a new file in ``out_dir``.

    Each timed case's programs go to ``out_dir/programs/`` (see :func:`measure_case`).
    ``measure(case, run_id, programs_dir)`` measures one case; default :func:`measure_case` in
    this process. ``jaxbench run`` passes :class:`jaxbench.supervised.Supervised`'s, which
    measures in a watched worker process, with a time limit, and survives its crashes.
    ``trace_calls`` is for the default ``measure`` (:func:`measure_case`'s).

    A backend that is not present gives one ``skipped`` record per case, not an error. Every
    record's ``env`` has ``requested_backend`` (:func:`measure_case`). A ``KeyboardInterrupt``
    ends the run early with ``interrupted`` set; the records written so far stay (a run that
    ended before its first record leaves no file). A record that
    cannot be written (a full disk) ends it with ``write_error`` set; the file keeps the
    records before it, whole (:class:`~jaxbench.store.Appender`). A file removed or replaced
    while the run writes it is copied to a new one (``path``; ``moved_from`` names the first).

    Raises:
        ValueError: Unknown backend name.
        OSError: ``out_dir`` cannot be created or written (before any case runs).
        jaxbench.interleave.WorkerError: From ``measure``: no process could be started to
            measure in (the records before it are in the file).
    """
    timing = timing or TimingConfig()
    check_backend(backend)
    run_id = new_run_id()
    path = Path(out_dir) / f"{run_id}.jsonl"
    result = RunResult(path)
    with Appender(path) as writer:
        try:
            for case in cases:
                if on_case:
                    on_case(case)
                if measure is None:
                    record = measure_case(case, backend, timing, run_id, path.parent,
                                          trace_calls=trace_calls)  # fmt: skip
                else:
                    record = measure(case, run_id, path.parent)
                try:
                    writer.write(record)
                except OSError as exc:
                    result.write_error = f"{writer.path}: {exc.strerror or exc}"
                    break
                result.records.append(record)
                if on_record:
                    on_record(case, record)
        except KeyboardInterrupt:
            result.interrupted = True
    result.path, result.moved_from = writer.path, writer.moved_from  # moved if it was taken
    if not result.records and result.path.exists() and result.path.stat().st_size == 0:
        result.path.unlink(missing_ok=True)  # interrupted before its first record
    return result
