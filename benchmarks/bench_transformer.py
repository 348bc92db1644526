"""asv benchmarks of the decoder LM train step (AdamW, state donated) across sizes and dtypes.

Thin: the model, its correctness gate and all measurement come from :mod:`jaxbench`
(:mod:`jaxbench.workloads.transformer`). GPU sizes are n/a on a CPU.
"""

from __future__ import annotations

from typing import Any

from benchmarks.common import BACKENDS, SkipNotImplemented, _Costs, prepared

SIZES = ["tiny", "small", "125m", "1b"]
DTYPES = ["float32", "bfloat16"]


class Transformer:
    """Latency of one warmed AdamW train step of the decoder LM, blocked on its whole output."""

    params = (SIZES, DTYPES, BACKENDS)
    param_names = ("size", "dtype", "backend")
    number = 1
    repeat = (10, 200, 2.0)
    warmup_time = 0.0
    timeout = 600

    def setup(self, size: str, dtype: str, backend: str) -> None:
        """Fetch the warmed case from the per-process cache (no compile after the first)."""
        self.case = prepared("transformer", {"size": size, "dtype": dtype}, backend)

    def time_step(self, size: str, dtype: str, backend: str) -> None:
        """One train step, seconds."""
        self.case.call_once()


class TransformerCosts(_Costs):
    """Compile seconds, FLOP/s, both MFUs and tokens/s of the LM train step."""

    params = (["tiny", "small", "125m"], DTYPES, BACKENDS)
    param_names = ("size", "dtype", "backend")
    workload = "transformer"
    timeout = 600

    def setup_cache(self) -> dict[str, Any]:
        """Measure the class's grid once per environment (see ``_Costs.measure_grid``)."""
        return self.measure_grid()

    setup_cache.timeout = 1800  # type: ignore[attr-defined]

    def case_params(self, size: str, dtype: str, backend: str) -> dict[str, Any]:
        """Workload parameters: the size and compute dtype."""
        return {"size": size, "dtype": dtype}

    def track_tokens_per_s(self, cache: dict[str, Any], *params: Any) -> float:
        """Tokens trained on per second at the median step latency."""
        return float(self._summary()["tokens_per_s"])

    track_tokens_per_s.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_model_mfu(self, cache: dict[str, Any], *params: Any) -> float:
        """MFU of the PaLM formula's FLOP (6 N + 12 L H Q T per token), fraction of the peak."""
        value = self._summary()["model_mfu"]
        if value is None:
            kind = self.record["env"].get("device_kind")
            raise SkipNotImplemented(f"no peak FLOP/s known for {kind!r}")
        return float(value)

    track_model_mfu.unit = "fraction"  # type: ignore[attr-defined]
