"""Work and memory of a compiled program (XLA's own analyses) and model FLOP utilisation."""

from __future__ import annotations

from typing import Any

TFLOP = 1e12

# Dense (no structured sparsity) peak FLOP/s per device kind and dtype, keyed by
# ``jax.Device.device_kind``. float32 entries on NVIDIA are the TF32 tensor-core figures, since
# XLA's default matmul precision runs float32 dots as TF32 on Ampere and Hopper (JAX docs,
# ``jax.lax.Precision``). Sources: NVIDIA A100 Tensor Core GPU datasheet (2021); NVIDIA H100
# Tensor Core GPU datasheet (2023, SXM and PCIe columns, sparsity figures halved); NVIDIA H200
# Tensor Core GPU datasheet (2024, SXM column, sparsity figures halved); Google Cloud TPU system
# architecture pages for v4, v5e, v5p and v6e (bf16 peak per chip). Unknown kinds get no MFU.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "NVIDIA A100-SXM4-40GB": {"bfloat16": 312 * TFLOP, "float32": 156 * TFLOP},
    "NVIDIA A100-SXM4-80GB": {"bfloat16": 312 * TFLOP, "float32": 156 * TFLOP},
    "NVIDIA A100-PCIE-40GB": {"bfloat16": 312 * TFLOP, "float32": 156 * TFLOP},
    "NVIDIA A100 80GB PCIe": {"bfloat16": 312 * TFLOP, "float32": 156 * TFLOP},
    "NVIDIA H100 80GB HBM3": {"bfloat16": 989.4 * TFLOP, "float32": 494.7 * TFLOP},
    "NVIDIA H100 PCIe": {"bfloat16": 756 * TFLOP, "float32": 378 * TFLOP},
    "NVIDIA H200": {"bfloat16": 989.5 * TFLOP, "float32": 494.5 * TFLOP},
    "TPU v4": {"bfloat16": 275 * TFLOP},
    "TPU v5 lite": {"bfloat16": 197 * TFLOP},
    "TPU v5": {"bfloat16": 459 * TFLOP},
    "TPU v6 lite": {"bfloat16": 918 * TFLOP},
}

MEMORY_FIELDS = (
    "argument_size_in_bytes",
    "output_size_in_bytes",
    "alias_size_in_bytes",
    "temp_size_in_bytes",
    "generated_code_size_in_bytes",
)


def cost_analysis(compiled: Any) -> tuple[float | None, float | None]:
    """FLOP and bytes accessed per call of ``compiled`` (a ``jax.stages.Compiled``).

    Returns:
        ``(flops, bytes_accessed)`` from ``compiled.cost_analysis()``; ``None`` for a figure the
        backend does not report. Older JAX returns a list with one dict per program; its first
        entry is used.
    """
    try:
        cost = compiled.cost_analysis()
    except Exception:  # some backends raise instead of returning nothing
        return None, None
    if isinstance(cost, list | tuple):
        cost = cost[0] if cost else None
    if not cost:
        return None, None
    flops = cost.get("flops")
    accessed = cost.get("bytes accessed")
    return (
        float(flops) if flops is not None and flops >= 0 else None,
        float(accessed) if accessed is not None and accessed >= 0 else None,
    )


def memory_analysis(compiled: Any) -> dict[str, int]:
    """Sizes in bytes from ``compiled.memory_analysis()`` (arguments, outputs, temporaries, code).

    Returns an empty dict where the backend has no memory analysis.
    """
    try:
        stats = compiled.memory_analysis()
    except Exception:  # not implemented on every backend
        return {}
    if stats is None:
        return {}
    return {f: int(getattr(stats, f)) for f in MEMORY_FIELDS if hasattr(stats, f)}


def peak_flops(device_kind: str, dtype: str) -> float | None:
    """Vendor dense peak FLOP/s for ``device_kind`` at ``dtype``; ``None`` when not in the table."""
    return PEAK_FLOPS.get(device_kind, {}).get(dtype)


def mfu(flops: float | None, latency_s: float | None, peak: float | None) -> float | None:
    """Model FLOP utilisation: ``flops / latency_s / peak`` (a fraction, 0..1).

    ``None`` when any input is missing or not positive: an unknown device gets no MFU, not a guess.
    Definition as in Chowdhery et al., "PaLM" (2022), appendix B.
    """
    if not flops or not latency_s or not peak or latency_s <= 0:
        return None
    return flops / latency_s / peak
