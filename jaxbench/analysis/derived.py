"""Figures derived from a record after the fact: percentiles, FLOP/s and MFU against vendor peaks.

The run measures latency and XLA's FLOP count (:mod:`jaxbench.measure`); how fast that is
against the device is derived here, where the record is read, so a corrected peak applies to
every record already written.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxbench.store import Env, Record

TFLOP = 1e12

# Dense (no structured sparsity) peak FLOP/s per device kind and matmul input type, keyed by
# ``jax.Device.device_kind``. ``tf32`` is the NVIDIA tensor-core figure for float32 inputs: XLA's
# default matmul precision runs float32 dots as TF32 on Ampere and Hopper (JAX docs,
# ``jax.default_matmul_precision``); ``float32`` is the FP32 (non-tensor) figure, which applies
# under ``highest``/``float32`` precision or ``NVIDIA_TF32_OVERRIDE=0`` (see
# :func:`float32_matmul`). Sources: NVIDIA A100 Tensor Core GPU datasheet (2021); NVIDIA H100
# Tensor Core GPU datasheet (2023, SXM and PCIe columns, sparsity figures halved); NVIDIA H200
# Tensor Core GPU datasheet (2024, SXM column, sparsity figures halved); Google Cloud TPU system
# architecture pages for v4, v5e, v5p and v6e (bf16 peak per chip; v5p reports itself as
# ``TPU v5p``, older libtpu releases as ``TPU v5``). Unknown kinds get no MFU.
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "NVIDIA A100-SXM4-40GB": {
        "bfloat16": 312 * TFLOP,
        "tf32": 156 * TFLOP,
        "float32": 19.5 * TFLOP,
    },
    "NVIDIA A100-SXM4-80GB": {
        "bfloat16": 312 * TFLOP,
        "tf32": 156 * TFLOP,
        "float32": 19.5 * TFLOP,
    },
    "NVIDIA A100-PCIE-40GB": {
        "bfloat16": 312 * TFLOP,
        "tf32": 156 * TFLOP,
        "float32": 19.5 * TFLOP,
    },
    "NVIDIA A100 80GB PCIe": {
        "bfloat16": 312 * TFLOP,
        "tf32": 156 * TFLOP,
        "float32": 19.5 * TFLOP,
    },
    "NVIDIA H100 80GB HBM3": {
        "bfloat16": 989.4 * TFLOP,
        "tf32": 494.7 * TFLOP,
        "float32": 67 * TFLOP,
    },
    "NVIDIA H100 PCIe": {"bfloat16": 756 * TFLOP, "tf32": 378 * TFLOP, "float32": 51 * TFLOP},
    "NVIDIA H200": {"bfloat16": 989.5 * TFLOP, "tf32": 494.5 * TFLOP, "float32": 67 * TFLOP},
    "TPU v4": {"bfloat16": 275 * TFLOP},
    "TPU v5 lite": {"bfloat16": 197 * TFLOP},
    "TPU v5": {"bfloat16": 459 * TFLOP},
    "TPU v5p": {"bfloat16": 459 * TFLOP},
    "TPU v6 lite": {"bfloat16": 918 * TFLOP},
}

FULL_FLOAT32_PRECISIONS = ("highest", "float32", "F32_F32_F32")
"""``jax_default_matmul_precision`` values that make float32 dots run in full FP32 (JAX docs)."""


def float32_matmul(env: Env) -> str:
    """How a record's float32 dots ran on NVIDIA: ``"float32"`` (full FP32) or ``"tf32"``.

    Full FP32 where the recorded ``jax_default_matmul_precision`` is one of
    :data:`FULL_FLOAT32_PRECISIONS`, or the recorded ``NVIDIA_TF32_OVERRIDE`` is ``0`` (NVIDIA's
    switch that turns TF32 off in cuBLAS); otherwise XLA's default, TF32. A per-call
    ``precision=`` in the workload's own code is not seen here.

    Args:
        env: A record's ``env``.
    """
    flags, variables = env.jax_flags, env.env_vars
    precision = str(flags.get("jax_default_matmul_precision") or "").strip()
    if precision in FULL_FLOAT32_PRECISIONS or variables.get("NVIDIA_TF32_OVERRIDE") == "0":
        return "float32"
    return "tf32"


def peak_flops(device_kind: str, dtype: str, float32_as: str = "tf32") -> float | None:
    """Vendor dense peak FLOP/s for ``device_kind`` at ``dtype``; ``None`` when not in the table.

    Args:
        device_kind: ``jax.Device.device_kind``.
        dtype: The workload's dtype (``bfloat16``, ``float32``).
        float32_as: For ``float32``: ``"tf32"`` (XLA's default on NVIDIA) or ``"float32"``
            (full precision), as :func:`float32_matmul` tells from a record. A device without a
            TF32 figure uses its ``float32`` one.
    """
    peaks = PEAK_FLOPS.get(device_kind, {})
    if dtype == "float32" and float32_as == "tf32" and "tf32" in peaks:
        return peaks["tf32"]
    return peaks.get(dtype)


def mfu(flops: float | None, latency_s: float | None, peak: float | None) -> float | None:
    """Model FLOP utilisation: ``flops / latency_s / peak`` (a fraction, 0..1).

    ``None`` when any input is missing or not positive: an unknown device gets no MFU, not a guess.
    Definition as in Chowdhery et al., "PaLM" (2022), appendix B.
    """
    if not flops or not latency_s or not peak or latency_s <= 0:
        return None
    return flops / latency_s / peak


def record_figures(record: Record) -> dict[str, Any]:
    """Summary of one record's samples.

    Returns:
        ``n``; ``p50_s``, ``p95_s``, ``iqr_s`` (seconds, numpy's linear-interpolation percentiles;
        ``None`` without samples); ``flops_per_s`` (XLA-counted FLOP/s of the whole program at
        the p50 latency: XLA counts one device's share of a sharded program, so on a mesh
        (``metrics.mesh``) the record's ``flops`` times its devices); ``mfu`` (that rate as a
        fraction of the device's peak at the record's dtype and float32 matmul precision,
        times the devices of the mesh where it ran on one, so a sharded step's MFU is per
        device; ``None`` for unknown devices);
        ``tokens_per_s`` and ``model_mfu`` (from the workload's ``tokens`` and formula
        ``model_flops`` per call in ``metrics``, e.g. the transformer's
        :meth:`~jaxbench.workloads.lm.LMSize.model_flops`; ``None`` where it has none);
        ``tokens_per_s_per_device``, that rate over the devices of the record's mesh (``None``
        without a mesh: there it is ``tokens_per_s``);
        ``algbw_Bps`` and ``busbw_Bps``, a collective's algorithm and bus bandwidth in bytes/s
        at the p50 latency (``S / t`` and ``S / t * bus_factor`` from ``metrics``, the
        formulas of nccl-tests' ``doc/PERFORMANCE.md``; ``None`` for other workloads).
    """
    samples = np.asarray(record.samples_s, dtype=float)
    figures: dict[str, Any] = dict.fromkeys(
        ("p50_s", "p95_s", "iqr_s", "flops_per_s", "mfu", "tokens_per_s",
         "tokens_per_s_per_device", "model_mfu", "algbw_Bps", "busbw_Bps")
    )  # fmt: skip
    figures["n"] = int(samples.size)
    if samples.size == 0:
        return figures
    p25, p50, p75, p95 = (float(v) for v in np.percentile(samples, [25, 50, 75, 95]))
    peak = peak_flops(
        record.env.device_kind or "",
        str(record.params.get("dtype", "")),
        float32_matmul(record.env),
    )
    mesh = record.metrics.mesh or {}
    devices = len(mesh.get("device_ids") or ())
    if peak is not None and devices:
        peak *= devices  # a mesh's FLOP are spread over its devices
    # XLA's cost analysis counts the partitioned program: one device's share on a mesh
    flops = record.flops * devices if record.flops and devices else record.flops
    tokens, message = record.metrics.tokens, record.metrics.message_bytes
    tokens_per_s = tokens / p50 if tokens and p50 > 0 else None
    algbw = message / p50 if message and p50 > 0 else None
    factor = record.metrics.bus_factor
    return figures | {
        "algbw_Bps": algbw,
        "busbw_Bps": algbw * factor if algbw is not None and factor is not None else None,
        "p50_s": p50,
        "p95_s": p95,
        "iqr_s": p75 - p25,
        "flops_per_s": flops / p50 if flops and p50 > 0 else None,
        "mfu": mfu(flops, p50, peak),
        "tokens_per_s": tokens_per_s,
        "tokens_per_s_per_device": tokens_per_s / devices if tokens_per_s and devices else None,
        "model_mfu": mfu(record.metrics.model_flops, p50, peak),
    }
