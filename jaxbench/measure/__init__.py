"""The one place that times anything: compile, first call, warm-up and steady-state samples.

Also the noise indicators of each timed region (:mod:`jaxbench.measure.noise`).
"""

from jaxbench.measure.cache import configure_compilation_cache
from jaxbench.measure.events import CompileEvents, compile_events
from jaxbench.measure.harness import (
    CompileStats,
    CompileTarget,
    Measurement,
    NonFiniteOutput,
    TimingConfig,
    compile_targets,
    finite_flags,
    measure,
)
from jaxbench.measure.noise import NOISE_KEYS, NoiseProbe

__all__ = [
    "NOISE_KEYS",
    "CompileEvents",
    "CompileStats",
    "CompileTarget",
    "Measurement",
    "NoiseProbe",
    "NonFiniteOutput",
    "TimingConfig",
    "compile_events",
    "compile_targets",
    "configure_compilation_cache",
    "finite_flags",
    "measure",
]
