"""Run a selection of cases: build, compile, gate, time, and write one record per case.

A case that fails (gate, error, absent backend) is recorded with its reason and the run goes on;
each record is on disk before the next case starts.
"""

from __future__ import annotations

import datetime as _dt
import itertools
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jaxbench import env as env_mod
from jaxbench.measure.cache import cache_settings
from jaxbench.measure.harness import TimingConfig, compile_targets, measure
from jaxbench.results import Record, ResultsWriter
from jaxbench.workloads import WORKLOADS, GateFailure, NotApplicable, get_workload

BACKENDS = ("default", "cpu", "gpu", "cuda", "rocm", "tpu")


@dataclass(frozen=True)
class Case:
    """One workload at one point of its grid."""

    workload: str
    params: Mapping[str, Any]

    @property
    def key(self) -> tuple[Any, ...]:
        """Hashable identity: workload plus sorted params."""
        return (self.workload, *sorted(self.params.items()))

    @property
    def label(self) -> str:
        """Human-readable ``workload k=v ...``."""
        return " ".join([self.workload, *(f"{k}={v}" for k, v in self.params.items())])


def select_cases(
    workloads: Iterable[str] | None = None,
    quick: bool = True,
    overrides: Mapping[str, list[Any]] | None = None,
) -> list[Case]:
    """The cases of the chosen workloads' grids, with some parameters replaced.

    Args:
        workloads: Workload names; ``None`` for all.
        quick: Start from the quick grid (about a minute on 2 CPU cores) or the full one.
        overrides: Parameter name -> values to use instead of the grid's, e.g.
            ``{"size": ["small"], "k": [64]}``; repeated values count once.

    Raises:
        ValueError: Unknown workload, a parameter no chosen workload has, or a bad value (the
            message names the parameter and the choices).
    """
    names = list(workloads) if workloads else list(WORKLOADS)
    chosen = [get_workload(n) for n in names]
    overrides = {k: list(dict.fromkeys(v)) for k, v in (overrides or {}).items() if v}
    for param in overrides:
        if not any(param in w.param_names for w in chosen):
            raise ValueError(f"no selected workload has a parameter {param!r}")
    cases = []
    for workload in chosen:
        grid = workload.grid(quick)
        grid.update({k: list(v) for k, v in overrides.items() if k in workload.param_names})
        for values in itertools.product(*(grid[p] for p in workload.param_names)):
            params = dict(zip(workload.param_names, values, strict=True))
            workload.validate(params)
            cases.append(Case(workload.name, params))
    return cases


def resolve_device(backend: str) -> Any:
    """The first device of ``backend`` (``"default"``: JAX's default device).

    Raises:
        ValueError: ``backend`` is not one of :data:`BACKENDS`.
        RuntimeError: That backend is not present here.
    """
    import jax

    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose from {', '.join(BACKENDS)}")
    if backend == "default":
        return jax.devices()[0]
    try:
        return jax.devices(backend)[0]
    except RuntimeError as exc:
        raise RuntimeError(f"backend {backend!r} is not present: {exc}") from None


def new_run_id() -> str:
    """``YYYYmmddTHHMMSSZ-<8 hex>``: sortable by time, unique across hosts."""
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{uuid.uuid4().hex[:8]}"


_GATES: dict[tuple[Any, ...], dict[str, Any] | GateFailure] = {}


def _gate_once(case: Case, check: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a case's gate once per process; later calls return (or re-raise) the first outcome."""
    if case.key not in _GATES:
        try:
            _GATES[case.key] = check()
        except GateFailure as exc:
            _GATES[case.key] = exc
    outcome = _GATES[case.key]
    if isinstance(outcome, GateFailure):
        raise outcome
    return outcome


def measure_case(case: Case, device: Any, timing: TimingConfig, run_id: str) -> Record:
    """Build, compile, gate and time one case on ``device``; never raises for a case's failure.

    Returns:
        A :class:`Record`: ``ok``; ``recompiled``; ``failed`` (gate or error, reason in
        ``error``); or ``skipped`` (not applicable).
    """
    import jax

    workload = get_workload(case.workload)
    base: dict[str, Any] = {
        "run_id": run_id,
        "benchmark": workload.benchmark(case.params),
        "params": dict(case.params),
        "started_at": _dt.datetime.now(_dt.UTC).isoformat(),
        "compilation_cache": cache_settings(),
    }
    try:
        with jax.default_device(device):
            built = workload.build(case.params)
            stats = compile_targets(built.targets)
            gate = _gate_once(case, built.check)
            m = measure(built.call, built.make_state(), timing, built.next_state, device)
    except NotApplicable as exc:
        return Record(**base, status="skipped", error=str(exc), env=env_mod.collect(device))
    except GateFailure as exc:
        return Record(
            **base, status="failed", error=f"correctness gate: {exc}", env=env_mod.collect(device)
        )
    except Exception as exc:  # a failing case must not stop the run
        return Record(
            **base,
            status="failed",
            error=f"{type(exc).__name__}: {exc}",
            env=env_mod.collect(device),
        )
    base["compilation_cache"] |= {
        "cache_hits": stats.cache_hits,
        "cache_misses": stats.cache_misses,
        "compile_reused_in_process": stats.reused,
    }
    error = None
    if m.recompiled:
        error = (
            f"{m.compiles_timed} compiles and {m.traces_timed} traces inside the timed "
            "region: samples are not steady state"
        )
    return Record(
        **base,
        status="recompiled" if m.recompiled else "ok",
        error=error,
        samples_s=m.samples_s,
        lower_s=stats.lower_s,
        compile_s=stats.compile_s,
        first_call_s=m.first_call_s,
        compiles_setup=m.compiles_setup,
        compiles_timed=m.compiles_timed,
        traces_timed=m.traces_timed,
        flops=stats.flops,
        bytes_accessed=stats.bytes_accessed,
        device_peak_bytes=m.device_peak_bytes,
        host_peak_rss_bytes=m.host_peak_rss_bytes,
        memory=stats.memory,
        gate=gate,
        metrics=built.metrics,
        env=env_mod.collect(device),
    )


@dataclass
class RunResult:
    """Where a run wrote its records, and the records."""

    path: Path
    records: list[Record] = field(default_factory=list)
    interrupted: bool = False

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
) -> RunResult:
    """Measure ``cases`` one after another, appending each record to a new file in ``out_dir``.

    A backend that is not present gives one ``skipped`` record per case, not an error. Every
    record's ``env`` has ``requested_backend``. A ``KeyboardInterrupt`` ends the run early with
    ``interrupted`` set; the records written so far stay.

    Raises:
        ValueError: Unknown backend name.
        OSError: ``out_dir`` cannot be created or written (before any case runs).
    """
    import jax

    timing = timing or TimingConfig()
    run_id = new_run_id()
    path = Path(out_dir) / f"{run_id}.jsonl"
    result = RunResult(path)
    try:
        device = resolve_device(backend)
        absent = None
    except RuntimeError as exc:
        device, absent = jax.devices()[0], str(exc)
    with ResultsWriter(path) as writer:
        try:
            for case in cases:
                if on_case:
                    on_case(case)
                if absent:
                    record = Record(
                        run_id=run_id,
                        benchmark=get_workload(case.workload).benchmark(case.params),
                        params=dict(case.params),
                        status="skipped",
                        error=absent,
                        env=env_mod.collect(device),
                    )
                else:
                    record = measure_case(case, device, timing, run_id)
                record.env["requested_backend"] = backend
                writer.write(record)
                result.records.append(record)
                if on_record:
                    on_record(case, record)
        except KeyboardInterrupt:
            result.interrupted = True
    return result
