"""Where the time moved, op by op: the diff of two sides' per-op tables from profiler traces.

Each side gives one table per process (:func:`jaxbench.measure.trace.op_table` of a trace taken
after that process's samples). An op's time per call on a side is the mean over its processes,
and the unit of independence of an op's interval is the process: with at least two processes a
side, the ratio of its per-call times gets Welch's t interval on the log scale (an op's time
varies between processes by a factor, not by an amount: :func:`scipy.stats.ttest_ind` with
``equal_var=False``, its ``confidence_interval``, exponentiated). An op whose interval holds 1
moved no more than its noise. With fewer than two processes on a side there is no interval, and
the diff says so.

Where both sides' optimized HLO is at hand, ops are matched by their instruction's place in the
normalised program (:func:`jaxbench.explain.normalize.instruction_keys`: the instruction inside
its content-named computation), so the same instruction matches whatever XLA numbered it on
each side, and instructions of a computation that changed do not match; an op without a place
is matched by name. Without the programs, ops are matched by name (the HLO instruction a CPU
thunk is named after, or a device op's name). An op present on one side only is listed as such
rather than matched by guess.

The profiler has a cost per event, so a program that runs many small ops a call (a loop whose
body runs as thunks on the CPU) is slowed more under it than one that runs few. Each process's
table carries the wall time per call of the same calls untraced and traced (:class:`OpTable`),
and :func:`op_report` says how much longer each side's traced calls took: where that is large,
the ops' times carry the profiler's own cost, not only the programs'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from jaxbench.measure.trace import OpTime

#: Ops listed by :func:`op_lines`, the largest changes first.
MAX_OP_LINES = 12
#: A profiler slowdown (traced over untraced time per call) past which :func:`op_report` warns.
PROFILER_SLOWDOWN_WARN = 1.5


@dataclass(frozen=True)
class OpTable:
    """One process's trace: its per-op table and the wall time per call untraced and traced.

    Attributes:
        ops: :func:`jaxbench.measure.trace.op_table`'s rows.
        untraced_s, traced_s: :class:`jaxbench.measure.trace.TakenTrace`'s; ``None`` in traces
            recorded before they were measured.
    """

    ops: list[OpTime]
    untraced_s: float | None = None
    traced_s: float | None = None

    @property
    def slowdown(self) -> float | None:
        """``traced_s / untraced_s``, the profiler's cost; ``None`` where not measured."""
        if not self.untraced_s or self.traced_s is None:
            return None
        return self.traced_s / self.untraced_s


@dataclass(frozen=True)
class OpChange:
    """One op's change of time per call between two sides.

    Attributes:
        name: The op.
        baseline_s, candidate_s: Mean seconds per call over each side's processes (0 where the
            side does not run it).
        change_s: ``candidate_s - baseline_s``.
        share: ``change_s`` over the change of all ops together (the step's change as traced);
            ``None`` when that total is 0.
        ci_low, ci_high: The interval of the ratio ``candidate_s / baseline_s`` over processes;
            ``None`` with fewer than two processes a side or an op on one side only.
        side: ``both``, ``baseline`` (only there) or ``candidate`` (only there).
    """

    name: str
    baseline_s: float
    candidate_s: float
    change_s: float
    share: float | None
    ci_low: float | None
    ci_high: float | None
    side: str

    @property
    def beyond_noise(self) -> bool | None:
        """Whether the interval excludes 1 (an op of one side only: moved); ``None`` without."""
        if self.side != "both":
            return True
        if self.ci_low is None or self.ci_high is None:
            return None
        return self.ci_low > 1 or self.ci_high < 1


def _by_place(
    tables: Sequence[Sequence[OpTime]], keys: Mapping[str, str] | None
) -> tuple[list[dict[str, float]], dict[str, str]]:
    """Each table as ``{place: seconds per call}``, and each place's op name.

    An op's place is its instruction's place in the normalised program where ``keys`` has it
    (:func:`jaxbench.explain.normalize.instruction_keys`), else its name.
    """
    names: dict[str, str] = {}
    out = []
    for table in tables:
        row: dict[str, float] = {}
        for r in table:
            place = keys.get(r.name, "name:" + r.name) if keys else "name:" + r.name
            names.setdefault(place, r.name)
            row[place] = row.get(place, 0.0) + r.per_call_s
        out.append(row)
    return out, names


def _pair_by_name(
    tables_a: list[dict[str, float]],
    names_a: dict[str, str],
    tables_b: list[dict[str, float]],
    names_b: dict[str, str],
) -> set[str]:
    """Match, by name, ops whose places are on one side each; returns their new places.

    An instruction of a computation that changed has a new place; where the same name is left
    unmatched on both sides, it is taken as the same op, in a changed computation.
    """
    only_a = {names_a[p]: p for p in names_a if p not in names_b}
    only_b = {names_b[p]: p for p in names_b if p not in names_a}
    merged = set()
    for name in only_a.keys() & only_b.keys():
        place = "changed:" + name
        for tables, names, old in ((tables_a, names_a, only_a[name]),
                                   (tables_b, names_b, only_b[name])):  # fmt: skip
            names[place] = names.pop(old)
            for table in tables:
                if old in table:
                    table[place] = table.pop(old)
        merged.add(place)
    return merged


def op_diff(
    baseline: Sequence[Sequence[OpTime]],
    candidate: Sequence[Sequence[OpTime]],
    level: float = 0.95,
    keys: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
) -> list[OpChange]:
    """The change of every op's time per call, the largest absolute change first.

    Args:
        baseline: One op table per process of the baseline.
        candidate: One op table per process of the candidate.
        level: Confidence level of the intervals.
        keys: Each side's :func:`jaxbench.explain.normalize.instruction_keys` of its optimized
            HLO: ops are then matched by their instruction's place in the normalised program
            (the same instruction of the same computation, whatever XLA numbered it), and by
            name where an op has no place, or where ops of one name are left unmatched on both
            sides (named "its computation changed"). ``None`` or an empty side: by name.

    Raises:
        ValueError: A side without any table.
    """
    from scipy import stats

    if not baseline or not candidate:
        raise ValueError("each side needs the op table of at least one process")
    keys_a, keys_b = keys if keys and keys[0] and keys[1] else (None, None)
    tables_a, names_a = _by_place(baseline, keys_a)
    tables_b, names_b = _by_place(candidate, keys_b)
    changed = _pair_by_name(tables_a, names_a, tables_b, names_b)
    rows = []
    for place in sorted(names_a.keys() | names_b.keys()):
        a = np.array([t.get(place, 0.0) for t in tables_a])
        b = np.array([t.get(place, 0.0) for t in tables_b])
        low = high = None
        both = (a > 0).all() and (b > 0).all()
        if both and len(a) >= 2 and len(b) >= 2 and (a.std() > 0 or b.std() > 0):
            ci = stats.ttest_ind(np.log(b), np.log(a), equal_var=False).confidence_interval(level)
            low, high = float(np.exp(ci.low)), float(np.exp(ci.high))
        side = "both" if place in names_a and place in names_b else (
            "baseline" if place in names_a else "candidate")  # fmt: skip
        name_a, name_b = names_a.get(place), names_b.get(place)
        name = name_a if name_b in (None, name_a) else name_b if name_a is None else (
            f"{name_a} -> {name_b}")  # fmt: skip
        if place in changed:
            name = f"{name} (its computation changed)"
        rows.append((name, float(a.mean()), float(b.mean()), low, high, side))
    total = sum(b - a for _, a, b, *_ in rows)
    out = [OpChange(name, a, b, b - a, (b - a) / total if total else None, low, high, side)
           for name, a, b, low, high, side in rows]  # fmt: skip
    return sorted(out, key=lambda c: -abs(c.change_s))


def _us(seconds: float, sign: bool = False) -> str:
    """Microseconds: whole ones from 100 µs, else three significant digits; ``sign``: +/-."""
    us = seconds * 1e6
    text = f"{abs(us):,.0f}" if abs(us) >= 100 else f"{abs(us):.3g}"
    lead = ("-" if us < 0 else "+" if sign else "") if text.strip("0.") else ""
    return f"{lead}{text} µs"


def _share(share: float | None) -> str:
    if share is None:
        return ""
    return ", 0% of the change" if abs(share) < 0.005 else f", {share:.0%} of the change"


def op_lines(
    changes: Sequence[OpChange],
    limit: int = MAX_OP_LINES,
    processes: tuple[int, int] | None = None,
) -> list[str]:
    """Readable lines of :func:`op_diff`: the step's traced change, then the ops that moved.

    With intervals, ops whose change stays within their noise are left out and counted; without
    (fewer than two processes on a side), the largest changes are listed and the lack of an
    interval said, with each side's ``processes`` where given.
    """
    if not changes:
        return ["ops: the traces hold no op"]
    a = sum(c.baseline_s for c in changes)
    b = sum(c.candidate_s for c in changes)
    out = [f"ops (profiler traces): {_us(a)} -> {_us(b)} a call in all ops "
           f"({_us(b - a, sign=True)})"]  # fmt: skip
    intervals = any(c.ci_low is not None for c in changes)
    shown = [c for c in changes if c.beyond_noise] if intervals else list(changes)
    if not intervals:
        counts = "" if processes is None else (
            f" (baseline {processes[0]}, candidate {processes[1]})")  # fmt: skip
        out.append(f"  fewer than two processes on a side{counts}: no interval; the largest "
                   "changes:")  # fmt: skip
    for c in shown[:limit]:
        ci = (
            ""
            if c.ci_low is None
            else f", x{c.candidate_s / c.baseline_s:.3g} [{c.ci_low:.3g}, {c.ci_high:.3g}]"
        )
        only = "" if c.side == "both" else f" (only in the {c.side})"
        out.append(f"  {c.name}: {_us(c.baseline_s)} -> {_us(c.candidate_s)} "
                   f"({_us(c.change_s, sign=True)}{ci}{_share(c.share)}){only}")  # fmt: skip
    if len(shown) > limit:  # said before the noise line, so it is not read as more of those
        out.append(f"  ... {len(shown) - limit} more like these, smaller")
    quiet = sum(c.beyond_noise is False for c in changes)
    if quiet:
        out.append(f"  {quiet} op(s) moved within their noise")
    return out


def _slowdown(tables: Sequence[OpTable]) -> float | None:
    found = [t.slowdown for t in tables if t.slowdown is not None]
    return float(np.median(found)) if found else None


def op_report(
    baseline: Sequence[OpTable],
    candidate: Sequence[OpTable],
    keys: tuple[Mapping[str, str], Mapping[str, str]] | None = None,
) -> list[str]:
    """:func:`op_lines` of the two sides' processes, then the profiler's cost on each side.

    ``keys`` as :func:`op_diff`'s.

    The cost is the median over a side's processes of traced over untraced time per call
    (:attr:`OpTable.slowdown`). When either side's is past :data:`PROFILER_SLOWDOWN_WARN`,
    a line says that its ops' times are inflated by the profiler.

    Raises:
        ValueError: A side without any table.
    """
    changes = op_diff([t.ops for t in baseline], [t.ops for t in candidate], keys=keys)
    lines = op_lines(changes, processes=(len(baseline), len(candidate)))
    a, b = _slowdown(baseline), _slowdown(candidate)
    if a is None or b is None:
        return lines
    lines.append(f"  the traced calls took x{a:.3g} (baseline) and x{b:.3g} (candidate) the time "
                 "of the same calls untraced")  # fmt: skip
    if max(a, b) > PROFILER_SLOWDOWN_WARN:
        lines.append("  so the profiler's own cost is in these op times: it is paid per op run, "
                     "most where a call runs many small ops (a loop body run as thunks); the "
                     "step's own change is in the timed samples (run, compare)")  # fmt: skip
    return lines
