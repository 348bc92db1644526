"""asv benchmarks of compile time: programs of many distinct ops in nested control flow.

Thin: the program, its gate and the compile figures come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.compile_heavy`, measured cold by the core runner in ``setup_cache``).
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import BACKENDS, _Costs


class CompileCosts(_Costs):
    """Compile and lowering seconds of ``length * 2**depth`` ops (and the other tracks)."""

    params = ([64, 256], [0, 2], BACKENDS)
    param_names = ("length", "depth", "backend")
    workload = "compile"
    timeout = 300

    def setup_cache(self) -> dict[str, Any]:
        """Measure the class's grid once per environment (see ``_Costs.measure_grid``)."""
        return self.measure_grid()

    setup_cache.timeout = 900  # type: ignore[attr-defined]

    def case_params(self, length: int, depth: int, backend: str) -> dict[str, Any]:
        """Workload parameters: float32."""
        return {"length": length, "depth": depth, "dtype": "float32"}
