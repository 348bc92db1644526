"""Per-record summary figures for tables: percentiles of the raw samples, throughput, MFU."""

from __future__ import annotations

from typing import Any

import numpy as np

from jaxbench.measure.costs import mfu, peak_flops
from jaxbench.results import Record


def summarize(record: Record) -> dict[str, Any]:
    """Summary of one record's samples.

    Returns:
        ``n``; ``p50_s``, ``p95_s``, ``iqr_s`` (seconds, numpy's linear-interpolation percentiles;
        ``None`` without samples); ``flops_per_s`` (FLOP/s at the p50 latency); ``mfu`` (fraction
        of the device's peak at the record's dtype, ``None`` for unknown devices).
    """
    samples = np.asarray(record.samples_s, dtype=float)
    if samples.size == 0:
        return {
            "n": 0,
            "p50_s": None,
            "p95_s": None,
            "iqr_s": None,
            "flops_per_s": None,
            "mfu": None,
        }
    p25, p50, p75, p95 = np.percentile(samples, [25, 50, 75, 95])
    rate = record.flops / p50 if record.flops and p50 > 0 else None
    peak = peak_flops(record.env.get("device_kind", ""), str(record.params.get("dtype", "")))
    return {
        "n": int(samples.size),
        "p50_s": float(p50),
        "p95_s": float(p95),
        "iqr_s": float(p75 - p25),
        "flops_per_s": rate,
        "mfu": mfu(record.flops, float(p50), peak),
    }
