"""asv benchmarks of loops writing one buffer row per step, over the trip count.

Thin: the loop bodies, their correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.loops`). asv's ``compare`` shows each trip count apart; the scaling
exponent over them comes from ``jaxbench compare`` / ``report`` on the same records.
"""

from __future__ import annotations

from benchmarks.common import BACKENDS, prepared

TRIPS = [256, 1024, 4096]
BODIES = ["at_set", "scan_stack"]
MODES = ["plain", "grad", "linearize"]


class Loop:
    """Latency of one loop of ``trip`` steps (plain, its gradient, or its JVP), seconds."""

    params = (TRIPS, BODIES, MODES, BACKENDS)
    param_names = ("trip", "body", "mode", "backend")
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0
    timeout = 300

    def setup(self, trip: int, body: str, mode: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        params = {"trip": trip, "body": body, "mode": mode, "dtype": "float32"}
        self.case = prepared("loop", params, backend)

    def time_loop(self, trip: int, body: str, mode: str, backend: str) -> None:
        """One loop, seconds."""
        self.case.call_once()
