"""Measurement conditions: what, besides the version under test, can change a timing.

Two rows of results belong to one series only if they were measured under the same condition:
the same source (jaxbench or asv), backend, device kind and count, platform version (driver),
machine, CPU, the CPUs the process could use (``usable_cpus``: ``taskset -c 0`` and
``taskset -c 0,1`` are two conditions), Python, jaxlib relative to jax, each recorded timing
environment variable (``XLA_FLAGS``, ``OMP_NUM_THREADS``, ...; the variables of another
backend's runtime, :data:`RUNTIME_VARS`, are left out: ``CUDA_VISIBLE_DEVICES`` does not touch a
CPU timing), each recorded JAX flag, the
persistent compilation cache settings, the timing settings where recorded, whether the machine
was shared (``env.sweep.exclusive`` false: a concurrent local task, or a Slurm task without
``--exclusive``; or ``noise.gpu_shared``: another process on the GPU) and whether the GPU's clocks
were held down (``noise.gpu_throttled``; both :mod:`jaxbench.measure.gpu`; rows that do not say
are alike), whether a user workload's code had uncommitted changes (``workload_dirty``, from
``env.workload_source``: its commit is recorded but is not a condition, like the version under
test; runs of a dirty tree are never pooled with clean ones), and for asv rows the
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from jaxbench.store import Env, Metrics, Noise

NOT_RECORDED = "(not recorded)"
SAME_AS_JAX = "= jax"
CONDITION = "condition"
#: Prefixes of the environment variables that only one kind of backend's runtime reads (the
#: CUDA runtime and NCCL on a GPU, libtpu on a TPU), by the backends (``env.backend``) it
#: runs as. They are conditions of that backend's rows only: submitit's local executor sets
#: ``CUDA_VISIBLE_DEVICES=""`` for a task without GPUs, and a CPU run outside it sets nothing.
RUNTIME_VARS: dict[tuple[str, ...], frozenset[str]] = {
    ("CUDA_", "NCCL_", "NVIDIA_"): frozenset({"gpu", "cuda", "rocm"}),
    ("TPU_", "LIBTPU_"): frozenset({"tpu"}),
}


Row = Mapping[str, Any]
_NO_ENV, _NO_NOISE, _NO_METRICS = Env(), Noise(), Metrics()


def _timing_vars(env: Env) -> dict[str, str]:
    """``env.env_vars`` less those of another backend's runtime (:data:`RUNTIME_VARS`)."""
    if env.backend is None:  # unknown backend: every variable may matter
        return dict(env.env_vars)
    foreign = tuple(p for prefixes, backends in RUNTIME_VARS.items() if env.backend not in backends
                    for p in prefixes)  # fmt: skip
    return {k: v for k, v in env.env_vars.items() if not k.startswith(foreign)}


def _env(row: Row) -> Env:
    env = row.get("env")
    return env if isinstance(env, Env) else _NO_ENV


def _jaxlib(row: Row) -> Any:
    jax, jaxlib = row.get("jax"), row.get("jaxlib")
    if jaxlib is None or pd.isna(jaxlib):
        return None
    return SAME_AS_JAX if jaxlib == jax else jaxlib


def _cache(row: Row, key: str) -> Any:
    cache = row.get("compilation_cache")
    return cache.get(key) if isinstance(cache, dict) else None


def _noise(row: Row) -> Noise:
    noise = row.get("noise")
    return noise if isinstance(noise, Noise) else _NO_NOISE


def _metrics(row: Row) -> Metrics:
    metrics = row.get("metrics")
    return metrics if isinstance(metrics, Metrics) else _NO_METRICS


def _shared(row: Row) -> Any:
    sweep = _env(row).sweep
    why = []
    if sweep is not None and sweep.exclusive is False:
        why.append("sweep task not exclusive")
    if _noise(row).gpu_shared:
        why.append("other processes on the GPU")
    return ", ".join(why) or None


def _workload_dirty(row: Row) -> Any:
    source = _env(row).workload_source
    if source is None or not source.dirty:
        return None
    return f"uncommitted changes in the repository of {source.module}"


def _jax_processes(row: Row) -> Any:
    group = _env(row).jax_processes
    return None if group is None else group.count


def _asv(row: Row, value: Any) -> Any:
    return value if row.get("source") == "asv" else None


#: Fixed condition fields and how each is read from a row of the results frame (a mapping of
#: column to value; ``env``, ``noise`` and ``metrics`` are the store's models).
FIELD_GETTERS: dict[str, Callable[[Row], Any]] = {
    "source": lambda r: r.get("source"),
    "backend": lambda r: r.get("backend"),
    "device_kind": lambda r: r.get("device_kind"),
    "device_count": lambda r: _env(r).device_count,
    "jax_processes": _jax_processes,
    "platform_version": lambda r: _env(r).platform_version,
    "machine": lambda r: r.get("machine"),
    "cpu_model": lambda r: _env(r).host.cpu_model,
    "cpu_count": lambda r: _env(r).host.cpu_count,
    "usable_cpus": lambda r: _env(r).host.usable_cpus,
    "python": lambda r: _env(r).python,
    "jaxlib": _jaxlib,
    "cache_dir": lambda r: _cache(r, "dir"),
    "cache_min_compile_time_s": lambda r: _cache(r, "min_compile_time_secs"),
    "timing": lambda r: _env(r).timing,
    "shared": _shared,
    "gpu_throttled": lambda r: "GPU clocks held down" if _noise(r).gpu_throttled else None,
    "mesh": lambda r: _metrics(r).mesh,
    "workload_dirty": _workload_dirty,
    "asv_number": lambda r: _asv(r, _metrics(r).number),
    "asv_benchmark_version": lambda r: _asv(r, _metrics(r).benchmark_version),
    "commit": lambda r: r.get("commit"),
}
#: Fields that read more than the record's environment (``env`` and the columns made from it):
#: the compilation cache, ``noise`` or ``metrics``.
PER_RECORD = frozenset({"cache_dir", "cache_min_compile_time_s", "shared", "gpu_throttled",
                        "mesh", "asv_number", "asv_benchmark_version"})  # fmt: skip
#: Columns of the results frame made from ``env`` (:func:`jaxbench.analysis.frames.record_row`).
_FROM_ENV = ("source", "backend", "device_kind", "machine", "jax", "jaxlib", "commit")
#: Columns of the results frame that the getters read.
_READ = (*_FROM_ENV, "compilation_cache", "env", "noise", "metrics")
#: Fields used unless told otherwise; ``env.<VAR>`` and ``flag.<name>`` are added per frame.
DEFAULT_FIELDS: tuple[str, ...] = tuple(f for f in FIELD_GETTERS if f != "commit")


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return NOT_RECORDED
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    if pd.isna(value):
        return NOT_RECORDED
    return str(value)


def _rows(frame: pd.DataFrame, columns: Sequence[str]) -> list[dict[str, Any]]:
    """``frame``'s ``columns`` as one dict per row.

    ``Series.tolist`` per column: ``DataFrame.to_dict("records")`` boxes every value one by one.
    """
    present = [c for c in columns if c in frame]
    values = [frame[c].tolist() for c in present]
    return [dict(zip(present, row, strict=True)) for row in zip(*values, strict=True)]


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
    per_env = [(f, FIELD_GETTERS[f]) for f in fields if f not in PER_RECORD]
    # A history's records share a few environments (one model per file and process, as the
    # store loads them): what depends on the environment alone is read once per environment,
    # and each row takes its environment's texts by index.
    rows = _rows(frame, _READ)
    seen: dict[tuple[Any, ...], int] = {}
    env_texts: list[list[str]] = []
    env_more: list[dict[str, Any]] = []
    at = []
    for row in rows:
        key = (id(row.get("env")), *(row.get(c) for c in _FROM_ENV))
        i = seen.get(key)
        if i is None:
            i = seen[key] = len(env_texts)
            env_texts.append([_text(getter(row)) for _, getter in per_env])
            env = _env(row)
            more = {f"env.{k}": v for k, v in _timing_vars(env).items()} if env_vars else {}
            more |= {f"flag.{k}": v for k, v in env.jax_flags.items()} if env_vars else {}
            env_more.append(more)
        at.append(i)
    index = np.asarray(at, dtype=np.int64)

    def spread(texts: list[str]) -> np.ndarray:  # one text per environment -> one per row
        return np.asarray(texts, dtype=object)[index]

    column = {f: j for j, (f, _) in enumerate(per_env)}
    out: dict[str, Any] = {}
    for f in fields:
        if f in column:
            out[f] = spread([texts[column[f]] for texts in env_texts])
        else:
            getter = FIELD_GETTERS[f]
            out[f] = [_text(getter(row)) for row in rows]
    for name in sorted({k for more in env_more for k in more}):
        out[name] = spread([_text(more.get(name)) for more in env_more])
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


def _labels(table: pd.DataFrame) -> list[str]:
    """:func:`condition_label` of each row of a :func:`condition_fields` table.

    Computed once per distinct row: a history's records share a few conditions.
    """
    columns = list(table.columns)
    seen: dict[tuple[str, ...], str] = {}
    out = []
    for values in zip(*(table[c].tolist() for c in columns), strict=True):
        if values not in seen:
            seen[values] = condition_label(dict(zip(columns, values, strict=True)))
        out.append(seen[values])
    return out


#: ``DataFrame.attrs`` key: the ``(fields, env_vars)`` its ``condition`` column was made with.
LABELLED_WITH = "jaxbench.condition_fields"


def add_conditions(
    frame: pd.DataFrame, fields: Sequence[str] = DEFAULT_FIELDS, env_vars: bool = True
) -> pd.DataFrame:
    """``frame`` with a ``condition`` column: each row's :func:`condition_label`.

    The fields it was made with are kept in ``frame.attrs`` (:data:`LABELLED_WITH`; pandas
    carries them through filters and concatenation), so :func:`split_series` with the same
    fields reuses the labels instead of reading every row again.

    Args:
        frame: As :func:`condition_fields`.
        fields: As :func:`condition_fields`.
        env_vars: As :func:`condition_fields`.

    Raises:
        KeyError: As :func:`condition_fields`.
    """
    out = frame.assign(**{CONDITION: _labels(condition_fields(frame, fields, env_vars))})
    out.attrs[LABELLED_WITH] = (tuple(fields), env_vars)
    return out


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
    if CONDITION in frame and frame.attrs.get(LABELLED_WITH) == (tuple(fields), env_vars):
        # Labelled with these fields already: one row per condition says its values (rows of
        # one label recorded the same fields, env.* and flag.* included).
        labels = frame[CONDITION]
        firsts = frame[~labels.duplicated()]
        table = condition_fields(firsts, fields, env_vars)
        values = table.assign(**{CONDITION: labels[firsts.index]}).set_index(CONDITION)
    else:
        table = condition_fields(frame, fields, env_vars)
        labels = pd.Series(_labels(table), index=frame.index)
        values = (table.assign(**{CONDITION: labels}).drop_duplicates(CONDITION)
                  .set_index(CONDITION))  # fmt: skip
    framed = frame.assign(**{CONDITION: labels})
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
