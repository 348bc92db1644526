"""Measurement conditions: what, besides the version under test, can change a timing.

Two rows of results belong to one series only if they were measured under the same condition:
the same source (jaxbench or asv), backend, device kind and count, platform version (driver),
machine, CPU, the CPUs the process could use (``usable_cpus``: ``taskset -c 0`` and
``taskset -c 0,1`` are two conditions), Python, jaxlib relative to jax, each recorded timing
environment variable (``XLA_FLAGS``, ``OMP_NUM_THREADS``, ...), each recorded JAX flag, the
persistent compilation cache settings, the timing settings where recorded, whether the machine
was shared (``env.sweep.exclusive`` false: a concurrent local task, or a Slurm task without
``--exclusive``; or ``noise.gpu_shared``: another process on the GPU) and whether the GPU's clocks
were held down (``noise.gpu_throttled``; both :mod:`jaxbench.measure.gpu`; rows that do not say
are alike), and for asv rows the
calls per sample (``asv_number``) and the benchmark's source hash (``asv_benchmark_version``;
both :data:`NOT_RECORDED` on jaxbench rows, alike for all of them). The version under test
(``jax``) is the axis of a comparison, never part of a condition; neither is the jaxbench commit
unless asked for (``fields=DEFAULT_FIELDS + ("commit",)``).

A value that a row did not record is the text ``(not recorded)``: a row that recorded a flag and
one that did not are kept apart, since nothing shows they ran alike.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

NOT_RECORDED = "(not recorded)"
SAME_AS_JAX = "= jax"
CONDITION = "condition"


def _env(row: pd.Series) -> dict[str, Any]:
    env = row.get("env")
    return env if isinstance(env, dict) else {}


def _host(row: pd.Series) -> dict[str, Any]:
    host = _env(row).get("host")
    return host if isinstance(host, dict) else {}


def _jaxlib(row: pd.Series) -> Any:
    jax, jaxlib = row.get("jax"), row.get("jaxlib")
    if jaxlib is None or pd.isna(jaxlib):
        return None
    return SAME_AS_JAX if jaxlib == jax else jaxlib


def _cache(row: pd.Series, key: str) -> Any:
    cache = row.get("compilation_cache")
    return cache.get(key) if isinstance(cache, dict) else None


def _noise(row: pd.Series) -> dict[str, Any]:
    noise = row.get("noise")
    return noise if isinstance(noise, dict) else {}


def _shared(row: pd.Series) -> Any:
    sweep = _env(row).get("sweep")
    why = []
    if isinstance(sweep, dict) and sweep.get("exclusive") is False:
        why.append("sweep task not exclusive")
    if _noise(row).get("gpu_shared"):
        why.append("other processes on the GPU")
    return ", ".join(why) or None


def _metric(row: pd.Series, key: str) -> Any:
    metrics = row.get("metrics")
    return metrics.get(key) if isinstance(metrics, dict) else None


#: Fixed condition fields and how each is read from a row of the results frame.
FIELD_GETTERS: dict[str, Callable[[pd.Series], Any]] = {
    "source": lambda r: r.get("source"),
    "backend": lambda r: r.get("backend"),
    "device_kind": lambda r: r.get("device_kind"),
    "device_count": lambda r: _env(r).get("device_count"),
    "platform_version": lambda r: _env(r).get("platform_version"),
    "machine": lambda r: r.get("machine"),
    "cpu_model": lambda r: _host(r).get("cpu_model"),
    "cpu_count": lambda r: _host(r).get("cpu_count"),
    "usable_cpus": lambda r: _host(r).get("usable_cpus"),
    "python": lambda r: _env(r).get("python"),
    "jaxlib": _jaxlib,
    "cache_dir": lambda r: _cache(r, "dir"),
    "cache_min_compile_time_s": lambda r: _cache(r, "min_compile_time_secs"),
    "timing": lambda r: _env(r).get("timing"),
    "shared": _shared,
    "gpu_throttled": lambda r: "GPU clocks held down" if _noise(r).get("gpu_throttled") else None,
    "asv_number": lambda r: _metric(r, "number") if r.get("source") == "asv" else None,
    "asv_benchmark_version": lambda r: (
        _metric(r, "benchmark_version") if r.get("source") == "asv" else None
    ),
    "commit": lambda r: r.get("commit"),
}
#: Fields used unless told otherwise; ``env.<VAR>`` and ``flag.<name>`` are added per frame.
DEFAULT_FIELDS: tuple[str, ...] = tuple(f for f in FIELD_GETTERS if f != "commit")


def _text(value: Any) -> str:
    if value is None or (not isinstance(value, dict | list) and pd.isna(value)):
        return NOT_RECORDED
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def condition_fields(
    frame: pd.DataFrame, fields: Sequence[str] = DEFAULT_FIELDS, env_vars: bool = True
) -> pd.DataFrame:
    """The condition of each row, one text column per field.

    Args:
        frame: Rows of :func:`jaxbench.analysis.load_results` (or
            :func:`jaxbench.analysis.frames.records_frame`); needs ``env``.
        fields: Fixed fields to use, names from :data:`FIELD_GETTERS`.
        env_vars: Also one column per recorded environment variable (``env.<VAR>``, from
            ``env.env_vars``) and JAX flag (``flag.<name>``, from ``env.jax_flags``).

    Returns:
        A frame with ``frame``'s index and one ``str`` column per field; values are ``str()``
        of the recorded value, JSON for dicts, :data:`NOT_RECORDED` where missing.

    Raises:
        KeyError: A name in ``fields`` is not in :data:`FIELD_GETTERS`.
    """
    unknown = [f for f in fields if f not in FIELD_GETTERS]
    if unknown:
        raise KeyError(f"unknown condition fields {unknown}; known: {list(FIELD_GETTERS)}")
    out: dict[str, list[str]] = {f: [] for f in fields}
    extra: list[dict[str, Any]] = []
    for _, row in frame.iterrows():
        for f in fields:
            out[f].append(_text(FIELD_GETTERS[f](row)))
        more: dict[str, Any] = {}
        if env_vars:
            env = _env(row)
            more |= {f"env.{k}": v for k, v in (env.get("env_vars") or {}).items()}
            more |= {f"flag.{k}": v for k, v in (env.get("jax_flags") or {}).items()}
        extra.append(more)
    names = sorted({k for more in extra for k in more})
    for name in names:
        out[name] = [_text(more.get(name)) for more in extra]
    return pd.DataFrame(out, index=frame.index, dtype=object)


def condition_label(values: dict[str, str]) -> str:
    """Short, stable name of one condition: ``<device_kind>@<machine>#<6 hex of all fields>``.

    ``env.<VAR>`` and ``flag.<name>`` fields that the row did not record are left out of the
    hash: :func:`condition_fields` adds such a column for every variable any row of the frame
    recorded, so keeping them would make a row's label depend on the other rows (a pair of
    versions and the whole frame would name one condition differently).
    """
    recorded = {
        k: v
        for k, v in values.items()
        if not (k.startswith(("env.", "flag.")) and v == NOT_RECORDED)
    }
    digest = hashlib.sha1(json.dumps(recorded, sort_keys=True).encode()).hexdigest()[:6]
    kind = values.get("device_kind", NOT_RECORDED)
    machine = values.get("machine", NOT_RECORDED)
    return f"{kind}@{machine}#{digest}"


def add_conditions(
    frame: pd.DataFrame, fields: Sequence[str] = DEFAULT_FIELDS, env_vars: bool = True
) -> pd.DataFrame:
    """``frame`` with a ``condition`` column: each row's :func:`condition_label`.

    Args:
        frame: As :func:`condition_fields`.
        fields: As :func:`condition_fields`.
        env_vars: As :func:`condition_fields`.

    Raises:
        KeyError: As :func:`condition_fields`.
    """
    table = condition_fields(frame, fields, env_vars)
    labels = [condition_label(dict(row)) for _, row in table.iterrows()]
    return frame.assign(**{CONDITION: labels})


@dataclass(frozen=True)
class SeriesSplit:
    """Rows split into series that may be compared, and why rows were kept apart.

    Attributes:
        frame: The input rows with a ``condition`` column.
        conditions: One row per condition: ``condition``, ``records`` (row count) and the field
            values.
        reasons: One line per condition that shares a case with a larger condition, saying which
            fields differ, e.g. ``"cpu@vm#1a2b3c (3 records) kept apart from cpu@vm#4d5e6f
            (40 records): env.XLA_FLAGS '--xla_cpu_use_thunk_runtime=false' vs (not recorded)"``.
    """

    frame: pd.DataFrame
    conditions: pd.DataFrame
    reasons: list[str]


def split_series(
    frame: pd.DataFrame,
    fields: Sequence[str] = DEFAULT_FIELDS,
    env_vars: bool = True,
    case_column: str = "case",
) -> SeriesSplit:
    """Split rows into conditions and say, for rows of one case, why they were not pooled.

    Args:
        frame: As :func:`condition_fields`; ``case_column`` names the case of each row.
        fields: As :func:`condition_fields`.
        env_vars: As :func:`condition_fields`.
        case_column: Column identifying a case (benchmark and parameters).

    Returns:
        A :class:`SeriesSplit`. Each condition is compared with the condition holding the most
        records among those that share a case with it; the differing fields are listed.

    Raises:
        KeyError: As :func:`condition_fields`.
    """
    table = condition_fields(frame, fields, env_vars)
    labels = pd.Series(
        [condition_label(dict(row)) for _, row in table.iterrows()], index=frame.index
    )
    framed = frame.assign(**{CONDITION: labels})
    values = table.assign(**{CONDITION: labels}).drop_duplicates(CONDITION).set_index(CONDITION)
    counts = labels.value_counts()
    order = sorted(counts.index, key=lambda c: (-counts[c], c))
    cases = {
        c: set(framed.loc[labels == c, case_column]) if case_column in framed else set()
        for c in order
    }
    reasons = []
    for i, cond in enumerate(order[1:], start=1):
        ref = next((r for r in order[:i] if cases[r] & cases[cond]), None)
        if ref is None:
            continue
        diffs = [
            f"{name} {values.at[cond, name]!r} vs {values.at[ref, name]!r}"
            for name in values.columns
            if values.at[cond, name] != values.at[ref, name]
        ]
        reasons.append(
            f"{cond} ({counts[cond]} records) kept apart from {ref} ({counts[ref]} records): "
            + "; ".join(diffs)
        )
    summary = values.assign(records=counts).reset_index()
    summary = summary[[CONDITION, "records", *values.columns]]
    return SeriesSplit(framed, summary, reasons)
