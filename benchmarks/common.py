"""The asv suite, made from the registration: each family's declared suites become asv classes.

Every registered family (:data:`jaxbench.workloads.WORKLOADS`) declares its asv classes with
itself (:class:`jaxbench.workloads.base.AsvSuite`: name, swept and fixed parameters, kind,
method, the file they belong to). Each ``bench_*.py`` file is one line,
``globals().update(asv_classes(__name__))``, and ``bench_workloads.py`` holds every suite no
other file claims, so a new family needs no file here. Everything timed or measured comes from
:mod:`jaxbench`:

- ``time_*``/``peakmem_*``: :func:`jaxbench.prepared.prepare` returns a case built, compiled,
  gated and warmed once per process, so asv's ``setup()`` (re-run before every timed sample)
  never traces or compiles;
- ``track_*``: ``setup_cache`` (once per class and environment, in a fresh process) measures the
  class's grid with the core runner (:func:`jaxbench.runner.measure_case`: cold compile, gate,
  harness samples); each track reads one figure of one record.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from jaxbench.analysis.derived import record_figures
from jaxbench.cases import Case, resolve_device
from jaxbench.measure import TimingConfig
from jaxbench.prepared import PreparedCase, prepare
from jaxbench.runner import measure_case, new_run_id
from jaxbench.workloads import WORKLOADS, NotApplicable, get_workload
from jaxbench.workloads.base import AsvSuite

try:  # asv_runner >= 0.2: a skip raised inside a benchmark method (asv shows n/a)
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # imported outside asv
    SkipNotImplemented = NotImplementedError  # type: ignore[misc,assignment]

BACKENDS = ["cpu", "gpu"]
"""Backends every benchmark is parametrised over; an absent one is skipped (n/a)."""

TRACK_TIMING = TimingConfig(budget_s=0.2, min_samples=10, warmup_calls=3)
"""Steady-state timing behind the FLOP/s and MFU tracks."""


def skip_reason(backend: str, workload: str, params: Mapping[str, Any]) -> str | None:
    """Why a case cannot run here (backend absent, a GPU-sized case on a CPU), or ``None``."""
    try:
        device = resolve_device(backend)
    except RuntimeError as exc:
        return str(exc)
    if device.platform == "cpu" and get_workload(workload).meant_for(params) != "cpu":
        return f"size {params.get('size')!r} is meant for an accelerator, not the CPU"
    return None


def prepared(workload: str, params: Mapping[str, Any], backend: str) -> PreparedCase:
    """The built, compiled, gated and warmed case from the per-process cache.

    See :func:`jaxbench.prepared.prepare`.

    Raises:
        NotImplementedError: Backend absent, size not for this backend, or the case does not
            apply (asv shows n/a).
        jaxbench.workloads.GateFailure: The case failed its correctness gate: the benchmark
            fails, the others still run.
    """
    reason = skip_reason(backend, workload, params)
    if reason:
        raise NotImplementedError(reason)
    try:
        return prepare(workload, params, backend)
    except NotApplicable as exc:
        raise NotImplementedError(str(exc)) from None


def _params(cls: Any, values: tuple[Any, ...]) -> dict[str, Any]:
    """The family's parameters of one asv combination (``backend`` last, excluded)."""
    suite: AsvSuite = cls.suite
    merged = suite.fixed | dict(zip(cls.param_names[:-1], values[:-1], strict=True))
    return {p: merged[p] for p in get_workload(cls.workload).param_names}


class _Timed:
    """``time_*``/``peakmem_*`` of a suite: one call of the warmed case (no compile)."""

    workload: str
    suite: AsvSuite
    params: tuple[list[Any], ...]
    param_names: tuple[str, ...]
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0

    def setup(self, *params: Any) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        self.case = prepared(self.workload, _params(type(self), params), params[-1])

    def call(self, *params: Any) -> None:
        """One call of the case (seconds, or the process's peak resident bytes after it)."""
        self.case.call_once()


class _Costs:
    """``track_*`` methods of a ``costs`` suite.

    The figures come from ``setup_cache``: one fresh process measures every case of the class
    with the core runner, so compile and lowering seconds are cold. asv keys that cache by the
    function's module and source line, so the classes of one file share one: it measures every
    ``costs`` class of the file (:data:`_COSTS`), each under its class name.
    """

    workload: str
    suite: AsvSuite
    params: tuple[list[Any], ...]
    param_names: tuple[str, ...]

    def setup(self, cache: dict[str, Any], *params: Any) -> None:
        """Skip (n/a) where the case could not run here; fail where it failed (gate, error)."""
        found = cache[type(self).__name__][repr(params)]
        if found["status"] == "skipped":
            raise NotImplementedError(found["error"])
        if found["status"] != "ok":
            raise RuntimeError(f"{found['status']}: {found['error']}")
        self.record = found

    def track_compile_s(self, cache: dict[str, Any], *params: Any) -> float:
        """XLA compile of the case's programs, seconds (cold: first compile in the process)."""
        return float(self.record["compile_s"])

    track_compile_s.unit = "seconds"  # type: ignore[attr-defined]

    def track_lower_s(self, cache: dict[str, Any], *params: Any) -> float:
        """Tracing plus lowering to StableHLO of the case's programs, seconds."""
        return float(self.record["lower_s"])

    track_lower_s.unit = "seconds"  # type: ignore[attr-defined]

    def track_flops_per_s(self, cache: dict[str, Any], *params: Any) -> float:
        """FLOP per call (XLA cost analysis) at the median steady-state latency, FLOP/s."""
        rate = self._summary()["flops_per_s"]
        if rate is None:
            raise SkipNotImplemented("the backend reports no FLOP count")
        return float(rate)

    track_flops_per_s.unit = "FLOP/s"  # type: ignore[attr-defined]

    def track_mfu(self, cache: dict[str, Any], *params: Any) -> float:
        """Model FLOP utilisation at the median latency: fraction of the vendor peak (0..1)."""
        value = self._summary()["mfu"]
        if value is None:
            kind = self.record["env"].get("device_kind")
            raise SkipNotImplemented(f"no peak FLOP/s known for {kind!r}")
        return float(value)

    track_mfu.unit = "fraction"  # type: ignore[attr-defined]

    def track_device_peak_bytes(self, cache: dict[str, Any], *params: Any) -> float:
        """Device ``peak_bytes_in_use`` after the case, bytes (where the backend reports it)."""
        value = self.record["device_peak_bytes"]
        if value is None:
            raise SkipNotImplemented(
                f"{self.record['env'].get('backend')} reports no device memory statistics"
            )
        return float(value)

    track_device_peak_bytes.unit = "bytes"  # type: ignore[attr-defined]

    def figure(self, name: str) -> float:
        """A declared track's figure: the record's ``metrics[name]``, else the derived one.

        Raises:
            SkipNotImplemented: The case has no such figure here (e.g. no known peak FLOP/s).
        """
        metrics = self.record.get("metrics") or {}
        value = metrics[name] if name in metrics else self._summary().get(name)
        if value is None:
            kind = self.record["env"].get("device_kind")
            raise SkipNotImplemented(f"no {name} for this case on {kind!r}")
        return float(value)

    def _summary(self) -> dict[str, Any]:
        from jaxbench.store import Record

        return record_figures(Record.model_validate(self.record))


def measure_grid(cls: Any) -> dict[str, Any]:
    """Measure a ``costs`` class's grid on every present backend; records as plain dicts."""
    run_id = new_run_id()
    out: dict[str, Any] = {}
    for combo in itertools.product(*cls.params):
        backend = combo[-1]
        case = Case(cls.workload, _params(cls, combo))
        reason = skip_reason(backend, case.workload, case.params)
        if reason:
            out[repr(combo)] = {"status": "skipped", "error": reason}
            continue
        record = measure_case(case, backend, TRACK_TIMING, run_id)
        out[repr(combo)] = record.model_dump()
    return out


#: The ``costs`` classes of each file, by module name: what its shared ``setup_cache`` measures.
_COSTS: dict[str, dict[str, type]] = {}


def _track(name: str, unit: str) -> Any:
    def track(self: Any, cache: dict[str, Any], *params: Any) -> float:
        return self.figure(name)

    track.__doc__ = f"``{name}`` of the case ({unit})."
    track.unit = unit  # type: ignore[attr-defined]
    return track


def _costs_class(workload: str, suite: AsvSuite, module: str) -> type:
    def setup_cache(self: Any) -> dict[str, Any]:
        return {name: measure_grid(cls) for name, cls in _COSTS[module].items()}

    setup_cache.__module__ = module
    setup_cache.timeout = max(900, 3 * suite.timeout)  # type: ignore[attr-defined]
    members = {f"track_{name}": _track(name, unit) for name, unit in suite.tracks.items()}
    cls = type(suite.name, (_Costs,), members | {"setup_cache": setup_cache})
    _COSTS.setdefault(module, {})[suite.name] = cls
    return cls


def asv_classes(module: str) -> dict[str, type]:
    """The asv classes of every registered family's suites that ``module`` holds.

    Args:
        module: The ``bench_*`` file's ``__name__``; ``bench_workloads`` also holds every suite
            whose ``module`` names no file of the suite.

    Returns:
        Class name -> class, for the file's ``globals()``: asv names each benchmark
        ``<file>.<class>.<method>``.
    """
    import pathlib

    short = module.rsplit(".", 1)[-1]
    files = {p.stem for p in pathlib.Path(__file__).parent.glob("bench_*.py")}
    out: dict[str, type] = {}
    for workload in WORKLOADS.values():
        for suite in workload.asv:
            home = suite.module if suite.module in files else "bench_workloads"
            if home != short:
                continue
            if suite.kind == "costs":
                cls = _costs_class(workload.name, suite, module)
            else:
                cls = type(suite.name, (_Timed,), {suite.method: _Timed.call})
            cls.__module__ = module
            cls.__doc__ = f"asv {suite.kind} suite of the {workload.name!r} family: {suite.swept}"
            cls.workload, cls.suite, cls.timeout = workload.name, suite, suite.timeout
            cls.params = (*suite.swept.values(), BACKENDS)
            cls.param_names = (*suite.swept, "backend")
            out[suite.name] = cls
    return out
