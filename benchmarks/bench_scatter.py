"""asv benchmarks of scatter-add, segment_sum, gather and the embedding gradient.

Thin: the ops, their index draws, their correctness gate and all measurement come from
:mod:`jaxbench` (:mod:`jaxbench.workloads.scatter`).
"""

from __future__ import annotations

from benchmarks.common import BACKENDS, prepared

OPS = ["scatter_add", "segment_sum", "gather", "embedding_grad"]
CONTENTION = ["uniform", "zipf", "one"]


class Scatter:
    """Latency of one op over 65536 indices into a 32768-row table, seconds."""

    params = (OPS, CONTENTION, BACKENDS)
    param_names = ("op", "contention", "backend")
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0
    timeout = 300

    def setup(self, op: str, contention: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        params = {"rows": 32768, "n": 65536, "contention": contention, "op": op,
                  "dtype": "float32"}  # fmt: skip
        self.case = prepared("scatter", params, backend)

    def time_op(self, op: str, contention: str, backend: str) -> None:
        """One op, seconds."""
        self.case.call_once()
