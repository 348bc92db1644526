"""asv template: your own workload in your own asv suite.

Copy this file into your suite's benchmark folder (asv's ``benchmark_dir``), set ``WORKLOAD``
to your factory (``package.module:factory``) or to its entry-point name, and list the factory's
parameters you want to sweep in ``params``. ``jaxbench.prepared.prepare`` builds, compiles,
gates and warms the case once per asv process, so asv's ``setup()`` (run again before every
sample) never traces or compiles, and a case that fails its gate fails its benchmark alone.
"""

from __future__ import annotations

from jaxbench.cases import resolve_device
from jaxbench.prepared import prepare

WORKLOAD = "example_regression"  # the example package's entry point (examples/workloads)


class UserStep:
    """Latency of one warmed call of the workload, blocked on its whole output, seconds."""

    params = ([64, 256], ["cpu", "gpu"])
    param_names = ("width", "backend")
    number = 1  # one call per sample: the samples are per-call latencies
    repeat = (10, 200, 2.0)
    warmup_time = 0.0  # prepare() has warmed the case already
    timeout = 300

    def setup(self, width: int, backend: str) -> None:
        """Fetch the prepared case; an absent backend is a skip (asv shows n/a)."""
        try:
            resolve_device(backend)
        except RuntimeError as exc:  # the backend is not present here
            raise NotImplementedError(str(exc)) from None
        self.case = prepare(WORKLOAD, {"width": width}, backend)

    def time_step(self, width: int, backend: str) -> None:
        """One call of the step, seconds."""
        self.case.call_once()
