"""Count JAX's own compile events (``jax.monitoring``), so a recompile is seen, not guessed.

JAX fires ``/jax/core/compile/backend_compile_duration`` once per real XLA compile and
``/jax/core/compile/jaxpr_trace_duration`` once per trace; the persistent compilation cache fires
``/jax/compilation_cache/cache_hits`` and ``cache_misses`` (JAX source, ``jax/_src/dispatch.py``
and ``jax/_src/compiler.py``). ``jitted._cache_size()`` counts dispatch-cache entries instead, and
misses compiles that share an entry, so it is not used.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"
JAXPR_TRACE = "/jax/core/compile/jaxpr_trace_duration"
CACHE_HIT = "/jax/compilation_cache/cache_hits"
CACHE_MISS = "/jax/compilation_cache/cache_misses"
LOWERING = "/jax/core/compile/jaxpr_to_mlir_module_duration"
#: Compile phases whose durations are summed (:meth:`CompileEvents.phase_seconds`).
PHASES = {JAXPR_TRACE: "trace", LOWERING: "lower", BACKEND_COMPILE: "backend_compile"}

_NAMES = {
    BACKEND_COMPILE: "compiles",
    JAXPR_TRACE: "traces",
    CACHE_HIT: "cache_hits",
    CACHE_MISS: "cache_misses",
}


@dataclass(frozen=True)
class EventCounts:
    """Event counts over an interval: XLA compiles, jaxpr traces, persistent-cache hits/misses."""

    compiles: int = 0
    traces: int = 0
    cache_hits: int = 0
    cache_misses: int = 0


class CompileEvents:
    """Process-wide counter of compile events; one listener pair, registered on first use.

    Use :meth:`snapshot` before an interval and :meth:`since` after it.
    """

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._seconds: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._installed = False
        self.compiles_and_traces = 0
        """Running total of compiles plus traces: a cheap int to poll between timed calls."""

    def install(self) -> None:
        """Register the ``jax.monitoring`` listeners (idempotent)."""
        if self._installed:
            return
        from jax import monitoring

        monitoring.register_event_duration_secs_listener(self._on_duration)
        monitoring.register_event_listener(self._on_event)
        self._installed = True

    def _on_duration(self, event: str, duration_secs: float, **kwargs: object) -> None:
        phase = PHASES.get(event)
        if phase is not None:
            with self._lock:
                self._seconds[phase] += duration_secs
        self._on_event(event)

    def _on_event(self, event: str, **kwargs: object) -> None:
        name = _NAMES.get(event)
        if name is not None:
            with self._lock:
                self._counts[name] += 1
                if name in ("compiles", "traces"):
                    self.compiles_and_traces += 1

    def snapshot(self) -> EventCounts:
        """Counts since the listeners were installed (installs them if needed)."""
        self.install()
        with self._lock:
            return EventCounts(**{name: self._counts[name] for name in _NAMES.values()})

    def phase_seconds(self) -> dict[str, float]:
        """Seconds spent so far per compile phase (``trace``, ``lower``, ``backend_compile``).

        JAX reports each phase's duration to ``jax.monitoring`` (:data:`PHASES`); subtract two
        snapshots for an interval. A phase this JAX does not report stays 0.
        """
        self.install()
        with self._lock:
            return {phase: float(self._seconds[phase]) for phase in PHASES.values()}

    def since(self, start: EventCounts) -> EventCounts:
        """Counts between ``start`` (from :meth:`snapshot`) and now."""
        now = self.snapshot()
        return EventCounts(
            compiles=now.compiles - start.compiles,
            traces=now.traces - start.traces,
            cache_hits=now.cache_hits - start.cache_hits,
            cache_misses=now.cache_misses - start.cache_misses,
        )


compile_events = CompileEvents()
