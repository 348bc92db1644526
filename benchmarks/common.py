"""Shared glue of the asv suite: prepared cases, measured costs, skips.

Everything timed or measured comes from :mod:`jaxbench`:

- ``time_*``/``peakmem_*``: :func:`jaxbench.prepared.prepare` returns a case built, compiled,
  gated and warmed once per process, so asv's ``setup()`` (re-run before every timed sample)
  never traces or compiles;
- ``track_*``: ``setup_cache`` (once per class and environment, in a fresh process) measures the
  class's grid with the core runner (:func:`jaxbench.runner.measure_case`: cold compile, gate,
  harness samples); each track reads one figure of one record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from jaxbench.analysis.derived import record_figures
from jaxbench.cases import Case, resolve_device
from jaxbench.measure import TimingConfig
from jaxbench.prepared import PreparedCase, prepare
from jaxbench.runner import measure_case, new_run_id
from jaxbench.workloads import NotApplicable, get_workload
from jaxbench.workloads.base import meant_for

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
    if device.platform == "cpu" and meant_for(get_workload(workload), params) != "cpu":
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


class _Costs:
    """``track_*`` methods shared by the workload families.

    Subclasses set ``workload``, ``params``/``param_names`` (backend last) and
    :meth:`case_params`. The figures come from ``setup_cache``: one fresh process measures every
    case of the class with the core runner, so compile and lowering seconds are cold.
    """

    workload: str
    params: tuple[list[Any], ...]
    timeout = 120

    def case_params(self, *params: Any) -> dict[str, Any]:
        """The workload parameters of these asv parameters (backend excluded)."""
        raise NotImplementedError

    def measure_grid(self) -> dict[str, Any]:
        """Measure the class's grid on every present backend; records as plain dicts.

        Each subclass calls it from its own ``setup_cache`` (asv keys the cache by the
        function's source line, so an inherited one would be shared between classes).
        """
        import itertools

        run_id = new_run_id()
        out: dict[str, Any] = {}
        for combo in itertools.product(*self.params):
            backend = combo[-1]
            case = Case(self.workload, self.case_params(*combo))
            reason = skip_reason(backend, case.workload, case.params)
            if reason:
                out[repr(combo)] = {"status": "skipped", "error": reason}
                continue
            record = measure_case(case, backend, TRACK_TIMING, run_id)
            out[repr(combo)] = record.model_dump()
        return out

    def setup(self, cache: dict[str, Any], *params: Any) -> None:
        """Skip (n/a) where the case could not run here; fail where it failed (gate, error)."""
        found = cache[repr(params)]
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

    def _summary(self) -> dict[str, Any]:
        from jaxbench.store import Record

        return record_figures(Record.model_validate(self.record))
