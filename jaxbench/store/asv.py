"""asv results (``results/asv/<machine>/<commit>-<env>.json``) as records, at the store's edge.

Each asv result file holds, per benchmark, one value per parameter combination and (with
``asv run --record-samples``) the raw samples. :func:`records` turns every combination into a
:class:`jaxbench.store.Record`, so the store's loader (:func:`jaxbench.store.load`) returns asv
results as the same records (and the analysis the same rows) as jaxbench's own runs.

Mapping (asv -> record):

- ``benchmark``: asv's name, e.g. ``bench_train_step.TrainStep.time_step``;
- ``status``: ``ok``; ``failed`` where asv stored no value (the benchmark raised);
  ``skipped`` where it stored NaN (``NotImplementedError``: backend absent, not applicable);
- ``samples_s``: the raw samples of ``time_*`` benchmarks (empty without ``--record-samples``);
- ``metrics``: ``value`` (asv's result: the median for ``time_*``), ``unit``, ``type``
  (``time``/``track``/``peakmem``), ``asv_env``, ``stats_q_25``/``stats_q_75``, ``number``,
  ``benchmark_version`` (asv's hash of the benchmark's source: the result's ``version`` column,
  else ``benchmarks.json``'s; a changed benchmark is another measurement);
- ``track_compile_s``, ``track_lower_s``, ``track_device_peak_bytes`` and ``peakmem_*`` also fill
  ``compile_s``, ``lower_s``, ``device_peak_bytes`` and ``host_peak_rss_bytes``;
- ``env``: ``jax``/``jaxlib`` from the environment's requirements (``None`` for asv's
  ``existing`` environments, which do not record them), ``python``, ``backend`` (the
  ``backend`` parameter), ``host`` (asv's machine name, CPU, core count, OS, RAM) and
  ``git.commit``.

Results are JSON only (asv's format version 2).
"""

from __future__ import annotations

import ast
import datetime as _dt
import itertools
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from jaxbench.store.record import Record

ASV_RESULTS_VERSION = 2
_FIELD_OF_TRACK = {
    "track_compile_s": "compile_s",
    "track_lower_s": "lower_s",
    "track_device_peak_bytes": "device_peak_bytes",
}


class AsvFormatError(ValueError):
    """An asv result file that cannot be converted; the message names what is wrong."""


def _benchmarks_meta(file: Path) -> dict[str, Any]:
    """``benchmarks.json`` of the results folder holding ``file`` (param names, units)."""
    for parent in file.parents:
        meta = parent / "benchmarks.json"
        if meta.is_file():
            try:
                data = json.loads(meta.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise AsvFormatError(f"{meta}: not readable as JSON: {exc}") from exc
            return data if isinstance(data, dict) else {}
    return {}


def _value(text: Any) -> Any:
    """Turn asv parameter reprs (how asv stores them) back into values."""
    if not isinstance(text, str):
        return text
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _row_value(row: list[Any], columns: list[str], name: str) -> Any:
    i = columns.index(name) if name in columns else -1
    return row[i] if 0 <= i < len(row) else None


def _at(values: Any, i: int) -> Any:
    return values[i] if isinstance(values, list) and i < len(values) else None


def records(data: dict[str, Any], path: str | Path) -> Iterator[Record]:
    """The records of one asv result file: one per benchmark and parameter combination.

    Args:
        data: The file's parsed JSON.
        path: The file (its folder's ``benchmarks.json`` gives parameter names and units).

    Raises:
        AsvFormatError: Not asv's results format version 2, or a malformed entry (names the
            benchmark).
    """
    file = Path(path)
    if data.get("version") != ASV_RESULTS_VERSION:
        raise AsvFormatError(
            f"asv results version {data.get('version')!r} is not supported "
            f"(expected {ASV_RESULTS_VERSION})"
        )
    for key in ("commit_hash", "env_name", "results", "result_columns"):
        if key not in data:
            raise AsvFormatError(f"not an asv result file (no {key!r})")
    meta = _benchmarks_meta(file)
    columns: list[str] = data["result_columns"]
    info = data.get("params") or {}
    reqs = data.get("requirements") or {}
    env_base = {
        "jax": reqs.get("jax") or info.get("jax") or None,
        "jaxlib": reqs.get("jaxlib") or info.get("jaxlib") or None,
        "python": data.get("python"),
        "device_kind": None,
        "host": {
            "hostname": info.get("machine"),
            "cpu_model": info.get("cpu"),
            "cpu_count": int(info["num_cpu"]) if str(info.get("num_cpu", "")).isdigit() else None,
            "os": info.get("os"),
            "memory_bytes": int(info["ram"]) if str(info.get("ram", "")).isdigit() else None,
        },
        "git": {"commit": data["commit_hash"]},
        "asv": {"env_name": data["env_name"], "date": data.get("date")},
        "env_vars": data.get("env_vars") or {},
    }
    run_id = f"asv-{str(data['commit_hash'])[:8]}-{data['env_name']}"
    for name, row in data["results"].items():
        try:
            yield from _records_of(name, row, columns, meta.get(name, {}), env_base, run_id)
        except ValidationError as exc:  # a value a record cannot hold: the first, in one line
            errors = exc.errors()
            where = ".".join(map(str, errors[0]["loc"])) or "top level"
            more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
            raise AsvFormatError(f"benchmark {name!r}: {where}: {errors[0]['msg']}{more}") from None
        except (TypeError, ValueError, IndexError) as exc:
            raise AsvFormatError(f"benchmark {name!r}: {exc}") from exc


def _records_of(
    name: str,
    row: list[Any],
    columns: list[str],
    meta: dict[str, Any],
    env_base: dict[str, Any],
    run_id: str,
) -> Iterator[Record]:
    results = _row_value(row, columns, "result")
    params = _row_value(row, columns, "params") or []
    combos = list(itertools.product(*params)) if params else [()]
    if not isinstance(results, list):
        results = [results] * len(combos)
    names = list(meta.get("param_names") or [f"param{i}" for i in range(len(params))])
    kind = meta.get("type") or name.rsplit(".", 1)[-1].split("_", 1)[0]
    kind = "peakmem" if kind == "peakmemory" else kind
    method = name.rsplit(".", 1)[-1]
    samples = _row_value(row, columns, "samples")
    bench_version = _row_value(row, columns, "version") or meta.get("version")
    started = _row_value(row, columns, "started_at")
    started_at = (
        _dt.datetime.fromtimestamp(started / 1000, _dt.UTC).isoformat()
        if isinstance(started, int | float)
        else None
    )
    for i, combo in enumerate(combos):
        case = {k: _value(v) for k, v in zip(names, combo, strict=True)}
        value = results[i] if i < len(results) else None
        rec: dict[str, Any] = {
            "run_id": run_id,
            "benchmark": name,
            "params": case,
            "started_at": started_at,
            "env": {**env_base, "backend": case.get("backend")},
            "metrics": {
                "value": value,
                "unit": meta.get("unit"),
                "type": kind,
                "asv_env": env_base["asv"]["env_name"],
                "stats_q_25": _at(_row_value(row, columns, "stats_q_25"), i),
                "stats_q_75": _at(_row_value(row, columns, "stats_q_75"), i),
                "number": _at(_row_value(row, columns, "stats_number"), i),
                "benchmark_version": bench_version,
            },
        }
        if value is None:
            rec |= {"status": "failed", "error": "asv: the benchmark raised (see asv's log)"}
        elif isinstance(value, float) and math.isnan(value):
            rec |= {"status": "skipped", "error": "asv: skipped (NotImplementedError)"}
        else:
            rec["status"] = "ok"
            if kind == "time":
                rec["samples_s"] = [float(s) for s in (_at(samples, i) or [])]
            elif kind == "peakmem":
                rec["host_peak_rss_bytes"] = int(value)
            elif method in _FIELD_OF_TRACK:
                field = _FIELD_OF_TRACK[method]
                rec[field] = int(value) if field == "device_peak_bytes" else float(value)
        yield Record(**rec)
