"""The one place that times anything: compile, first call, warm-up and steady-state samples."""

from jaxbench.measure.cache import configure_compilation_cache
from jaxbench.measure.events import CompileEvents, compile_events
from jaxbench.measure.harness import (
    CompileStats,
    CompileTarget,
    Measurement,
    TimingConfig,
    compile_targets,
    measure,
)

__all__ = [
    "CompileEvents",
    "CompileStats",
    "CompileTarget",
    "Measurement",
    "TimingConfig",
    "compile_events",
    "compile_targets",
    "configure_compilation_cache",
    "measure",
]
