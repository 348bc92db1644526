"""The saved program artifacts of a review's records, as a frame for notebooks.

Each timed record names its case's artifact (``Record.programs``: :mod:`jaxbench.store.programs`).
:func:`programs_frame` reads every distinct artifact once and gives one row per compiled
program: the counts derived from its optimized HLO (:func:`jaxbench.explain.hlo_counts`), XLA's
FLOP and bytes, its memory analysis, and its compile phases. An artifact that does not load is
a row with ``problem`` set, not an error. :func:`traced_op_lines` diffs the per-op tables that
traced records keep (``run --trace``), for ``explain`` and the report's Explanations.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from jaxbench.explain import hlo_counts
from jaxbench.explain.normalize import programs_keys
from jaxbench.explain.ops import OpTable, op_report
from jaxbench.explain.saved import SavedSide, pick_artifact
from jaxbench.measure.trace import OpTime
from jaxbench.store import ArtifactError, CaseComparison, Problem, Trace, load_programs

#: Derived counts kept as columns (the rest of :func:`hlo_counts`' keys are left out).
COUNT_COLUMNS = ("instructions", "fusion:kLoop", "fusion:kInput", "fusion:kOutput", "copy",
                 "in while bodies")  # fmt: skip
PROGRAM_COLUMNS = (
    "case", "jax", "records", "digest", "target", *COUNT_COLUMNS, "flops", "bytes_accessed",
    "temp_bytes", "output_bytes", "trace_s", "lower_s", "backend_compile_s", "problem",
)  # fmt: skip


def programs_frame(records: pd.DataFrame) -> pd.DataFrame:
    """One row per program of each artifact the ``ok`` records name.

    Args:
        records: Rows of :func:`jaxbench.analysis.load_results` (``case``, ``jax``, ``status``,
            ``file``, ``programs``).

    Returns:
        Columns :data:`PROGRAM_COLUMNS`: ``records`` counts the records naming the artifact;
        counts are instructions of the optimized HLO; ``flops`` FLOP and ``*_bytes`` bytes
        from XLA; ``*_s`` the median seconds of each compile phase over those records. Empty
        (with those columns) when no record names an artifact.
    """
    if "programs" not in records:
        return pd.DataFrame(columns=PROGRAM_COLUMNS)
    named = records[(records["status"] == "ok") & records["programs"].notna()].assign(
        folder=lambda f: f["file"].map(lambda p: str(Path(p).parent))
    )
    rows = []
    groups = named.groupby(["case", "jax", "folder", "programs"], sort=True, observed=True)
    for (case, jax, folder, digest), group in groups:
        base = {"case": case, "jax": jax, "records": len(group), "digest": digest[:12]}
        try:
            programs = load_programs(folder, digest)
        except ArtifactError as exc:
            rows.append(base | {"problem": str(exc)})
            continue
        side = artifact_of(group)
        medians = side.phases_s if side is not None else {}
        rows += [base | _program_row(p, medians.get(p["name"], {})) for p in programs]
    return pd.DataFrame(rows, columns=PROGRAM_COLUMNS)


def artifact_of(rows: pd.DataFrame) -> SavedSide | None:
    """The artifact most of ``rows`` name (:func:`jaxbench.explain.saved.pick_artifact`).

    Args:
        rows: Rows of :func:`jaxbench.analysis.load_results` of one case and side (``file``,
            ``programs``, ``compile_phases_s`` where recorded); only ``ok`` rows count.

    Returns:
        The :class:`~jaxbench.explain.saved.SavedSide`, ``None`` when no row names one.
    """
    if "programs" not in rows:
        return None
    rows = rows[rows["status"] == "ok"]
    phases = rows["compile_phases_s"] if "compile_phases_s" in rows else [None] * len(rows)
    return pick_artifact(zip(rows["file"], rows["programs"], phases, strict=True))


def artifact_problems(records: pd.DataFrame) -> list[Problem]:
    """One :class:`~jaxbench.store.Problem` per artifact named by ``ok`` records that does not load.

    Args:
        records: Rows of :func:`jaxbench.analysis.load_results` (``file``, ``programs``).
    """
    if "programs" not in records:
        return []
    named = records[(records["status"] == "ok") & records["programs"].notna()]
    places = {
        (str(Path(f).parent), d) for f, d in zip(named["file"], named["programs"], strict=True)
    }
    out = []
    for folder, digest in sorted(places):
        try:
            load_programs(folder, digest)
        except ArtifactError as exc:
            out.append(
                Problem(
                    str(exc.path), f"program artifact {exc.reason}; its cases are not explained"
                )
            )
    return out


def _program_row(program: dict, phases: dict[str, float]) -> dict:
    counts = hlo_counts(program.get("hlo", ""))
    memory, cost = program.get("memory", {}), program.get("cost", {})
    return {
        "target": program["name"],
        **{c: counts.get(c, 0) for c in COUNT_COLUMNS},
        "flops": cost.get("flops"),
        "bytes_accessed": cost.get("bytes accessed"),
        "temp_bytes": memory.get("temp_size_in_bytes"),
        "output_bytes": memory.get("output_size_in_bytes"),
        **{f"{k}_s": phases.get(k) for k in ("trace", "lower", "backend_compile")},
    }


def _op_table(trace: Trace | None) -> OpTable | None:
    """A trace's op table and the profiler's cost; ``None`` without ops."""
    if trace is None or not trace.ops:
        return None
    return OpTable([OpTime(**op) for op in trace.ops], trace.untraced_s, trace.traced_s)


def _sides_op_lines(
    a: list[OpTable], b: list[OpTable], keys: tuple[dict[str, str], dict[str, str]] | None = None
) -> list[str]:
    if not a and not b:
        return []
    if not (a and b):
        return [f"ops: no trace on the {'baseline' if not a else 'candidate'} side (run it "
                "with --trace)"]  # fmt: skip
    return op_report(a, b, keys)


def traced_op_lines(baseline: pd.DataFrame, candidate: pd.DataFrame) -> list[str]:
    """The op diff of one case's traced records (``run --trace``), one op table per process.

    Args:
        baseline: ``ok`` rows of one case on the baseline side (the ``trace`` and ``process``
            columns of :func:`jaxbench.analysis.load_results`).
        candidate: The same for the candidate side.

    Returns:
        :func:`jaxbench.explain.ops.op_report` over the processes that traced, a line saying
        which side has no trace when only one has, and nothing when neither has.
    """

    def tables(rows: pd.DataFrame) -> list[OpTable]:
        if "trace" not in rows:
            return []
        by_process: dict[str, OpTable] = {}
        for process, trace in zip(rows["process"], rows["trace"], strict=True):
            table = _op_table(trace)
            if table is not None:  # the first traced record of each process
                by_process.setdefault(process, table)
        return list(by_process.values())

    keys = (_side_keys(baseline), _side_keys(candidate))
    return _sides_op_lines(tables(baseline), tables(candidate), keys)


def _side_keys(rows: pd.DataFrame) -> dict[str, str]:
    """The instruction places of the programs the rows name (``programs_keys``).

    Empty where they name none or it does not load: the ops are then matched by name.
    """
    side = artifact_of(rows) if "programs" in rows else None
    if side is None:
        return {}
    try:
        return programs_keys(load_programs(side.folder, side.digest))
    except ArtifactError:
        return {}


def paired_op_lines(comparison: CaseComparison) -> list[str]:
    """The op diff of a live comparison's traces (``compare --interleave --trace``).

    Each pair's two workers traced the case after its timed rounds; a pair's worker is a side's
    process, the unit of the ops' intervals.

    Returns:
        As :func:`traced_op_lines`, over the pairs whose side traced.
    """
    sides: tuple[list[OpTable], list[OpTable]] = ([], [])
    for pair in comparison.pairs:
        for info, tables in ((pair.baseline, sides[0]), (pair.candidate, sides[1])):
            table = _op_table(info.trace if info is not None else None)
            if table is not None:
                tables.append(table)
    return _sides_op_lines(*sides)
