"""Forward mode: per-K cost of each strategy, and the K at which linearize becomes cheaper.

Forward-mode records have benchmarks ``forward/linearize`` (linearize + K applications),
``forward/linearize_apply`` (K applications only), ``forward/vmap_jvp``, ``forward/jvp_loop``
and ``forward/jacfwd``, parameters ``k``, ``size``, ``dtype`` and ``wrt``, and
``metrics.held_bytes`` (bytes a strategy holds between calls, e.g. the linearization).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.analysis.conditions import CONDITION
from jaxbench.analysis.frames import laid_out
from jaxbench.inference.verdicts import segment_medians
from jaxbench.store import Metrics

FORWARD_PREFIX = "forward/"
GROUP = ("param.size", "param.dtype", "param.wrt", CONDITION, "version")
#: What makes one forward-mode series besides the version: size, dtype, wrt, condition.
SERIES = GROUP[:-1]


def _held_bytes(metrics: Any) -> float:
    held = metrics.held_bytes if isinstance(metrics, Metrics) else None
    return math.nan if held is None else float(held)


def forward_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Median steady-state latency and held bytes per forward-mode strategy and K.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.

    Returns:
        One row per ``param.size``, ``param.dtype``, ``param.wrt``, ``condition``, ``version``,
        ``benchmark`` and ``k``: ``p50_s`` (median latency of all samples, seconds), ``n``
        (samples) and ``held_bytes`` (bytes; ``nan`` where not recorded). Sorted by those keys.
        A grouping parameter a record lacks (``wrt`` before it existed) reads ``n/a``.
        Empty when there are no forward-mode ``ok`` records.
    """
    fwd = frame[frame["benchmark"].astype(str).str.startswith(FORWARD_PREFIX)]
    cols = [*GROUP, "benchmark", "k", "p50_s", "n", "held_bytes"]
    if fwd.empty:
        return pd.DataFrame(columns=cols)
    # the steady-state records (as steady_state_samples keeps them), medians over their calls
    # laid end to end: no row per call
    fwd = fwd[(fwd["status"] == "ok") & (fwd["samples_s"].map(len) > 0)]
    held = fwd["metrics"].map(_held_bytes) if "metrics" in fwd else math.nan
    fwd = fwd[[c for c in (*GROUP, "benchmark", "param.k", "samples_s") if c in fwd]]
    fwd = fwd.assign(held_bytes=held)
    for column in [c for c in GROUP if c.startswith("param.")]:  # older records lack wrt
        given = fwd[column].astype(object) if column in fwd else None
        fwd[column] = "n/a" if given is None else given.where(given.notna(), "n/a")
    keys = [*GROUP, "benchmark", "k"]
    fwd = fwd[fwd[[*GROUP, "benchmark", "param.k"]].notna().all(axis=1)]
    if fwd.empty:
        return pd.DataFrame(columns=cols)
    fwd = fwd.assign(k=fwd["param.k"].astype(int))
    groups = fwd.groupby(keys, observed=True, sort=False)
    group = groups.ngroup().to_numpy()
    values, row, _ = laid_out(fwd["samples_s"].tolist())
    of_value = group[row]
    known = ~np.isnan(values)  # a median over the calls that have a value, as pandas takes it
    out = groups.agg(held_bytes=("held_bytes", "max")).reset_index()  # groups in ngroup order
    out["p50_s"] = segment_medians(of_value[known], values[known], len(out))
    out["n"] = np.bincount(of_value, minlength=len(out))
    return out.sort_values(keys, ignore_index=True)[cols]


def crossover_k(
    table: pd.DataFrame,
    cheaper: str = "forward/linearize",
    than: str = "forward/vmap_jvp",
) -> float | None:
    """K from which ``cheaper`` takes less time per call than ``than``, for one series.

    With ``r(K) = p50(cheaper) / p50(than)`` at the Ks measured for both: if ``r < 1`` from
    some measured K on (and at every larger one), the crossover is where ``log r`` crosses 0 on
    the straight line between that K and the K before it, in ``log K`` (log-log interpolation).

    Args:
        table: Rows of :func:`forward_table` for one size, dtype, wrt, condition and version.
        cheaper: Benchmark expected to win at large K.
        than: Benchmark it is compared with.

    Returns:
        The crossover K (a float between two measured Ks); the smallest measured K when
        ``cheaper`` already wins there; ``None`` when it does not win at the largest K.

    Raises:
        ValueError: ``table`` holds more than one series (size, dtype, wrt, condition, version).
    """
    keys = [c for c in GROUP if c in table]
    if len(table[keys].drop_duplicates()) > 1:
        raise ValueError(f"crossover_k needs one series; table has several {keys}")
    a = table[table["benchmark"] == cheaper].set_index("k")["p50_s"]
    b = table[table["benchmark"] == than].set_index("k")["p50_s"]
    ks = sorted(set(a.index) & set(b.index))
    if not ks:
        return None
    log_r = np.log([a[k] / b[k] for k in ks])
    if log_r[-1] >= 0:
        return None
    i = len(ks) - 1
    while i > 0 and log_r[i - 1] < 0:
        i -= 1
    if i == 0:
        return float(ks[0])
    k0, k1, r0, r1 = math.log(ks[i - 1]), math.log(ks[i]), log_r[i - 1], log_r[i]
    return float(math.exp(k0 + (k1 - k0) * r0 / (r0 - r1)))


#: Crossovers a review reports: column name -> (benchmark expected to win at large K, rival).
CROSSOVERS: dict[str, tuple[str, str]] = {
    "k_linearize_vs_vmap_jvp": ("forward/linearize", "forward/vmap_jvp"),
    "k_linearize_vs_jvp_loop": ("forward/linearize", "forward/jvp_loop"),
}


def crossover_table(
    frame: pd.DataFrame, crossovers: dict[str, tuple[str, str]] | None = None
) -> pd.DataFrame:
    """Per forward-mode series and version: the crossover K of each pair of strategies.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.
        crossovers: Column name -> ``(cheaper, than)`` benchmarks (see :func:`crossover_k`);
            :data:`CROSSOVERS` when ``None``.

    Returns:
        One row per ``param.size``, ``param.dtype``, ``param.wrt``, ``condition`` and ``version``
        (sorted, versions in version order): ``k_max`` (largest K measured) and one column per
        crossover holding the crossover K, ``inf`` when ``cheaper`` does not win up to
        ``k_max``, ``nan`` when the two were not measured at a common K. Empty without
        forward-mode ``ok`` records.
    """
    crossovers = CROSSOVERS if crossovers is None else crossovers
    table = forward_table(frame)
    columns = [*GROUP, "k_max", *crossovers]
    rows = []
    for key, series in table.groupby(list(GROUP), observed=True, sort=True):
        row: dict[str, object] = dict(zip(GROUP, key, strict=True))
        row["k_max"] = int(series["k"].max())
        for name, (cheaper, than) in crossovers.items():
            measured = set(series.loc[series["benchmark"] == cheaper, "k"]) & set(
                series.loc[series["benchmark"] == than, "k"]
            )
            k_x = crossover_k(series, cheaper, than) if measured else math.nan
            row[name] = math.inf if k_x is None else k_x
        rows.append(row)
    return pd.DataFrame(rows, columns=columns)


def forward_series(frame: pd.DataFrame) -> list[tuple[tuple[str, str, str, str], pd.DataFrame]]:
    """The forward-mode rows of ``frame`` split into series (:data:`SERIES`), all versions.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results`.

    Returns:
        ``[((size, dtype, wrt, condition), rows), ...]`` sorted by key; ``rows`` keep every
        version and status. Empty without forward-mode records.
    """
    fwd = frame[frame["benchmark"].astype(str).str.startswith(FORWARD_PREFIX)]
    if fwd.empty:
        return []
    keys = fwd[list(SERIES)].astype(str)
    return [
        (tuple(key), fwd.loc[rows.index])  # type: ignore[misc]
        for key, rows in keys.groupby(list(SERIES), sort=True)
    ]
