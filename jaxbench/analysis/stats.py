"""Descriptive statistics of latency samples per case and version, with process-level intervals.

- percentiles are numpy's linear interpolation (``p50``, ``p95``; ``IQR = p75 - p25``) over
  every call, as in :func:`jaxbench.analysis.derived.record_figures`: they describe the
  distribution;
- ``MAD`` is the raw median absolute deviation, ``median(|x - median(x)|)``
  (:func:`scipy.stats.median_abs_deviation` with ``scale=1.0``; multiply by 1.4826 for a normal
  sigma);
- the interval (``ci_low``/``ci_high``) is **not** over calls: calls of one process are not
  independent. It is the t interval of the mean log per-process median, back on the seconds
  scale (the geometric mean of the processes' medians; :func:`process_interval`), so it says
  where another process's median would centre. One process gives none.

Verdicts between versions live in :mod:`jaxbench.inference.verdicts`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

DEFAULT_CONFIDENCE = 0.95
SUMMARY_COLUMNS = ("n", "processes", "p50", "p95", "iqr", "mad", "ci_low", "ci_high")


def _array(samples: Sequence[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(samples, dtype=float).ravel()
    return x[np.isfinite(x)]


def process_interval(
    per_process: Sequence[Sequence[float] | np.ndarray], confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float]:
    """Interval of the typical process median: t interval of the mean log median, exponentiated.

    Args:
        per_process: One sequence of positive values (seconds) per process.
        confidence: Confidence level, e.g. 0.95.

    Returns:
        ``(low, high)`` seconds; ``(nan, nan)`` with fewer than two processes with data.
    """
    logs = np.asarray(
        [
            math.log(float(np.median(x)))
            for x in map(_array, per_process)
            if x.size and (x > 0).all()
        ]
    )
    if logs.size < 2:
        return (math.nan, math.nan)
    se = float(logs.std(ddof=1)) / math.sqrt(logs.size)
    q = float(stats.t.ppf(0.5 + confidence / 2, logs.size - 1))
    mean = float(logs.mean())
    return (math.exp(mean - q * se), math.exp(mean + q * se))


def summarize_samples(
    samples: Sequence[float] | np.ndarray,
    processes: Sequence[object] | None = None,
    confidence: float = DEFAULT_CONFIDENCE,
) -> dict[str, float | int]:
    """``n``, ``processes``, ``p50``, ``p95``, ``iqr``, ``mad`` and the process-level interval.

    Args:
        samples: Shape ``(n,)``, in seconds (the result is in the same unit).
        processes: Shape ``(n,)``: the process of each sample; ``None`` treats all as one.
        confidence: As :func:`process_interval`.

    Returns:
        A dict with the keys :data:`SUMMARY_COLUMNS`; every figure but the counts is ``nan``
        without samples, and the interval is ``nan`` with a single process.
    """
    values = np.asarray(samples, dtype=float).ravel()
    owners = np.zeros(values.size, dtype=int) if processes is None else np.asarray(processes)
    keep = np.isfinite(values)
    x, owners = values[keep], owners[keep]
    if x.size == 0:
        return {"n": 0, "processes": 0} | {k: math.nan for k in SUMMARY_COLUMNS[2:]}
    groups = [x[owners == o] for o in pd.unique(owners)]
    p25, p50, p75, p95 = np.percentile(x, [25, 50, 75, 95])
    low, high = process_interval(groups, confidence)
    return {
        "n": int(x.size),
        "processes": len(groups),
        "p50": float(p50),
        "p95": float(p95),
        "iqr": float(p75 - p25),
        "mad": float(stats.median_abs_deviation(x, scale=1.0)),
        "ci_low": low,
        "ci_high": high,
    }


def case_summary(
    samples: pd.DataFrame,
    by: Sequence[str] = ("case", "condition", "version"),
    value: str = "latency_s",
    confidence: float = DEFAULT_CONFIDENCE,
) -> pd.DataFrame:
    """Per group (by default case, condition and version): :func:`summarize_samples` figures.

    Args:
        samples: One row per value, e.g. :func:`jaxbench.analysis.steady_state_samples`
            (``value="latency_s"``) or :func:`jaxbench.analysis.compile_times`
            (``value="compile_s"``); a ``process`` column (else ``run_id``) names each value's
            process.
        by: Grouping columns; groups never mix conditions unless ``by`` leaves ``condition`` out.
        value: Column of values, seconds.
        confidence: As :func:`process_interval`.

    Returns:
        One row per group: the ``by`` columns, then :data:`SUMMARY_COLUMNS` (seconds but the
        counts), sorted with versions in version order.

    Raises:
        KeyError: A column of ``by`` or ``value`` is missing.
    """
    by = list(by)
    owner = "process" if "process" in samples else "run_id" if "run_id" in samples else None
    rows = [
        dict(zip(by, key, strict=True))
        | summarize_samples(group[value], group[owner] if owner else None, confidence)
        for key, group in samples.groupby(by, observed=True, sort=False)
    ]
    out = pd.DataFrame(rows, columns=[*by, *SUMMARY_COLUMNS])
    if "version" in by and isinstance(samples["version"].dtype, pd.CategoricalDtype):
        out["version"] = out["version"].astype(samples["version"].dtype)
    return out.sort_values(by, ignore_index=True)
