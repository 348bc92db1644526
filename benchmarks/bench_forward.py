"""asv benchmarks of K Jacobian-vector products: linearize vs vmap(jvp) vs a jvp loop.

Thin: the strategies, their correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.forward_mode`).
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import BACKENDS, _Costs, prepared

SIZES = ["tiny", "small"]
KS = [1, 64]
STRATEGIES = ["linearize", "linearize_apply", "vmap_jvp", "jvp_loop"]
DTYPE = "float32"


def _params(size: str, k: int, strategy: str) -> dict[str, Any]:
    return {"size": size, "dtype": DTYPE, "k": k, "strategy": strategy, "wrt": "input"}


class ForwardProducts:
    """Latency of K JVPs at one point, blocked on all K outputs.

    ``linearize`` times linearize plus K applications; ``linearize_apply`` only the K
    applications of an existing linearization.
    """

    params = (SIZES, KS, STRATEGIES, BACKENDS)
    param_names = ("size", "k", "strategy", "backend")
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0
    timeout = 300

    def setup(self, size: str, k: int, strategy: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        self.case = prepared("forward", _params(size, k, strategy), backend)

    def time_products(self, size: str, k: int, strategy: str, backend: str) -> None:
        """K Jacobian-vector products, seconds."""
        self.case.call_once()


class ForwardCosts(_Costs):
    """Compile and lowering seconds, FLOP/s, MFU, device peak and held bytes at K = 8."""

    params = (["small"], ["linearize", "vmap_jvp", "jvp_loop"], BACKENDS)
    param_names = ("size", "strategy", "backend")
    workload = "forward"
    k = 8

    def setup_cache(self) -> dict[str, Any]:
        """Measure the class's grid once per environment (see ``_Costs.measure_grid``)."""
        return self.measure_grid()

    setup_cache.timeout = 900  # type: ignore[attr-defined]

    def case_params(self, size: str, strategy: str, backend: str) -> dict[str, Any]:
        """Workload parameters at K = :attr:`k`, float32."""
        return _params(size, self.k, strategy)

    def track_held_bytes(self, cache: dict[str, Any], size: str, strategy: str, backend: str):
        """Bytes a strategy keeps alive between linearizing and the products.

        The linearization's residuals for ``linearize``; 0 for vmap(jvp) and the jvp loop.
        """
        return float(self.record["metrics"]["held_bytes"])

    track_held_bytes.unit = "bytes"  # type: ignore[attr-defined]
