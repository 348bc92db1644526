"""asv benchmarks of the jitted MLP train step (SGD, params donated) across sizes and dtypes.

Thin: the step, its correctness gate and all measurement come from :mod:`jaxbench`.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import BACKENDS, _Costs, prepared

SIZES = ["tiny", "small", "medium"]
DTYPES = ["float32", "bfloat16"]


def _params(size: str, dtype: str) -> dict[str, Any]:
    return {"size": size, "dtype": dtype, "optimizer": "sgd", "donate": True}


class TrainStep:
    """Latency of one warmed train step, blocked on its whole output."""

    params = (SIZES, DTYPES, BACKENDS)
    param_names = ("size", "dtype", "backend")
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0
    timeout = 300

    def setup(self, size: str, dtype: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        self.case = prepared("train_step", _params(size, dtype), backend)

    def time_step(self, size: str, dtype: str, backend: str) -> None:
        """One train step, seconds."""
        self.case.call_once()


class TrainStepMemory:
    """Peak resident memory of the process after set-up and a step (asv's ``peakmem``)."""

    params = (["small", "medium"], ["float32"], BACKENDS)
    param_names = ("size", "dtype", "backend")
    timeout = 300

    def setup(self, size: str, dtype: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache."""
        self.case = prepared("train_step", _params(size, dtype), backend)

    def peakmem_step(self, size: str, dtype: str, backend: str) -> None:
        """One train step; asv records the process's peak resident bytes."""
        self.case.call_once()


class TrainStepCosts(_Costs):
    """Compile and lowering seconds, FLOP/s, MFU and device peak bytes of the train step."""

    params = (["small", "medium"], DTYPES, BACKENDS)
    param_names = ("size", "dtype", "backend")
    workload = "train_step"

    def setup_cache(self) -> dict[str, Any]:
        """Measure the class's grid once per environment (see ``_Costs.measure_grid``)."""
        return self.measure_grid()

    setup_cache.timeout = 900  # type: ignore[attr-defined]

    def case_params(self, size: str, dtype: str, backend: str) -> dict[str, Any]:
        """Workload parameters: SGD, donated params."""
        return _params(size, dtype)
