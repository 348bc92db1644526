"""Tables for the terminal (rich): the records of a run, and the comparison tables' renderer.

The comparison tables are built once, in :mod:`jaxbench.analysis` (a
:class:`~jaxbench.analysis.text_table.TextTable` per table kind), and rendered here by
:func:`rich_table`; the report renders the same models as Markdown.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.table import Table
from rich.text import Text

from jaxbench.analysis import report_tables
from jaxbench.analysis.derived import record_figures
from jaxbench.analysis.report_live import live_table
from jaxbench.analysis.report_tables import METRIC_NAMES
from jaxbench.analysis.text_table import TextTable
from jaxbench.store import Record, case_label
from jaxbench.units import fmt_bytes, fmt_rate, fmt_seconds

BARE_PARAMS = ("size", "dtype", "strategy", "optimizer")
COLUMNS = (
    "benchmark",
    "params",
    "status",
    "n",
    "p50",
    "p95",
    "IQR",
    "compile",
    "FLOP/s",
    "MFU",
    "device peak",
)
#: Left out where every record has ``n/a`` (a CPU: no listed peak, no device memory figures).
OPTIONAL_COLUMNS = ("MFU", "device peak")
LEFT_COLUMNS = ("benchmark", "jax", "params", "status")
#: Shown only where some record has them: per-call tokens and formula FLOP of the workload.
MODEL_COLUMNS = {
    "tokens/s": "tokens_per_s",
    "tokens/s/device": "tokens_per_s_per_device",
    "MFU (formula)": "model_mfu",
    "algbw": "algbw_Bps",
    "busbw": "busbw_Bps",
}
REUSED_MARK = "*"
#: A device peak reached by an earlier case of the process (JAX cannot reset it).
EARLIER_PEAK_MARK = "^"


def params_label(params: dict) -> str:
    """``tiny float32 k=8 wrt=input``: values alone where the name is obvious."""
    return " ".join(
        str(v) if k in BARE_PARAMS else f"{k}={v}" for k, v in params.items() if k != "strategy"
    )


def records_table(records: list[Record], title: str) -> Table:
    """One row per record: status, p50, p95, IQR, compile s, FLOP/s, MFU, device peak.

    FLOP/s and MFU use XLA's counted FLOP. Where a workload gives tokens or formula FLOP per
    call (:data:`MODEL_COLUMNS`), ``tokens/s`` and ``MFU (formula)`` follow; where it gives a
    collective's message size, ``algbw`` and ``busbw`` (GB/s, nccl-tests' definitions).
    Records of more than one JAX version get a ``jax`` column. ``MFU`` and ``device peak`` are
    left out where
    they are ``n/a`` for every record (a CPU has no listed peak and no device memory
    statistics), and the caption says so once.

    A compile time marked ``*`` was measured once for a program that an earlier case of the same
    process compiled first; a device peak marked ``^`` is an earlier case's (the record's
    ``device_peak_scope``); the caption says so. A pipelined record's benchmark reads
    ``name (pipelined xN)``: its p50 is per call of N dispatched together, not a blocked latency;
    ``(GPU throttled)`` and ``(GPU shared)`` mark records whose GPU was slowed or shared while
    timed (:mod:`jaxbench.measure.gpu`); ``(N JAX processes)`` a program over several processes
    (:mod:`jaxbench.distributed`).
    """
    figures = [record_figures(rec) for rec in records]
    rows = []
    for rec, s in zip(records, figures, strict=True):
        reused = bool(rec.compilation_cache.get("compile_reused_in_process"))
        row = {
            "benchmark": rec.benchmark + _marks(rec),
            "jax": str(rec.env.jax or "?"),
            "params": params_label(rec.params),
            "status": rec.status,
            "n": str(s["n"]),
            "p50": fmt_seconds(s["p50_s"]),
            "p95": fmt_seconds(s["p95_s"]),
            "IQR": fmt_seconds(s["iqr_s"]),
            "compile": fmt_seconds(rec.compile_s) + (REUSED_MARK if reused else ""),
            "FLOP/s": fmt_rate(s["flops_per_s"]),
            "MFU": "n/a" if s["mfu"] is None else f"{100 * s['mfu']:.1f}%",
            "device peak": fmt_bytes(rec.device_peak_bytes)
            + (EARLIER_PEAK_MARK if rec.device_peak_scope == "process" else ""),
        }
        rows.append(row | {col: _model_cell(key, s[key]) for col, key in MODEL_COLUMNS.items()})
    shown = [c for c in COLUMNS if c not in OPTIONAL_COLUMNS or any(r[c] != "n/a" for r in rows)]
    if len({r["jax"] for r in rows}) > 1:
        shown.insert(1, "jax")
    shown += [c for c in MODEL_COLUMNS if any(r[c] != "n/a" for r in rows)]
    table = Table(title=title)
    for col in shown:
        table.add_column(col, justify="left" if col in LEFT_COLUMNS else "right")
    for row in rows:
        table.add_row(*(Text(row[c], style="yellow" if c == "status" and row[c] != "ok" else "")
                        for c in shown))  # fmt: skip
    notes = []
    if any(REUSED_MARK in r["compile"] for r in rows):
        notes.append(f"{REUSED_MARK} compiled once, by an earlier case of this run")
    if "device peak" in shown and any(EARLIER_PEAK_MARK in r["device peak"] for r in rows):
        notes.append(f"{EARLIER_PEAK_MARK} the process's device peak, reached by an earlier case "
                     "(this case's own is at most it)")  # fmt: skip
    hidden = [c for c in OPTIONAL_COLUMNS if c not in shown]
    if rows and hidden:
        notes.append(f"{' and '.join(hidden)}: n/a for every record here, left out")
    table.caption = "; ".join(notes) or None
    return table


def _marks(rec: Record) -> str:
    """What makes a p50 not alike, as marks after the benchmark's name.

    `` (pipelined xN)``, `` (GPU throttled)``, `` (GPU shared)``, `` (N JAX processes)``.
    """
    pipeline = (rec.env.timing or {}).get("pipeline")
    marks = [f"pipelined x{pipeline}"] if pipeline else []
    marks += ["GPU throttled"] if rec.noise.gpu_throttled else []
    marks += ["GPU shared"] if rec.noise.gpu_shared else []
    group = rec.env.jax_processes
    marks += [f"{group.count} JAX processes"] if group else []
    return "".join(f" ({m})" for m in marks)


def _model_cell(key: str, value: float | None) -> str:
    if value is None:
        return "n/a"
    if key.endswith("_Bps"):
        return f"{value / 1e9:.3g} GB/s"
    return f"{100 * value:.1f}%" if key == "model_mfu" else f"{value:,.0f}"


def problems(records: list[Record]) -> list[str]:
    """One line per distinct (status, reason) among records that are not ``ok``, with a count.

    Each line names one such case by its label (:func:`jaxbench.store.case_label`).
    """
    groups = Counter((r.status, r.error) for r in records if r.status != "ok")
    first = {}
    for r in records:
        first.setdefault((r.status, r.error), r)
    lines = []
    for (status, error), n in groups.items():
        example = first[(status, error)]
        where = case_label(example.benchmark, example.params)
        more = f" (and {n - 1} more)" if n > 1 else ""
        lines.append(f"{status}: {where}{more}: {error}")
    return lines


def nothing_measured(records: list[Record]) -> str | None:
    """One line where there are records, none ``ok`` and none ``failed``, else ``None``.

    A run or sweep that measured nothing in steady state (a backend absent on every node, a
    step that recompiles every call) is not a success, though each skip or recompile on its
    own is a row, not an error: ``run``, a local ``submit`` and ``collect`` exit 1 with this
    line. (A ``failed`` case has its own line and exit 1.)
    """
    if not records or any(r.status in ("ok", "failed") for r in records):
        return None
    counts = Counter(r.status for r in records)
    said = ", ".join(f"{n} {status}" for status, n in counts.items())
    return (f"nothing was measured: none of the {len(records)} case(s) is ok ({said}); the "
            f"first: {records[0].error}")  # fmt: skip


_VERDICT_STYLE = {"slower": "bold red", "faster": "green", "unstable": "yellow"}


def rich_table(model: TextTable) -> Table:
    """A :class:`~jaxbench.analysis.text_table.TextTable` for the terminal.

    Cells are plain text (never read as rich markup); verdict cells are coloured (``slower``
    red, ``faster`` green, ``unstable`` yellow); the notes are the caption.
    """
    table = Table(title=model.title or None)
    for col in model.columns:
        table.add_column(col.header, justify=col.justify)
    for row in model.rows:
        table.add_row(*(Text(cell, style=_VERDICT_STYLE.get(cell, "") if col.verdict else "")
                        for col, cell in zip(model.columns, row, strict=True)))  # fmt: skip
    table.caption = "; ".join(model.notes) or None
    return table


def verdict_notes(frame: Any) -> list[str]:
    """One line per row whose verdict needs a word: why ``inconclusive`` or ``unstable``."""
    out = []
    for row in frame.to_dict("records"):
        advice = row.get("advice")
        if row.get("verdict") in ("inconclusive", "unstable") and advice:
            name = row.get("metric")
            metric = f"{METRIC_NAMES.get(name, name)} " if name else ""
            out.append(f"{row['verdict']}: {metric}{row['case']}: {advice}")
    return out


def comparison_model(result: Any) -> TextTable:
    """A :class:`jaxbench.analysis.Comparison` as a table model: one row per metric and case.

    The terminal's columns (:func:`jaxbench.analysis.report_tables.comparison_table` with
    ``compact``); the title gives the thresholds and the interval's level.
    """
    level = 1 - result.alpha
    title = (
        f"{result.candidate} vs {result.baseline} (threshold {result.threshold:.0%}, "
        f"compile {result.compile_threshold:.0%}, {level:.0%} intervals over processes)"
    )
    return report_tables.comparison_table(result.table, compact=True, title=title)


def comparison_table(result: Any) -> Table:
    """:func:`comparison_model` for the terminal."""
    return rich_table(comparison_model(result))


def live_comparison_model(frame: Any) -> TextTable:
    """Rows of :func:`jaxbench.analysis.live.comparisons_frame` as a table model.

    The terminal's columns (:func:`jaxbench.analysis.report_live.live_table` with ``compact``).
    """
    units = {"interleaved": "process pairs", "back_to_back": "processes (each side's apart)"}
    modes = dict.fromkeys(frame.get("mode", ["interleaved"]))
    over = " or ".join(units.get(m, str(m)) for m in modes)
    title = f"live comparison (candidate / baseline), intervals over {over}"
    return live_table(frame, compact=True, title=title)


def live_comparison_table(frame: Any) -> Table:
    """:func:`live_comparison_model` for the terminal."""
    return rich_table(live_comparison_model(frame))
