"""The run record (kind ``record``): one measured case, shared by the CLI, asv, Slurm and analysis.

A run appends one :class:`Record` per finished case to a JSON Lines file
(:class:`jaxbench.store.Appender`), so a run killed part-way keeps every case it finished; a sweep
writes one record file per case. Records are read back by the store's one loader
(:func:`jaxbench.store.load`). Results are JSON only: never pickled.

Schema versions: 1 (no ``kind`` field; still read) and 2 (``kind: "record"``).
"""

from __future__ import annotations

import datetime as _dt
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 3

Status = Literal["ok", "failed", "skipped", "recompiled"]


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
        samples_s: Every timed per-call latency, in seconds, in call order.
        lower_s: Tracing plus lowering to StableHLO, seconds.
        compile_s: XLA compile of the lowered module, seconds.
        first_call_s: First call through the jitted callable, blocked, seconds.
        compiles_setup: XLA compiles seen from the start of the case to the end of warm-up.
        compiles_timed: XLA compiles seen inside the timed region (0 for a valid steady state).
        traces_timed: Jaxpr traces seen inside the timed region.
        flops: FLOP per timed call from XLA's cost analysis.
        bytes_accessed: Bytes accessed per timed call from XLA's cost analysis.
        device_peak_bytes: Device ``peak_bytes_in_use`` after the case, where the backend has it.
            It is the process's peak so far (JAX has no public reset), so a case's own peak is
            exact only for the largest case of a run, or with one case per process.
        host_peak_rss_bytes: Peak resident set size of this process after the case.
        memory: ``compiled.memory_analysis()`` fields, bytes.
        compilation_cache: Persistent cache settings and whether the compile was a cache hit.
        gate: Correctness gate facts: tolerances used and the largest errors seen.
        metrics: Workload-specific figures (e.g. ``linearization_held_bytes``).
        noise: Noise indicators of the timed region (:class:`jaxbench.measure.noise.NoiseProbe`):
            ``wall_s``, ``cpu_s`` (seconds), ``cpu_share`` (CPU over wall time; above 1 with
            several busy threads), ``ctx_involuntary``, ``ctx_voluntary``, ``gc_collections``,
            ``loadavg_start``, ``loadavg_end``, ``steal_share`` (fraction), ``usable_cpus``.
            Empty where nothing was timed, and in files written before it was recorded.
        programs: SHA-256 of the case's program artifact (jaxpr, StableHLO, optimized HLO,
            XLA's figures and flags of every program it compiled), stored in
            ``programs/<hash>.json.gz`` beside the record's file
            (:mod:`jaxbench.store.programs`); ``None`` where none was saved (schema < 3, a
            case that failed before compiling, asv results).
        compile_phases_s: Per compiled program (by target name), seconds of each compile
            phase JAX reports to ``jax.monitoring``: ``trace``, ``lower``,
            ``backend_compile`` (from the process's first compile of that program).
        env: Versions, backend, device kind and host facts (:func:`jaxbench.env.collect`); the
            process (``process_id``, ``pid``) and, for jaxbench runs, the timing settings
            (``timing``: :class:`jaxbench.measure.TimingConfig` fields).
        started_at: ISO-8601 UTC time at which the case started.
    """

    model_config = ConfigDict(extra="forbid")

    kind: Literal["record"] = "record"
    schema_version: Literal[1, 2, 3] = SCHEMA_VERSION
    run_id: str
    benchmark: str
    params: dict[str, Any]
    status: Status
    error: str | None = None
    samples_s: list[float] = Field(default_factory=list)
    lower_s: float | None = None
    compile_s: float | None = None
    first_call_s: float | None = None
    compiles_setup: int | None = None
    compiles_timed: int | None = None
    traces_timed: int | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    device_peak_bytes: int | None = None
    host_peak_rss_bytes: int | None = None
    memory: dict[str, int] = Field(default_factory=dict)
    compilation_cache: dict[str, Any] = Field(default_factory=dict)
    gate: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)
    noise: dict[str, Any] = Field(default_factory=dict)
    programs: str | None = None
    compile_phases_s: dict[str, dict[str, float]] = Field(default_factory=dict)
    env: dict[str, Any]
    started_at: str | None = None


def new_run_id() -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex>``: sortable by time, unique across hosts."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


def case_label(benchmark: str, params: dict[str, Any]) -> str:
    """``"<benchmark> name=value ..."`` with parameters sorted by name: a case's identity."""
    return " ".join([benchmark, *(f"{k}={params[k]}" for k in sorted(params))])
