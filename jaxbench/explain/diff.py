"""What changed between two captures of one case's programs, and what that says about its time.

:func:`diff_programs` compares the programs of a baseline and a candidate target by target: at
each level (jaxpr, StableHLO, optimized HLO; names and metadata set aside by
:mod:`jaxbench.explain.normalize`) identical or not, the HLO counts that changed, XLA's FLOP,
bytes accessed and memory figures, and a bounded unified diff of the normalised optimized HLO.
:func:`explain_lines` turns that into text, reading the optimized HLO first: it is what runs.
When it is identical on both sides, what runs is identical and a change of time is below HLO (the
runtime or code generation), whatever the jaxpr or StableHLO say; their differences are listed
as context, and XLA cost figures that differ between identical optimized programs are marked as
the cost model's, not the program's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from jaxbench.explain.normalize import NORMALIZERS, hlo_counts
from jaxbench.measure.programs import LEVELS

#: Most lines of the unified diff of optimized HLO that are kept per target.
MAX_DIFF_LINES = 60
LEVEL_NAMES = {"jaxpr": "jaxpr", "stablehlo": "StableHLO", "hlo": "optimized HLO"}
#: What the first differing level says about where the change was made.
WHERE = {
    "jaxpr": "JAX traced a different program (a change above XLA: the library, its rules, or "
    "the workload's code)",
    "stablehlo": "the same jaxpr lowered to a different StableHLO (JAX's lowering rules)",
    "hlo": "the same StableHLO was optimized differently (XLA's passes)",
}
BELOW_HLO = (
    "the optimized programs are identical (what runs is identical), so the cause is below HLO: "
    "the runtime or code generation. Next: set XLA_FLAGS=--xla_dump_to=DIR on both sides and "
    "compare the buffer assignment and the generated code XLA writes there for the module (on "
    "the CPU, an object file per kernel), or profile both runs."
)
COST_KEYS = ("flops", "bytes accessed", "transcendentals")


@dataclass
class TargetDiff:
    """The comparison of one compile target (e.g. ``train_step``) between two captures.

    Attributes:
        name: The target's name.
        identical: Level (:data:`jaxbench.measure.programs.LEVELS`) -> normalised texts equal.
        counts: Count name -> ``(baseline, candidate)``, only those that changed
            (:func:`jaxbench.explain.normalize.hlo_counts`).
        cost: :data:`COST_KEYS` -> ``(baseline, candidate)`` (FLOP, bytes), only those that
            changed; ``None`` where a side lacks the figure.
        memory: Memory-analysis field -> ``(baseline, candidate)`` bytes, only those changed.
        hlo_diff: Unified diff lines of the normalised optimized HLO, at most
            :data:`MAX_DIFF_LINES`.
        diff_lines_left_out: Diff lines beyond :data:`MAX_DIFF_LINES`.
        first_diff: Where the first differing level is the jaxpr or StableHLO, the unified
            diff of its normalised text (at most :data:`MAX_DIFF_LINES`), else empty.
        first_diff_left_out: Its lines beyond :data:`MAX_DIFF_LINES`.
        truncated: Levels cut on either side at capture (their comparison is of the kept part).
        phases_s: Compile phase (``trace``, ``lower``, ``backend_compile``) -> ``(baseline,
            candidate)`` seconds, where both sides measured it (a hint, not a verdict:
            compile-time verdicts come from the records, over processes).
        flags: Flag -> ``(baseline, candidate)``, only those that differ
            (:func:`jaxbench.measure.programs.effective_flags`).
        partitions: ``(baseline, candidate)`` devices the optimized program is split over
            (its module's ``num_partitions``, 1 where unsharded): XLA's cost figures are one
            device's share where it is above 1.
    """

    name: str
    identical: dict[str, bool]
    counts: dict[str, tuple[int, int]] = field(default_factory=dict)
    cost: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    memory: dict[str, tuple[int | None, int | None]] = field(default_factory=dict)
    hlo_diff: list[str] = field(default_factory=list)
    diff_lines_left_out: int = 0
    first_diff: list[str] = field(default_factory=list)
    first_diff_left_out: int = 0
    truncated: list[str] = field(default_factory=list)
    phases_s: dict[str, tuple[float, float]] = field(default_factory=dict)
    flags: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    partitions: tuple[int, int] = (1, 1)

    @property
    def first_difference(self) -> str | None:
        """The level where the change entered (:func:`changed_at`); ``None`` if none differs."""
        return changed_at(self.identical)


def changed_at(identical: dict[str, bool]) -> str | None:
    """The level, of :data:`LEVELS` in order, where the programs' change entered.

    The first level that differs below the last identical one above the deepest difference: a
    jaxpr that differs only in how it prints (``out_sharding=None``) but lowers to an identical
    StableHLO is context, and a change of the optimized HLO below it is XLA's passes. ``None``
    where no level differs.
    """
    differ = [i for i, level in enumerate(LEVELS) if not identical[level]]
    if not differ:
        return None
    same = [i for i in range(differ[-1]) if identical[LEVELS[i]]]  # above the last difference
    return next(LEVELS[i] for i in differ if i > (same[-1] if same else -1))


def _changed(a: dict[str, Any], b: dict[str, Any], keys: Any = None) -> dict[str, tuple]:
    names = keys if keys is not None else sorted(set(a) | set(b))
    return {k: (a.get(k), b.get(k)) for k in names if a.get(k) != b.get(k)}


def _unified(level: str, baseline: dict[str, Any], candidate: dict[str, Any]) -> list[str]:
    normalize = NORMALIZERS[level]
    a, b = normalize(baseline.get(level, "")), normalize(candidate.get(level, ""))
    return list(difflib.unified_diff(a.splitlines(), b.splitlines(), "baseline", "candidate",
                                     n=2, lineterm=""))  # fmt: skip


def partitions(hlo: str) -> int:
    """Devices an optimized HLO module is split over: its header's ``num_partitions`` (or 1)."""
    found = re.search(r"num_partitions=(\d+)", hlo.split("\n", 1)[0])
    return int(found.group(1)) if found else 1


def diff_target(baseline: dict[str, Any], candidate: dict[str, Any]) -> TargetDiff:
    """Compare one target's captures (:func:`jaxbench.measure.programs.capture` dicts)."""
    identical = {
        level: normalize(baseline.get(level, "")) == normalize(candidate.get(level, ""))
        for level, normalize in NORMALIZERS.items()
    }
    counts_a, counts_b = hlo_counts(baseline["hlo"]), hlo_counts(candidate["hlo"])
    counts = {k: (counts_a.get(k, 0), counts_b.get(k, 0)) for k in set(counts_a) | set(counts_b)}
    hlo = _unified("hlo", baseline, candidate) if not identical["hlo"] else []
    first = changed_at(identical)
    above = _unified(first, baseline, candidate) if first in ("jaxpr", "stablehlo") else []
    return TargetDiff(
        name=baseline["name"],
        identical=identical,
        counts={k: v for k, v in sorted(counts.items()) if v[0] != v[1]},
        cost=_changed(baseline.get("cost", {}), candidate.get("cost", {}), COST_KEYS),
        memory=_changed(baseline.get("memory", {}), candidate.get("memory", {})),
        hlo_diff=hlo[:MAX_DIFF_LINES],
        diff_lines_left_out=max(0, len(hlo) - MAX_DIFF_LINES),
        first_diff=above[:MAX_DIFF_LINES],
        first_diff_left_out=max(0, len(above) - MAX_DIFF_LINES),
        truncated=sorted(set(baseline.get("truncated", [])) | set(candidate.get("truncated", []))),
        phases_s=_phases(baseline, candidate),
        flags=_changed(baseline.get("flags", {}), candidate.get("flags", {})),
        partitions=(partitions(baseline["hlo"]), partitions(candidate["hlo"])),
    )


def _phases(baseline: dict[str, Any], candidate: dict[str, Any]) -> dict[str, tuple[float, float]]:
    a, b = baseline.get("phases_s") or {}, candidate.get("phases_s") or {}
    return {k: (float(a[k]), float(b[k])) for k in a if k in b and (a[k] or b[k])}


def diff_programs(
    baseline: list[dict[str, Any]], candidate: list[dict[str, Any]]
) -> list[TargetDiff]:
    """Compare two captures of one case, target by target (matched by name).

    Raises:
        ValueError: The two sides do not have the same target names (the message lists both).
    """
    names_a, names_b = [p["name"] for p in baseline], [p["name"] for p in candidate]
    if sorted(names_a) != sorted(names_b):
        raise ValueError(f"the sides compile different programs: {names_a} vs {names_b}")
    by_name = {p["name"]: p for p in candidate}
    return [diff_target(p, by_name[p["name"]]) for p in baseline]


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def explain_lines(diffs: list[TargetDiff], verdict: str | None = None) -> list[str]:
    """A readable account of :func:`diff_programs`' result.

    Args:
        diffs: The targets of one case.
        verdict: The timing verdict of the case, when there is one (``slower``, ``faster``,
            ``same``, ...); with ``slower`` or ``faster`` and identical programs, the text says
            the cause is below HLO (:data:`BELOW_HLO`). That holds whenever the optimized HLO
            is identical, even if the jaxpr or StableHLO differ.
    """
    out = []
    for d in diffs:
        first = d.first_difference
        runs_same = d.identical["hlo"]
        if first is None:
            out.append(f"{d.name}: identical programs (jaxpr, StableHLO and optimized HLO, names "
                       "and metadata set aside)")  # fmt: skip
        elif runs_same:
            differ = [LEVEL_NAMES[lv] for lv in d.identical if not d.identical[lv]]
            out.append(f"{d.name}: identical where it runs (optimized HLO, names and metadata "
                       f"set aside); {', '.join(differ)} differ, as context, not the cause: "
                       "they optimize to the same program")  # fmt: skip
        else:
            same = [LEVEL_NAMES[lv] for lv in d.identical if d.identical[lv]]
            kept = f"; identical: {', '.join(same)}" if same else ""
            differ = [LEVEL_NAMES[lv] for lv in d.identical if not d.identical[lv]]
            at = LEVELS.index(first)
            above = [LEVEL_NAMES[lv] for lv in LEVELS[:at] if not d.identical[lv]]
            context = (f" (the {' and '.join(above)} differs too, but leads to an identical "
                       f"{LEVEL_NAMES[LEVELS[at - 1]]}: context)" if above else "")  # fmt: skip
            out.append(f"{d.name}: {', '.join(differ)} differ{kept}. First at "
                       f"{LEVEL_NAMES[first]}{context}: {WHERE[first]}.")  # fmt: skip
        for key, (a, b) in d.counts.items():
            out.append(f"  {key}: {a} -> {b} ({b - a:+d})")
        model = " (XLA's cost model's figure: the optimized programs are identical)"
        share = (f", one device's share of a program split over {d.partitions[0]} -> "
                 f"{d.partitions[1]} devices" if max(d.partitions) > 1 else "")  # fmt: skip
        for key, (a, b) in d.cost.items():
            out.append(f"  XLA {key}: {_fmt(a)} -> {_fmt(b)}{share}{model if runs_same else ''}")
        for key, (a, b) in d.memory.items():
            out.append(f"  {key.removesuffix('_in_bytes').replace('_', ' ')} bytes: "
                       f"{_fmt(a)} -> {_fmt(b)}")  # fmt: skip
        if d.phases_s:
            phases = ", ".join(f"{k.replace('_', ' ')} {a:.3f} -> {b:.3f}"
                               for k, (a, b) in d.phases_s.items())  # fmt: skip
            out.append(f"  compile phases, s: {phases}")
        for key, (a, b) in d.flags.items():
            out.append(f"  flag {key}: {a!r} -> {b!r}")
        if d.truncated:
            out.append(f"  cut at capture (compared as kept): {', '.join(d.truncated)}")
        for level, lines, left_out in ((first, d.first_diff, d.first_diff_left_out),
                                       ("hlo", d.hlo_diff, d.diff_lines_left_out)):  # fmt: skip
            if lines:
                out.append(f"  {LEVEL_NAMES[level]}, normalised (unified diff):")
                out += [f"    {line}" for line in lines]
                if left_out:
                    out.append(f"    ... {left_out} more diff lines")
    if verdict in ("slower", "faster") and all(d.identical["hlo"] for d in diffs):
        out.append(f"The case is {verdict}, yet {BELOW_HLO}")
    return out
