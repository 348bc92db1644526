"""The run record (kind ``record``): one measured case, shared by the CLI, asv, Slurm and analysis.

A run appends one :class:`Record` per finished case to a JSON Lines file
(:class:`jaxbench.store.Appender`), so a run killed part-way keeps every case it finished; a sweep
writes one record file per case. Records are read back by the store's one loader
(:func:`jaxbench.store.load`). Results are JSON only: never pickled.

Schema versions: 1 (no ``kind`` field; still read), 2 (``kind: "record"``), 3 (``programs``),
4 (whose memory peaks are: ``host_peak_scope``, ``device_peak_scope``,
``device_bytes_in_use_before``) and 5 (``trace``: a per-op table of traced calls).
``env``, ``noise`` and ``metrics`` are the submodels :class:`Env` (with :class:`Host`, :class:`Git`
and :class:`SweepPlacement`), :class:`Noise` and :class:`Metrics`: the fields the analysis reads
are typed and optional (files of every version lack some of them), any other field is kept as it
was recorded (``extra="allow"``), and a submodel writes back exactly the fields it was given, so
they changed no file and no schema version.
"""

from __future__ import annotations

import datetime as _dt
import uuid
from typing import Annotated, Any, Literal, TextIO

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

SCHEMA_VERSION = 5

Status = Literal["ok", "failed", "skipped", "recompiled"]
Number = int | float
#: A timed latency or duration (a sample, a compile), seconds: finite and not negative (a
#: hand-edited or broken file is a problem of its line, not a record whose statistics go wrong).
Latency = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class _Recorded(BaseModel):
    """A nested part of a record: typed fields optional, others kept, written as given.

    Fields are read by attribute, extra ones too (``record.metrics.distinct_rows``;
    ``getattr(part, name, None)`` for one that may be absent). Only the fields that were set
    (given on reading or building, or assigned since) are written, so a record reads back and
    writes out unchanged, and an unrecorded field stays absent rather than ``null``.
    """

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if k in self.model_fields_set}


class Host(_Recorded):
    """Host facts (:func:`jaxbench.env.host`), the CPUs this process could use, their clock.

    ``governor`` and ``turbo``: :func:`jaxbench.env.cpu_frequency_policy` (``None`` where Linux
    does not expose them, as on most VMs).
    """

    hostname: str | None = None
    cpu_model: str | None = None
    cpu_count: int | None = None
    usable_cpus: int | None = None
    affinity: list[int] | None = None
    governor: str | None = None
    turbo: bool | None = None


class Git(_Recorded):
    """The jaxbench checkout that took the record."""

    commit: str | None = None
    dirty: bool | None = None


class WorkloadSource(_Recorded):
    """The code behind a user workload (:func:`jaxbench.workloads.source.source_of`).

    Attributes:
        workload: The ``-w`` name (``package.module:factory`` or an entry point's name).
        module: The module the factory is in.
        file: That module's file, absolute; ``None`` when it cannot be found.
        distribution: The installed distribution that provides the module; ``None`` for a
            module found on ``sys.path`` only (``PYTHONPATH``, the current folder).
        version: That distribution's version.
        project: The local folder it was installed from (PEP 610 ``direct_url.json``),
            absolute; ``None`` when installed from an index or without a distribution.
        editable: Whether it was installed in editable mode (``pip install -e``).
        commit: ``git rev-parse HEAD`` of the repository holding :attr:`file`; ``None``
            outside git.
        dirty: Whether that repository has uncommitted changes to tracked files; ``None``
            outside git.
        digest: SHA-256 (hex) of the Python files of the module's top-level package, in
            path order (outside a package, of its folder's): the code measured,
            where git cannot say (a folder outside git, a dirty tree). ``None`` when not
            found, and in records written before it was recorded.
    """

    workload: str | None = None
    module: str | None = None
    file: str | None = None
    distribution: str | None = None
    version: str | None = None
    project: str | None = None
    editable: bool | None = None
    commit: str | None = None
    dirty: bool | None = None
    digest: str | None = None


class SweepPlacement(_Recorded):
    """Where a sweep ran the record (:mod:`jaxbench.cluster.worker`).

    Attributes:
        task: The sweep task's index.
        exclusive: Whether the task had its machine to itself (``None``: not known).
        timing: The timing settings the task was given.
    """

    task: int | None = None
    exclusive: bool | None = None
    timing: dict[str, Any] | None = None


class JaxProcesses(_Recorded):
    """The JAX processes of a multi-process program (:mod:`jaxbench.distributed`).

    Attributes:
        count: How many processes ran the program; a condition, so records of different
            counts are never pooled.
        index: The process that wrote the record (0).
        coordinator: ``host:port`` of the coordinator the processes met at.
    """

    count: int
    index: int
    coordinator: str | None = None


class Env(_Recorded):
    """What can change a timing (:func:`jaxbench.env.collect`) and which process took it.

    Attributes:
        jax: JAX version: the axis of a version comparison (``None``: asv ``existing`` envs).
        jaxlib, python, backend, device_kind, device_count, platform_version: As recorded.
        env_vars: Timing environment variables (:func:`jaxbench.env.timing_env_vars`).
        jax_flags: JAX's flags.
        host: :class:`Host`.
        git: :class:`Git`.
        slurm: Slurm job facts (empty outside Slurm).
        process_id: The process (:func:`jaxbench.env.process_id`), the unit of the statistics.
        pid: The operating system's process id.
        timing: :meth:`jaxbench.measure.TimingConfig.recorded` (jaxbench runs).
        requested_backend: The backend asked for (``default``, ``cpu``, ...).
        sweep: :class:`SweepPlacement` for records of a sweep.
        asv: asv's environment name and date, for records converted from asv results.
        workload_source: :class:`WorkloadSource`, for a user workload.
        jax_processes: :class:`JaxProcesses`, for a program over several JAX processes (``None``:
            one process).
    """

    jax: str | None = None
    jaxlib: str | None = None
    python: str | None = None
    backend: str | None = None
    device_kind: str | None = None
    device_count: int | None = None
    platform_version: str | None = None
    env_vars: dict[str, Any] = Field(default_factory=dict)
    jax_flags: dict[str, Any] = Field(default_factory=dict)
    host: Host = Field(default_factory=Host)
    git: Git = Field(default_factory=Git)
    slurm: dict[str, Any] = Field(default_factory=dict)
    process_id: str | None = None
    pid: int | None = None
    timing: dict[str, Any] | None = None
    requested_backend: str | None = None
    sweep: SweepPlacement | None = None
    workload_source: WorkloadSource | None = None
    asv: dict[str, Any] | None = None
    jax_processes: JaxProcesses | None = None


class Noise(_Recorded):
    """Noise indicators of the timed region; empty where nothing was timed.

    The keys of :data:`jaxbench.measure.noise.NOISE_KEYS`, and on NVIDIA GPUs those of
    :class:`jaxbench.measure.gpu.GpuWatch`.

    Attributes:
        cpu_share: Process CPU time over wall time of the timed region.
        steal_share: Fraction of CPU time the hypervisor stole (``None``: too few ticks).
        gpu_throttled: A power, thermal or hardware slowdown at either end of the region.
        gpu_shared: Another process on the GPU at either end of the region.
    """

    cpu_share: Number | None = None
    steal_share: Number | None = None
    gpu_throttled: bool | None = None
    gpu_shared: bool | None = None


class Metrics(_Recorded):
    """Workload-specific figures; the ones the analysis reads are typed, the rest kept as given.

    Attributes:
        tokens: Tokens per timed call (transformer, train step).
        model_flops: The model's FLOP per timed call by formula (for MFU).
        held_bytes: Bytes a linearization holds (forward mode, loops).
        number: asv's calls per sample (asv records).
        benchmark_version: asv's hash of the benchmark's source (asv records).
        message_bytes: A collective's message size *S* in nccl-tests' sense, bytes
            (:mod:`jaxbench.workloads.collectives`).
        bus_factor: Its nccl-tests bus-bandwidth factor (``busbw = S / t * bus_factor``).
        mesh: The mesh a case ran on: ``axes`` (name -> size), ``device_ids``,
            ``device_kinds``, ``platform``.
    """

    tokens: Number | None = None
    model_flops: Number | None = None
    held_bytes: Number | None = None
    number: Number | None = None
    benchmark_version: str | None = None
    message_bytes: Number | None = None
    bus_factor: Number | None = None
    mesh: dict[str, Any] | None = None


class Trace(_Recorded):
    """A profiler trace of a case's steady state, taken after its samples (``run --trace``).

    Attributes:
        calls: Steady-state calls the trace covers.
        file: SHA-256 of the trace, saved as ``traces/<hash>.xplane.pb.gz`` beside the record's
            file (:mod:`jaxbench.store.traces`); ``None`` where it was not saved.
        bytes: Size of the trace (its XSpace), bytes before compression.
        ops: Its per-op table, the longest total first: one dict per op with ``name``,
            ``count``, ``total_s``, ``per_call_s`` (seconds, its own time: nested ops' time
            left out) and ``share`` (0-1) (:class:`jaxbench.measure.trace.OpTime`).
        error: Why no trace, or no saved file, where something failed (never fatal: the
            record's samples stand).
        untraced_s: Wall seconds per call of as many calls just before, untraced.
        traced_s: Wall seconds per call under the profiler: over ``untraced_s``, the profiler's
            cost (:class:`jaxbench.measure.trace.TakenTrace`).
    """

    calls: int | None = None
    file: str | None = None
    bytes: int | None = None
    ops: list[dict[str, Any]] | None = None
    error: str | None = None
    untraced_s: float | None = None
    traced_s: float | None = None


#: Nested fields the analysis needs, and what it does with a record that lacks one (named on
#: loading, :func:`jaxbench.analysis.frames.needed_problems`): ``env.jax`` is the axis of a
#: version comparison.
NEEDED = {
    "env.jax": "without a JAX version: kept, but comparisons by version leave them out "
    "(compare this file by path)",
}


def missing_needed(record: Record) -> list[str]:
    """The :data:`NEEDED` fields ``record`` lacks (``None`` or absent), as dotted names."""
    out = []
    for name in NEEDED:
        part, field = name.split(".")
        if getattr(getattr(record, part), field) is None:
            out.append(name)
    return out


class Record(BaseModel):
    """One measured case.

    Times are in seconds, sizes in bytes, work in FLOP. ``None`` means "not available on this
    backend" (for example device memory on CPU), never zero.

    Attributes:
        kind: ``record``: tells these lines from the store's other kinds.
        schema_version: Version of this schema (:data:`SCHEMA_VERSION`; 1 in older files).
        run_id: Identifier shared by every record of one run.
        benchmark: Workload and strategy name, e.g. ``"train_step"`` or ``"forward/vmap_jvp"``.
        params: Case parameters (size, dtype, K, ...), JSON scalars only.
        status: ``ok``; ``failed`` (gate or error, see ``error``); ``skipped`` (not applicable or
            backend absent, see ``error``); ``recompiled`` (a compile happened inside the timed
            region, so ``samples_s`` are not steady state).
        error: Reason for any status other than ``ok``.
        samples_s: Every timed per-call latency, in seconds (finite, >= 0), in call order.
        lower_s: Tracing plus lowering to StableHLO, seconds.
        compile_s: XLA compile of the lowered module, seconds.
        first_call_s: First call through the jitted callable, blocked, seconds.
        compiles_setup: XLA compiles seen from the start of the case to the end of warm-up.
        compiles_timed: XLA compiles seen inside the timed region (0 for a valid steady state).
        traces_timed: Jaxpr traces seen inside the timed region.
        flops: FLOP per timed call from XLA's cost analysis: of one device's program where
            the program is sharded over a mesh (``metrics.mesh``).
        bytes_accessed: Bytes accessed per timed call from XLA's cost analysis.
        device_peak_bytes: Device ``peak_bytes_in_use`` after the case, where the backend has it.
            It is the process's peak so far (JAX has no public reset): ``device_peak_scope``
            says whose it is.
        device_peak_scope: ``case`` when the peak rose during this case (it is this case's),
            ``process`` when it is an earlier case's (this case's own is at most it); ``None``
            without a device peak.
        device_bytes_in_use_before: Device ``bytes_in_use`` before the case was built.
        host_peak_rss_bytes: Peak resident set size of this process during the case (bytes).
        host_peak_scope: ``case`` where the peak was reset before the case (Linux
            ``/proc/self/clear_refs``), ``process`` where it is the process's peak so far.
        memory: ``compiled.memory_analysis()`` fields, bytes.
        compilation_cache: Persistent cache settings and whether the compile was a cache hit.
        gate: Correctness gate facts: tolerances used and the largest errors seen.
        metrics: Workload-specific figures (:class:`Metrics`, e.g. ``held_bytes``).
        noise: Noise indicators of the timed region (:class:`Noise`;
            :class:`jaxbench.measure.noise.NoiseProbe`):
            ``wall_s``, ``cpu_s`` (seconds), ``cpu_share`` (CPU over wall time; above 1 with
            several busy threads), ``ctx_involuntary``, ``ctx_voluntary``, ``gc_collections``,
            ``loadavg_start``, ``loadavg_end``, ``steal_share`` (fraction), ``usable_cpus``.
            Empty where nothing was timed, and in files written before it was recorded.
        programs: SHA-256 of the case's program artifact (jaxpr, StableHLO, optimized HLO,
            XLA's figures and flags of every program it compiled), stored in
            ``programs/<hash>.json.gz`` beside the record's file
            (:mod:`jaxbench.store.programs`); ``None`` where none was saved (schema < 3, a
            case that failed before compiling, asv results).
        trace: A profiler trace of a few steady-state calls, taken after the samples
            (``jaxbench run --trace``; :class:`Trace`); ``None`` where none was taken
            (schema < 5, or not asked for).
        compile_phases_s: Per compiled program (by target name), seconds of each compile
            phase JAX reports to ``jax.monitoring``: ``trace``, ``lower``,
            ``backend_compile`` (from the process's first compile of that program).
        env: :class:`Env`: versions, backend, device kind and host facts
            (:func:`jaxbench.env.collect`); the
            process (``process_id``, ``pid``) and, for jaxbench runs, the timing settings
            (``timing``: :class:`jaxbench.measure.TimingConfig` fields).
        started_at: ISO-8601 UTC time at which the case started.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["record"] = "record"
    schema_version: Literal[1, 2, 3, 4, 5] = SCHEMA_VERSION
    run_id: str
    benchmark: str
    params: dict[str, Any]
    status: Status
    error: str | None = None
    samples_s: list[Latency] = Field(default_factory=list)
    lower_s: Latency | None = None
    compile_s: Latency | None = None
    first_call_s: Latency | None = None
    compiles_setup: int | None = None
    compiles_timed: int | None = None
    traces_timed: int | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    device_peak_bytes: int | None = None
    device_peak_scope: Literal["case", "process"] | None = None
    device_bytes_in_use_before: int | None = None
    host_peak_rss_bytes: int | None = None
    host_peak_scope: Literal["case", "process"] | None = None
    memory: dict[str, int] = Field(default_factory=dict)
    compilation_cache: dict[str, Any] = Field(default_factory=dict)
    gate: dict[str, Any] = Field(default_factory=dict)
    metrics: Metrics = Field(default_factory=Metrics)
    noise: Noise = Field(default_factory=Noise)
    programs: str | None = None
    compile_phases_s: dict[str, dict[str, float]] = Field(default_factory=dict)
    trace: Trace | None = None
    env: Env
    started_at: str | None = None


def error_text(exc: BaseException, whole_to: TextIO | None = None, label: str = "") -> str:
    """One line for a record's ``error``: ``"<type>: <message>"``.

    ``whole_to``: where a message cut to one line is written whole (e.g. ``sys.stderr``),
    after ``label``.

    A message of several lines keeps its first non-blank line and, joined by ``" ... "``, the
    line that says what was raised: where the message wraps a Python traceback (as JAX's error
    from a failing host callback does), the first unindented line after the traceback's last
    frame (``ValueError: ...``), else its last non-blank line.
    """
    lines = [ln.rstrip() for ln in str(exc).splitlines() if ln.strip()]
    if len(lines) <= 1:
        return f"{type(exc).__name__}: {exc}"
    last = lines[-1].strip()
    headers = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if headers:
        raised = (ln for ln in lines[headers[-1] + 1 :] if not ln[:1].isspace())
        last = next(raised, last).strip()
    if whole_to is not None:
        print(f"{label}{type(exc).__name__}: {exc}", file=whole_to, flush=True)
    return f"{type(exc).__name__}: {lines[0].strip()} ... {last}"


def new_run_id() -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex>``: sortable by time, unique across hosts."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


#: Parameters a built-in family gained after records of it existed, with the value those
#: records were measured at (benchmark name, or a prefix ending in ``/``, -> name -> value). A
#: record without one reads as having it (:func:`with_implied`), so a case keeps its identity
#: across the change: a loop record made before ``width`` existed is ``width=64``; a train step
#: made before ``mesh`` existed is ``mesh=none``. ``tests/test_store.py`` checks every entry
#: against the family's grid.
IMPLIED_PARAMS: dict[str, dict[str, Any]] = {
    "loop/": {"width": 64},
    "train_step": {"mesh": "none"},
    "transformer/train_step": {"mesh": "none"},
}


def with_implied(benchmark: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` with the :data:`IMPLIED_PARAMS` of ``benchmark`` it lacks added."""
    implied: dict[str, Any] = {}
    for key, values in IMPLIED_PARAMS.items():
        if benchmark == key or (key.endswith("/") and benchmark.startswith(key)):
            implied |= values
    return implied | params if implied.keys() - params.keys() else params


def case_sort_key(label: str) -> tuple[tuple[int, int | str], ...]:
    """A case label's sort key: its runs of digits compare as numbers, the rest as text.

    So a sweep reads in order, ``trip=64``, ``trip=256``, ``trip=1024``, where sorting the text
    would put ``1024`` first.
    """
    import re

    parts = re.split(r"(\d+)", label)
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in parts if p)


def case_label(benchmark: str, params: dict[str, Any]) -> str:
    """``"<benchmark> name=value ..."`` with parameters sorted by name: a case's identity.

    A parameter the record predates reads as its implied value (:func:`with_implied`).
    """
    params = with_implied(benchmark, params)
    return " ".join([benchmark, *(f"{k}={params[k]}" for k in sorted(params))])
